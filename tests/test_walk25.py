"""walk25's fixes: on a RoCE fabric the all-reduce's note no longer tells a network team to turn on SHARP, which
NVIDIA ships for InfiniBand Quantum switches only."""

from conftest import run_cli

# dgx-h100-superpod with one scalable unit: 2 tiers of QM9700 without sharp; the same on RoCE by --set.
ARGS = ("estimate", "dgx-h100-superpod", "--set", "cluster.num_units=1", "-c", "all_reduce", "-g", "64",
        "-b", "1G", "-e", "1G")


def _sharp_note(*extra):
    out = run_cli(*ARGS, *extra, check=True).stdout
    return next(line for line in out.splitlines() if line.startswith("# sharp not considered"))


def test_a_roce_fabric_is_not_told_to_turn_on_sharp():
    """walk25: on a 65,536-H100 RoCE fabric of SN5600 switches, `topo estimate` said "sharp not considered: the
    leaf, spine, core switches cannot reduce in the network (set sharp = true on their tier)", and with it set the
    model ran SHARP over Ethernet. NVIDIA SHARP Rev 3.13.0's device list (General Information,
    https://docs.nvidia.com/networking/display/sharpv3130/general-information) names only InfiniBand Quantum,
    Quantum-2 and Quantum-3 switches; on InfiniBand the hint stays."""
    assert _sharp_note().endswith("(set sharp = true on their tier)")
    roce = _sharp_note("--set", "fabric.technology=roce")
    assert "set sharp = true" not in roce
    assert roce.endswith("(SHARP runs on InfiniBand Quantum switches; this fabric's technology is roce)")
