"""regpp73 (regtree71's Left 4): ``NCCL_SCATTER_XDC=0`` as a region's ``[nccl] scatter_xdc = false``.

NVIDIA/nccl branch ``cross-dc``, commit 18a07eeebe485ae00755615ced44739d20970560 (PR #1659), src/graph/connect.cc:
``NCCL_PARAM(ScatterXDc, "SCATTER_XDC", 1)`` (line 91); ``channelToNode`` (lines 94-105) adds the channel index to
``commId`` only when the parameter is set, so with 0 every channel crosses from the same node; ``connectRings``
(lines 143-158) leaves the DC from that node and enters the next at ``crossNode + 1``: a ring's crossing has one
node's NICs each way; ``rootNodeTree0`` (lines 190-195) puts the primal roots on that node and the dual roots on its
neighbour: a tree's, two nodes'. DGX H100: 8 ConnectX-7 NICs a server at 400 Gb/s (50 GB/s;
../shared/data/hardware.md, DGX H100 RA); NCCL's 16 channels (topo/data/profiles/nccl/2.30.7.toml [channels]).

- the flat ring at 1 GiB on 2 x 256 GPUs over a fat DCI (64 x 800G): default 16 channels on 16 nodes' NICs,
  ``2(N-1)/N S / (16 x 50 GB/s)``; scattering off, one node's 8 NICs, ``2(N-1)/N S / (8 x 50 GB/s)``, twice;
- the tree: two nodes' 16 NICs, the same as the default's 16 channels on DGX H100; with 4 NICs a server (``server.nics
  = 4``), 8 NICs against the default's 16 (one a channel): ``S / (8 x 50 GB/s)``.
"""

import pytest

from conftest import run_cli
from topo.engine.region_estimate import crossing_nics, estimate_region
from topo.fabric.region import build_region

S = 2 ** 30
NIC_Bps = 50e9
N = 512


def _region(tmp_path, scatter: str | None, nics: int = 8):
    sites = "".join(f'[[sites]]\nname = "{s}"\nspec = "dgx-h100-superpod"\n'
                    f'set = ["cluster.num_units=1", "server.nics={nics}"]\n' for s in ("east", "west"))
    nccl = "" if scatter is None else f"[nccl]\nscatter_xdc = {scatter}\n"
    f = tmp_path / f"x{scatter}{nics}.toml"
    f.write_text(f'name = "xdc"\n{sites}{nccl}[interconnect]\ntopology = "mesh"\ndistance_km = 40\n'
                 'latency_per_km = "4.9 us"\nequipment_latency = "50 us"\nwaves = 64\nwave_rate = "800 Gb/s"\n'
                 'attach = "top"\n')
    return f


def _dci_bw_s(path, algorithm):
    return estimate_region(build_region(str(path)), "all_reduce", [S], algorithm).results[0].phases["dci"][
        "bandwidth_s"]


def test_the_ring_crosses_through_one_node_without_scattering(tmp_path):
    ring = 2 * (N - 1) / N * S
    assert _dci_bw_s(_region(tmp_path, None), "ring") == pytest.approx(ring / (16 * NIC_Bps), rel=1e-9)
    assert _dci_bw_s(_region(tmp_path, "true"), "ring") == pytest.approx(ring / (16 * NIC_Bps), rel=1e-9)
    assert _dci_bw_s(_region(tmp_path, "false"), "ring") == pytest.approx(ring / (8 * NIC_Bps), rel=1e-9)


def test_the_tree_crosses_through_two_nodes_without_scattering(tmp_path):
    assert _dci_bw_s(_region(tmp_path, "false"), "tree") == pytest.approx(S / (16 * NIC_Bps), rel=1e-9)
    assert _dci_bw_s(_region(tmp_path, None, 4), "tree") == pytest.approx(S / (16 * NIC_Bps), rel=1e-9)
    assert _dci_bw_s(_region(tmp_path, "false", 4), "tree") == pytest.approx(S / (8 * NIC_Bps), rel=1e-9)
    f = build_region(str(_region(tmp_path, None, 4))).fabrics[0]
    assert crossing_nics(f, 16, None, 2) == 8 and crossing_nics(f, 16) == 16 and crossing_nics(f, 4, None, 2) == 4


def test_a_bad_value_is_one_line(tmp_path):
    path = _region(tmp_path, '"off"')
    p = run_cli("estimate", str(path), "--size", "1GiB")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "nccl.scatter_xdc" in p.stderr, p.stderr
