"""NCCL's flat tree and ring cross the sites through one NIC a channel, not through the whole span (regtree71).

NVIDIA/nccl branch ``cross-dc`` (commit 18a07ee, src/graph/connect.cc; ../shared/data/multisite.md section 2):
``connectTrees`` chains tree channel ``c``'s DC root rank (``treeToParent`` of the root node) to the next DC's
root rank (``treeToChild0``), and ``connectRings`` sends ring channel ``c`` from one rank of one node
(``getCrossNodeForRing``) to one rank of the next DC; ``NCCL_SCATTER_XDC=1`` (the default) puts each channel on
another node. So a tree's ``S`` each way crosses through ``c`` NICs (``c`` = NCCL's channels, 16 in the bundled
profile: ``topo/data/profiles/nccl/2.30.7.toml`` [channels], from NVIDIA/nccl issue #1453's logs), each at one
NIC's rate (DGX H100: 400 Gb/s ConnectX-7, 50 GB/s), and the span's capacity bounds it too:

- fat DCI (64 x 800G = 6.4 TB/s a direction): the NICs bind, ``S / (16 x 50 GB/s)`` = 1.342 ms at 1 GiB (main
  priced it ``S / 6.4 TB/s`` = 167.8 us, the span's whole capacity);
- thin DCI (1 x 100G = 12.5 GB/s): the span binds, ``S / 12.5 GB/s`` = 85.9 ms at 1 GiB.

The ring's ``2(N-1)/N S`` across each boundary likewise; the hierarchical ways cross through every GPU's NICs
(each GPU all-reduces its own shard), unchanged.
"""

import pytest

from topo.engine.region_estimate import crossing_nics, estimate_region, region_channels
from topo.fabric.region import build_region

S = 2 ** 30
NIC_Bps = 400e9 / 8  # DGX H100's ConnectX-7, 400 Gb/s
CHANNELS = 16  # topo/data/profiles/nccl/2.30.7.toml [channels]


def _region(tmp_path, waves: int, rate_Gbps: int):
    sites = "".join(f'[[sites]]\nname = "{s}"\nspec = "dgx-h100-superpod"\nset = ["cluster.num_units=1"]\n'
                    for s in ("east", "west"))
    f = tmp_path / f"r{waves}x{rate_Gbps}.toml"
    f.write_text(f'name = "r{waves}x{rate_Gbps}"\n{sites}[interconnect]\ntopology = "mesh"\ndistance_km = 40\n'
                 f'latency_per_km = "4.9 us"\nequipment_latency = "50 us"\nwaves = {waves}\n'
                 f'wave_rate = "{rate_Gbps} Gb/s"\nattach = "top"\n')
    return build_region(str(f))


@pytest.fixture(scope="module")
def fat(tmp_path_factory):
    return _region(tmp_path_factory.mktemp("fat"), 64, 800)


@pytest.fixture(scope="module")
def thin(tmp_path_factory):
    return _region(tmp_path_factory.mktemp("thin"), 1, 100)


def _dci(region, algorithm):
    row = estimate_region(region, "all_reduce", [S], algorithm).results[0]
    return row.phases["dci"]


def test_channels_are_the_profiles(fat):
    assert region_channels(fat) == CHANNELS


def test_tree_crosses_through_one_nic_a_channel_on_a_fat_dci(fat):
    dci = _dci(fat, "tree")
    assert dci["bandwidth_s"] == pytest.approx(S / (CHANNELS * NIC_Bps), rel=1e-9)  # 1.342 ms, not S / 6.4 TB/s
    assert dci["bound"] == "nic"


def test_tree_is_bound_by_the_span_on_a_thin_dci(thin):
    dci = _dci(thin, "tree")
    assert dci["bandwidth_s"] == pytest.approx(S / (100e9 / 8), rel=1e-9)
    assert dci["bound"].startswith("dci:")


def test_ring_crosses_through_one_nic_a_channel(fat):
    N = fat.num_gpus
    dci = _dci(fat, "ring")
    assert dci["bandwidth_s"] == pytest.approx(2 * (N - 1) / N * S / (CHANNELS * NIC_Bps), rel=1e-9)


def test_hierarchical_still_crosses_through_every_nic(fat):
    dci = _dci(fat, "hierarchical")  # 2(K-1)/K S = S a site: the span's 6.4 TB/s binds, not 256 NICs' 12.8 TB/s
    assert dci["bandwidth_s"] == pytest.approx(S / (64 * 800e9 / 8), rel=1e-9)


def test_crossing_nics_at_most_the_sites(fat):
    f = fat.fabrics[0]
    every = f.num_gpus * f.layout.nics_per_server / f.layout.gpus_per_server  # 256 GPUs, 8 NICs a server of 8
    assert crossing_nics(f) == every == 256
    assert crossing_nics(f, 16) == 16
    assert crossing_nics(f, 10 ** 6) == every
