"""net66: walk25's leftovers (section 269, "Left"), each one rule in one place with a test seen failing without it."""

import pytest
from conftest import run_cli

from topo.engine.profile_data import bundled_files, in_network_reduction

# dgx-h100-superpod with one scalable unit: 2 tiers of QM9700 (InfiniBand NDR) without sharp.
ONE_SU = ("dgx-h100-superpod", "--set", "cluster.num_units=1")
AR = ("-c", "all_reduce", "-g", "64", "-b", "1G", "-e", "1G")


@pytest.mark.parametrize("tech", ["roce", "oci_roce", "gcp_roce", "efa", "efa_v4", "gcp_tcpx", "gcp_tcpxo"])
def test_sharp_is_refused_where_the_switches_cannot_reduce(tech):
    """walk25: `sharp = true` on a RoCE fabric was priced as SHARP (1 GiB at 65,536: busbw 318.6 -> 567.8 GB/s).
    NVIDIA SHARP Rev 3.13.0's device list (https://docs.nvidia.com/networking/display/sharpv3130/general-information)
    names only InfiniBand Quantum, Quantum-2 and Quantum-3 switches; the network files say so in
    ``in_network_reduction`` and the spec loader refuses the key elsewhere: one line naming the file, the key,
    the value and what is allowed."""
    proc = run_cli("estimate", *ONE_SU, "--set", f"fabric.technology={tech}", "--set",
                   "fabric.tiers[spine].sharp=true", *AR)
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("error: topologies/dgx-h100-superpod.toml (--set fabric.tiers[spine].sharp=true): "
                          "fabric.tiers[1].sharp: true on the 'spine' tier")
    assert f"topo/data/profiles/network/{tech}.toml: in_network_reduction = 0" in err
    assert err.endswith("allowed: sharp = false, or fabric.technology one of infiniband_hdr, infiniband_ndr, "
                        "infiniband_xdr")


def test_sharp_stays_on_infiniband():
    """The same switches on InfiniBand NDR (Quantum-2 is on NVIDIA's SHARP device list) run SHARP."""
    out = run_cli("estimate", *ONE_SU, "--set", "fabric.tiers[leaf].sharp=true", "--set",
                  "fabric.tiers[spine].sharp=true", "-a", "sharp", *AR, check=True).stdout
    assert "sharp" in out


def test_the_rule_is_in_the_network_files():
    """Every bundled network file says whether its switches reduce; only InfiniBand's do (SHARP's device list)."""
    reduces = {n for n in bundled_files()["network"] if in_network_reduction(n)[0]}
    assert reduces == {"infiniband_hdr", "infiniband_ndr", "infiniband_xdr"}
