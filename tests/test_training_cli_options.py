"""`topo train`'s layout fields for how the framework runs the step (``cp_comm_type``, ``fp8_param_gather``,
``mamba_mixer``, ``cross_entropy``, ``expert_bias_eager``): the text says which it used, ``--json`` carries them,
and a bad value through ``--layout`` pairs or a layout file is one line naming the source, key, value and what is
allowed, exit 2."""

import json

import pytest

from conftest import run_cli

BASE = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--cp", "2", "--dp", "2",
        "--global-batch", "16"]


def _options_line(stdout):
    return [ln for ln in stdout.splitlines() if ln.startswith("framework options: ")]


def test_text_names_the_options_it_used():
    out = run_cli(*BASE, "--precision", "fp8", "--cp-comm-type", "all_gather", "--layout",
                  "fp8_param_gather=true,cross_entropy=torch_bf16", check=True).stdout
    assert _options_line(out) == ["framework options: cp_comm_type all_gather, fp8_param_gather true, "
                                  "cross_entropy torch_bf16 (layout fields)"]


def test_text_names_cp_comm_type_whenever_cp_runs():
    assert _options_line(run_cli(*BASE, check=True).stdout) == [
        "framework options: cp_comm_type p2p (layout fields)"]
    no_cp = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16"]
    assert _options_line(run_cli(*no_cp, check=True).stdout) == []


def test_json_carries_the_options(tmp_path):
    f = tmp_path / "lay.toml"
    f.write_text('cp_comm_type = "all_gather"\nmamba_mixer = "mamba_ssm"\nexpert_bias_eager = "none"\n')
    lay = json.loads(run_cli(*BASE, "--layout", str(f), "--json", check=True).stdout)["layout"]
    assert (lay["cp_comm_type"], lay["mamba_mixer"], lay["expert_bias_eager"], lay["cross_entropy"],
            lay["fp8_param_gather"]) == ("all_gather", "mamba_ssm", "none", "fused", False)


@pytest.mark.parametrize("pair, needle", [
    ("cp_comm_type=a2a", "error: --layout: cp_comm_type: must be one of 'p2p' or 'all_gather', got 'a2a'"),
    ("mamba_mixer=eager", "error: --layout: mamba_mixer: must be one of 'megatron' or 'mamba_ssm', got 'eager'"),
    ("cross_entropy=fp32", "error: --layout: cross_entropy: must be one of 'fused' or 'torch_bf16', got 'fp32'"),
    ("expert_bias_eager=fc1", "error: --layout: expert_bias_eager: must be one of 'fc2', 'fc1_fc2' or 'none', "
                              "got 'fc1'"),
    ("fp8_param_gather=maybe", "error: --layout: fp8_param_gather: must be true or false, got 'maybe'"),
    ("fp8_param_gather=true", "error: --layout: fp8_param_gather: true gathers FP8 weights, which precision bf16 "
                              "has none of; allowed with precision bf16: false"),
])
def test_bad_pair_is_one_line(pair, needle):
    p = run_cli(*BASE, "--layout", pair)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == needle, p.stderr


def test_bad_file_value_names_the_file(tmp_path):
    f = tmp_path / "lay.toml"
    f.write_text("cp_comm_type = 3\n")
    p = run_cli(*BASE, "--layout", str(f))
    assert p.returncode == 2 and p.stderr.strip() == (
        f"error: {f}: cp_comm_type: must be one of 'p2p' or 'all_gather', got 3"), p.stderr


def test_text_marks_an_option_the_job_gives_nothing_to_change():
    """llama3-8b (model file: no [mamba], no moe.expert_bias) at cp 1: the three options change nothing, and the
    line says so rather than implying they were used."""
    no_cp = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16"]
    out = run_cli(*no_cp, "--layout", "cp_comm_type=all_gather,mamba_mixer=mamba_ssm,expert_bias_eager=none",
                  check=True).stdout
    assert _options_line(out) == [
        "framework options: cp_comm_type all_gather (no effect: cp 1), mamba_mixer mamba_ssm (no effect: llama3-8b "
        "has no Mamba-2 layers), expert_bias_eager none (no effect: llama3-8b has no expert biases) (layout fields)"]


def test_a_toml_boolean_is_shown_as_the_file_writes_it(tmp_path):
    f = tmp_path / "lay.toml"
    f.write_text("cross_entropy = true\n")
    p = run_cli(*BASE, "--layout", str(f))
    assert p.returncode == 2 and p.stderr.strip() == (
        f"error: {f}: cross_entropy: must be one of 'fused' or 'torch_bf16', got true"), p.stderr


