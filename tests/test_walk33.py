"""walk33: a new user's walk reproducing published runs with topo train and topo plan."""
from topo.cli.main import main


def test_plan_compute_line_small_cluster_keeps_its_digits(capsys):
    # 64 H100 (DGX H100 datasheet: 989 TFLOP/s bf16, 1,979 fp8 dense a GPU): 64 x 989e12 = 0.0633 EFLOP/s and
    # 64 x 1979e12 = 0.127 EFLOP/s; one decimal printed both as "0.1" and the peak ratios to the 100k-H100 cluster as
    # "0.0x" (walk33)
    rc = main(["plan", "dgx-h100-superpod", "--unset", "cluster.num_units", "--set", "cluster.num_gpus=64",
               "--set", "fabric.servers_per_unit=8", "--no-collectives"])
    out = capsys.readouterr().out
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("compute   peak"))
    assert "bf16 0.063 EFLOP/s" in line and "fp8 0.13 EFLOP/s" in line
    budget = out.splitlines()[out.splitlines().index(line) + 1]
    assert " 0.0x" not in budget and "0.01x (bf16)" in budget
