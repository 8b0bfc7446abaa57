"""defaults74: ``topo train``'s defaults as the frameworks' (walk33's main finding), and a published row's command."""
import json
import shlex

import pytest
from published_setups import published_setups, training_accuracy

from row_command import command_text
from topo.cli.main import main
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

LLAMA70 = ["train", "dgx-h100-superpod", "--unset", "cluster.num_units", "--set", "cluster.num_gpus=64", "--set",
           "fabric.servers_per_unit=8", "--model", "llama3-70b", "--tp", "4", "--pp", "8", "--dp", "2",
           "--global-batch", "128", "--seq", "8192", "--precision", "fp8"]


def test_pipeline_overlap_defaults_on_with_an_interleaved_pipeline():
    # Megatron-LM@d98e8a64 megatron/training/arguments.py lines 1000-1018, 3118-3120: overlap_p2p_comm on unless
    # --no-overlap-p2p-communication, off without the interleaved schedule; NeMo@8cfedd72
    # megatron_comm_overlap.py lines 153-163: on exactly when pp > 1 and vpp > 1
    assert make_layout(tp=1, pp=4, vpp=2, dp=1, global_batch=8).overlap_pp is True
    assert make_layout(tp=1, pp=4, dp=1, global_batch=8).overlap_pp is False
    assert make_layout(tp=1, pp=4, vpp=2, dp=1, global_batch=8, overlap_pp=False).overlap_pp is False
    assert make_layout(tp=1, pp=4, dp=1, global_batch=8, overlap_pp=True).overlap_pp is True


def _pp_row(out: str) -> list:
    row = next(ln for ln in out.splitlines() if ln.startswith("pp "))
    return row.split()[1:3]


def test_train_takes_and_states_the_pipeline_overlap_default(capsys):
    # walk33: Llama 3 70B tp4 pp8 vpp5 on 64 H100 printed pp 751.5 ms exposed (6.2% of the step) without
    # --overlap pp=on; the default now hides the sends as Megatron-LM does, leaving the fill's (pp - 1) exposed
    assert main([*LLAMA70, "--vpp", "5"]) == 0
    out = capsys.readouterr().out
    assert "overlap_pp on: the default with vpp > 1" in out
    assert main([*LLAMA70, "--vpp", "5", "--overlap", "pp=on"]) == 0
    explicit = capsys.readouterr().out
    assert _pp_row(out) == _pp_row(explicit)
    assert main([*LLAMA70, "--vpp", "5", "--overlap", "pp=off"]) == 0
    off = capsys.readouterr().out
    assert "overlap_pp off: set against the default, which is on at vpp 5" in off
    assert _pp_row(off) != _pp_row(out)
    assert main([*LLAMA70[:-4], "--global-batch", "128", "--seq", "8192", "--precision", "fp8"]) == 0
    assert "overlap_pp off: the default at vpp 1" in capsys.readouterr().out


def _benchmark_step(setup) -> float:
    fabrics, engines = training_accuracy._engines([setup])
    return estimate_step(fabrics[setup["spec"]], setup["model"], setup["lay"],
                         engine=training_accuracy.engine_of(engines, setup), convention="6n").step_time_s


def test_a_published_rows_printed_command_gives_the_benchmarks_step(capsys):
    # walk33: a README accuracy row could not be reproduced from README/--help; --command prints the line that does.
    # One dense row (Llama 3 70B, tp4 pp8 vpp5, FP8 current scaling) and one MoE row (DeepSeek-V3 on GB200, HybridEP)
    runs = {s["run"]: s for s in published_setups()}
    for run in ("mb2511_h100_llama3_70b", "mb2602_gb200_deepseekv3"):
        text = command_text(list(runs.values()), run)
        assert text.startswith("topo train ") and "note:" not in text, text
        assert main(shlex.split(text)[1:] + ["--json"]) == 0
        step_s = json.loads(capsys.readouterr().out)["step_time_s"]
        assert step_s == pytest.approx(_benchmark_step(dict(runs[run])), rel=1e-3), run


def test_an_unknown_run_gets_one_line():
    text = command_text(published_setups(), "no_such_run")
    assert text.count("\n") == 0 and "'no_such_run'" in text and "run_id" in text


def test_a_token_budget_is_echoed_as_written(capsys):
    # walk33: --tokens 15T was echoed as "1.5e+13 tokens"
    assert main([*LLAMA70, "--vpp", "5", "--tokens", "15T"]) == 0
    assert "time to train 15T tokens:" in capsys.readouterr().out
