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


def test_a_one_tier_rail_optimized_fabric_is_said_to_join_no_rails():
    """walk28: a lab's 256 H100 under one SN5600 leaf per rail (`kind = "rail_optimized"`, one tier: no spine)
    was described with a bisection of 6.4 TB/s and a 256-GPU non-blocking group and no word that no switch joins
    two rails, where the same fabric as `kind = "rail_only"` says it; the two route alike (an all-to-all of 1 GiB
    over the 256 GPUs takes the same time on both). A rail-optimized fabric of one tier with a leaf per rail
    now gets rail-only's note."""
    one_tier = (*LAB, "--set", "cluster.num_units=1", "--unset", "fabric.tiers[spine]")
    notes = {k: [line for line in run_cli("describe", *one_tier, "--set", f"fabric.kind={k}", check=True)
                 .stdout.splitlines() if line.startswith("note: rail-only")] for k in ("rail_optimized", "rail_only")}
    assert notes["rail_only"] and notes["rail_optimized"]
    assert "no switch joins two rails" in notes["rail_optimized"][0]
    assert "rail-optimized of one tier" in notes["rail_optimized"][0]
    two_tier = run_cli("describe", *LAB, check=True).stdout
    assert "note: rail-only" not in two_tier  # its spines join the rails
