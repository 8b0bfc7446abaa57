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


def test_a_steps_flop_count_is_printed_a_token_so_it_can_be_redone_by_hand():
    """walk28: `topo train` printed "TFLOPs/GPU 558 (6n)" for Llama 3 8B beside "8.03B parameters (embeddings
    included)", and 6 x 8.03e9 x 2,465,958 tokens/s / 256 GPUs = 464 TFLOP/s, not 558: the 6n count (PaLM,
    Chowdhery et al. 2022, appendix B) leaves out the input embedding and adds the attention scores, 12 l h s a
    token, neither of which the output said. The step now prints the count a token and its parts. Llama 3 8B (arXiv
    2407.21783, table 3): 32 layers, hidden 4,096, vocabulary 128,256; at s = 8,192 the scores are 12 x 32 x 4,096
    x 8,192 = 12.88 GFLOP a token."""
    out = run_cli("train", *LAB, "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--dp", "8",
                  "--global-batch", "8", "--seq", "8192", check=True).stdout.splitlines()
    params = float(next(x for x in out if x.startswith("model ")).split(": ")[1].split("B")[0]) * 1e9
    flop = next(x for x in out if x.startswith("FLOP "))
    n = params - 128_256 * 4_096  # the input embedding, a lookup: not counted
    scores = 12 * 32 * 4_096 * 8_192
    assert f"6 x {n / 1e9:.2f}B" in flop and f"{scores / 1e9:.1f} GFLOP of attention" in flop
    assert f"{(6 * n + scores) / 1e9:.1f} GFLOP a token" in flop
    step = next(x for x in out if x.startswith("step time")).split()
    tokens_per_s = float(step[step.index("tokens/s") + 1].replace(",", ""))
    tflops = float(step[step.index("TFLOPs/GPU") + 1])
    assert abs((6 * n + scores) * tokens_per_s / 8 / 1e12 - tflops) < 1.0  # the printed figure, redone


def test_an_oversubscription_written_as_a_ratio_is_told_the_number_to_write():
    """walk28: `oversubscription = "2:1"`, the form `topo describe` prints in its oversub column, was refused with
    "must be a finite number, got '2:1'": the line now says what to write, the downlink:uplink ratio as one number
    (2 for 2:1), and the key."""
    err = run_cli("describe", *LAB, "--set", "fabric.tiers[leaf].oversubscription=2:1").stderr
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "fabric.tiers[0].oversubscription" in err and "'2:1'" in err and "write 2 for 2:1" in err