def test_plan_names_a_bad_layout_field_by_its_flag():
    """topo plan --model --layout names a bad pair by --layout, as topo train and topo report do."""
    p = run_cli("plan", "dgx-h100-superpod", "--model", "llama3-8b", "--no-collectives", "--layout",
                "tp=8,dp=16,global_batch=64,cp_comm_type=ring")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == (
        "error: --layout: cp_comm_type: must be one of 'p2p' or 'all_gather', got 'ring'"), p.stderr


@pytest.mark.parametrize("pair, shown", [('fp8_param_gather="yes"', "'yes'"), ("fp8_param_gather=1", "1"),
                                         ("overlap_tp=0", "0")])
def test_a_switch_is_a_boolean_not_a_string_or_number(pair, shown):
    """A layout switch takes TOML's true or false; pydantic's lax reading took "yes" and 1 as true silently."""
    key = pair.split("=")[0]
    p = run_cli(*BASE, "--precision", "fp8", "--layout", pair)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == (
        f"error: --layout: {key}: must be true or false, got {shown}"), p.stderr


MOE = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "256",
       "--seq", "4096", "--precision", "fp8", "--dp", "8", "--ep", "8", "--etp", "1"]


def _host_line(stdout):
    return [ln for ln in stdout.splitlines() if ln.startswith("host-bound: ")]


def test_text_names_the_cuda_graph_scope_and_dispatcher_it_used():
    """A partial CUDA graph changes the step (it takes the captured kernels' launches off the host: at 2,048 tokens a
    micro-batch, 3.6 s of host wait eager, 1.1 s with attention and the router captured), so the options line names
    it, and the host-bound line says which parts still launch eagerly rather than calling the step eager; the DeepEP
    dispatcher is named too."""
    moe = [*MOE, "--seq", "2048"]  # short micro-batches: the host bounds the step with and without the graphs
    eager = run_cli(*moe, check=True).stdout
    graphed = run_cli(*moe, "--layout", 'cuda_graph_scope=["attn","moe_router"]', check=True).stdout
    deepep = run_cli(*moe, "--layout", 'cuda_graph_scope=["attn","moe_router"],ep_dispatcher=deepep',
                     check=True).stdout
    assert _options_line(eager) == []
    assert _options_line(graphed) == ['framework options: cuda_graph_scope ["attn", "moe_router"] (layout fields)']
    assert _options_line(deepep) == [
        'framework options: ep_dispatcher deepep, cuda_graph_scope ["attn", "moe_router"] (layout fields)']
    (e,), (g,) = _host_line(eager), _host_line(graphed)
    assert "(eager: no CUDA graph;" in e
    assert 'the kernels outside cuda_graph_scope = ["attn", "moe_router"]' in g and "eager" not in g
    seconds = [float(x.split()[1]) * {"s": 1.0, "ms": 1e-3}[x.split()[2]] for x in (e, g)]
    assert seconds[1] < seconds[0]  # the captured parts' launches are off the host


def test_dispatcher_on_a_dense_model_is_said_to_do_nothing():
    out = run_cli(*BASE, "--cp", "1", "--dp", "4", "--layout", "ep_dispatcher=deepep", check=True).stdout
    assert _options_line(out) == [
        "framework options: ep_dispatcher deepep (no effect: llama3-8b has no experts) (layout fields)"]


def test_text_says_what_the_components_are_and_that_they_add_up():
    """The component table's rows are defined under it (compute, bubble, optimizer, the dimensions' exposed
    communication), and they do add up to the step the text prints (checked on --json's figures); the host wait
    is mentioned only where there is one."""
    dense = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "1024", "--tp", "8", "--pp", "2",
             "--dp", "64", "--global-batch", "256"]
    out = run_cli(*dense, check=True).stdout
    (legend,) = [ln for ln in out.splitlines() if ln.startswith("components add up to the step: ")]
    assert "compute = the busiest pipeline stage's kernels for its 4 micro-batches;" in legend
    assert "bubble = the pipeline's fill and drain" in legend and "not hidden behind compute" in legend
    js = json.loads(run_cli(*dense, "--json", check=True).stdout)
    assert sum(js["breakdown_s"].values()) == pytest.approx(js["step_time_s"], rel=1e-9)
    moe = run_cli(*MOE, "--seq", "2048", check=True).stdout  # short micro-batches: host-bound
    assert "micro-batches (with the host wait below);" in moe and _host_line(moe)
