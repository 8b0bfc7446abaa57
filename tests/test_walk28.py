"""walk28's fixes (a university lab with 32 HGX H100 servers on 400G RoCE pretraining an 8B and a 70B model): a
search's "#1's breakdown" line that dropped the command's own options, a one-tier rail-optimized fabric described
as if its rails were joined, a 6n TFLOP/s figure no one could redo from the printed parameter count, an
oversubscription written as the product prints it refused without saying the form."""

import shlex

from conftest import run_cli

LAB = ("dgx-h100-superpod", "--set", "cluster.num_units=1", "--set", "fabric.technology=roce")


def test_a_searchs_breakdown_line_keeps_the_commands_own_options():
    """walk28: `topo train lab.toml --model llama3-8b --seq 2048 --precision fp8 --search` printed `#1's breakdown:
    topo train SPEC --model llama3-8b --global-batch 512 --tp 2 ...`: the spec as a placeholder, and neither
    --seq nor --precision, so the line run as printed stepped an 8,192-token BF16 job, not the row. The line now
    starts with the spec and every option of the command the row does not set (--set, --seq, --precision, ...);
    run as printed it gives the row's step."""
    out = run_cli("train", *LAB, "--gpus", "32", "--model", "llama3-8b", "--global-batch", "32", "--seq", "2048",
                  "--precision", "fp8", "--search", "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    line = next(line for line in out.splitlines() if line.startswith("#1's breakdown: topo train "))
    flags = shlex.split(line.removeprefix("#1's breakdown: topo train "))
    assert flags[:5] == list(LAB) and "SPEC" not in flags
    assert flags[flags.index("--seq") + 1] == "2048" and flags[flags.index("--precision") + 1] == "fp8"
    assert "--search" not in flags and "--top" not in flags
    again = run_cli("train", *flags, check=True).stdout
    assert "32 x 2048 tokens per step" in again.splitlines()[0] and "(fp8)" in again.splitlines()[0]
    step = again.splitlines()[1].split()[2:4]  # "step time   304.0 ms ..."
    assert " ".join(step) in row
