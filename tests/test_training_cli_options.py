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


_UNSET_AMAX = ("fp8_amax_reduction true (the default: fp8_recipe unset runs Megatron-Core's default recipe, delayed, and "
               "Transformer Engine's reduce_amax), ")
"""amax53: an FP8 layout with no fp8_recipe runs Megatron-Core's default, delayed scaling (Megatron-LM core_v0.12.0
arguments.py ``--fp8-recipe`` default 'delayed'), and the options line says the reduction it brings."""


def test_text_names_the_options_it_used():
    out = run_cli(*BASE, "--precision", "fp8", "--cp-comm-type", "all_gather", "--layout",
                  "fp8_param_gather=true,cross_entropy=torch_bf16", check=True).stdout
    assert _options_line(out) == ["framework options: cp_comm_type all_gather, " + _UNSET_AMAX + "fp8_param_gather true, "
                                  "cross_entropy torch_bf16 (layout fields)"]


def test_text_names_the_fp8_scaling_recipe():
    """The FP8 scaling recipe sets the GEMMs' rate and the quantisation's bytes (kernels.toml ``[fp8_recipe]``):
    the options line names it when the layout sets one (fp8blk35's finding: it was not shown)."""
    out = run_cli(*BASE, "--precision", "fp8", "--layout", "fp8_recipe=blockwise", check=True).stdout
    assert _options_line(out) == ["framework options: cp_comm_type p2p, fp8_recipe blockwise (layout fields)"]


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
    ("cp_comm_type=a2a+p2p", "error: --layout: cp_comm_type: must be one of 'p2p', 'all_gather' or 'a2a', "
                            "got 'a2a+p2p'"),
    ("mamba_mixer=eager", "error: --layout: mamba_mixer: must be one of 'megatron' or 'mamba_ssm', got 'eager'"),
    ("cross_entropy=fp32", "error: --layout: cross_entropy: must be one of 'fused', 'te', 'te_fp32_grad', "
                           "'torch_bf16' or 'megatron_unfused', got 'fp32'"),
    ("expert_bias_eager=fc1", "error: --layout: expert_bias_eager: must be one of 'fc2', 'fc1_fc2' or 'none', "
                              "got 'fc1'"),
    ("fp8_param_gather=maybe", "error: --layout: fp8_param_gather: must be true or false, got 'maybe'"),
    ("fp8_param_gather=true", "error: --layout: fp8_param_gather: true gathers FP8 weights, which precision bf16 "
                              "has none of; allowed with precision bf16: false"),
])
def test_bad_pair_is_one_line(pair, needle):
    p = run_cli(*BASE, "--layout", pair)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == needle, p.stderr


@pytest.mark.parametrize("key", ["weight_bytes", "gather_bytes", "grad_bytes", "grad_reduce_bytes",
                                 "expert_grad_reduce_bytes", "ep_dispatch_bytes"])
def test_an_element_wider_than_fp64_is_one_line_naming_its_key(key):
    """A tensor's element is at most 8 bytes (fp64; training runs 1-4): 1e30 was taken and failed later as
    'member[dp].size: a size is at most 1 PiB', and 64 (gather_bytes) priced a 64-byte gather. 8 is accepted."""
    p = run_cli(*BASE, "--layout", f"{key}=1e30")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == (
        f"error: --layout: {key}: must be <= 8.0, got 1e+30"), p.stderr
    if key not in ("expert_grad_reduce_bytes", "ep_dispatch_bytes"):  # llama3-8b is dense: those two need experts
        assert run_cli(*BASE, "--layout", f"{key}=8").returncode == 0


def test_bad_file_value_names_the_file(tmp_path):
    f = tmp_path / "lay.toml"
    f.write_text("cp_comm_type = 3\n")
    p = run_cli(*BASE, "--layout", str(f))
    assert p.returncode == 2 and p.stderr.strip() == (
        f"error: {f}: cp_comm_type: must be one of 'p2p', 'all_gather' or 'a2a', got 3"), p.stderr


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
        f"error: {f}: cross_entropy: must be one of 'fused', 'te', 'te_fp32_grad', 'torch_bf16' or "
        "'megatron_unfused', got true"), p.stderr


def test_plan_names_a_bad_layout_field_by_its_flag():
    """topo plan --model --layout names a bad pair by --layout, as topo train and topo report do."""
    p = run_cli("plan", "dgx-h100-superpod", "--model", "llama3-8b", "--no-collectives", "--layout",
                "tp=8,dp=16,global_batch=64,cp_comm_type=ring")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == (
        "error: --layout: cp_comm_type: must be one of 'p2p', 'all_gather' or 'a2a', got 'ring'"), p.stderr


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
    assert _options_line(eager) == ["framework options: " + _UNSET_AMAX[:-2] + " (layout fields)"]
    assert _options_line(graphed) == ["framework options: " + _UNSET_AMAX
                                      + 'cuda_graph_scope ["attn", "moe_router"] (layout fields)']
    assert _options_line(deepep) == ["framework options: " + _UNSET_AMAX
                                     + 'ep_dispatcher deepep, cuda_graph_scope ["attn", "moe_router"] (layout fields)']
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
    moe = run_cli(*MOE, "--seq", "2048", check=True).stdout  # short micro-batches: a host wait (at 4,096 none)
    assert "micro-batches (with the host wait below);" in moe and _host_line(moe)


def _step_s(*argv):
    return json.loads(run_cli(*argv, "--json", check=True).stdout)["step_time_s"]


@pytest.mark.parametrize("fields, shown", [
    ("fp8_recipe=delayed,fp8_amax_reduction=false",
     "fp8_recipe delayed (no effect: per-tensor scaling, priced as fp8_recipe unset (Megatron-Core's default, delayed) "
     "is; fp8_amax_reduction (its "
     "default) adds Transformer Engine's amax reductions, fp8_scale_inverse_kernel = true its 2.0-2.6 scale inverse "
     "kernels), fp8_amax_reduction false (set by the layout)"),
])
def test_a_per_tensor_recipe_on_a_dense_model_is_marked_no_effect(fields, shown):
    """Per-tensor FP8 (delayed without TE's amax reduction) on a dense model prices as the default
    (kernels.fp8_recipe_costs: ratio 1, no scale bytes): the line says so (walk8: a user comparing recipes saw the same step for both and no
    word why), and the step agrees."""
    no_cp = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16", "--precision", "fp8"]
    out = run_cli(*no_cp, "--layout", fields, check=True).stdout
    assert _options_line(out) == [f"framework options: {shown} (layout fields)"]
    # the unset recipe runs delayed scaling's amax reduction (amax53): the same step without it
    assert _step_s(*no_cp, "--layout", fields) == _step_s(*no_cp, "--layout", "fp8_amax_reduction=false")


def test_delayed_scaling_with_te_s_work_is_not_marked():
    """fp8dl51: delayed scaling with Transformer Engine's amax reduction (and TE 2.0-2.6's scale inverse kernel)
    prices their work (topo/training/fp8_amax.py): no "no effect" note, and a longer step."""
    no_cp = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16", "--precision", "fp8"]
    te = "fp8_recipe=delayed,fp8_amax_reduction=true,fp8_scale_inverse_kernel=true"
    out = run_cli(*no_cp, "--layout", te, check=True).stdout
    assert _options_line(out) and "no effect" not in _options_line(out)[0]
    assert _step_s(*no_cp, "--layout", te) > _step_s(*no_cp, "--layout", "fp8_recipe=delayed")


def test_current_scaling_is_not_marked():
    """Current scaling computes each quantisation's amax and scale in kernels of their own (each expert's rows on an
    MoE model; a dense model's attention output, MLP activation and every output gradient): it changes the step."""
    dense = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16", "--precision", "fp8"]
    out = run_cli(*dense, "--layout", "fp8_recipe=current", check=True).stdout
    # TP8 with sequence parallelism: the line also names the TP amax all-reduce current scaling runs (rev57a)
    assert _options_line(out) == ["framework options: fp8_recipe current, fp8_amax_reduction true (the default with "
                                  "current scaling and sequence parallelism: Transformer Engine all-reduces each "
                                  "gathered input's amax over the TP group) (layout fields)"]
    assert _step_s(*dense, "--layout", "fp8_recipe=current") > _step_s(*dense, "--layout", "fp8_recipe=delayed")
    moe = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--dp", "16", "--ep", "8", "--global-batch",
           "32", "--precision", "fp8"]
    out = run_cli(*moe, "--layout", "fp8_recipe=current", check=True).stdout
    assert _options_line(out) == ["framework options: fp8_recipe current (layout fields)"]
    assert _step_s(*moe, "--layout", "fp8_recipe=current") > _step_s(*moe)


def test_blockwise_on_blackwell_says_it_runs_as_mxfp8():
    """Transformer Engine emulates block-wise scaling on Blackwell with MXFP8 GEMMs (kernels.toml [fp8_recipe],
    TransformerEngine PR #2157): the options line says so, and each linear GEMM is MXFP8's, less MXFP8's weight
    swizzle (``swizzle_scales_for_gemm`` returns at once for block-wise scales), plus the conversion of both
    operands' scales every GEMM call (``gemm.cpp`` ``convert_block_scaling_to_mxfp8_tensor(A)`` and ``(B)`` under
    ``sm_arch() >= 100``, lines 290-295 at TE v2.14 f031cf87): forward 2 kernels, backward 4, a launch gap each
    and their bytes (FP32 scales read, 4 B a 1x128 block of X / dY, a 128x128 block of W; E8M0 written, 1 B a 1x32
    block) at HBM rate. So the step is above MXFP8's."""
    from dataclasses import replace
    from topo.training.gpus import gpu_compute
    from topo.training.kernels import memory_s
    from topo.training.model import load_model
    from topo.training.operators import block_ops, kernels_launched, op_time_s
    from topo.training.parallel import make_layout
    from topo.training.weight_swizzle import gathered_swizzles, weight_swizzles

    gb = ["train", "gb200-nvl72-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "8", "--global-batch", "64",
          "--precision", "fp8"]
    out = run_cli(*gb, "--layout", "fp8_recipe=blockwise", check=True).stdout
    assert _options_line(out) == ["framework options: fp8_recipe blockwise (run as mxfp8: Transformer Engine "
                                  "emulates block-wise scaling on Blackwell with MXFP8 GEMMs) (layout fields)"]
    assert _step_s(*gb, "--layout", "fp8_recipe=blockwise") > _step_s(*gb, "--layout", "fp8_recipe=mxfp8")
    g, model = gpu_compute("GB200"), load_model("llama3-8b")
    km = g.kernels

    def linears(recipe):
        lay = make_layout(tp=8, dp=8, global_batch=64, precision="fp8", fp8_recipe=recipe)
        return [op for kind in ("*", "-") for op in block_ops(model, lay, kind, g.generation)
                if op.kind == "gemm" and op.linear]

    pairs = list(zip(linears("blockwise"), linears("mxfp8")))
    assert {bw.name for bw, _ in pairs} == {"qkv", "out_proj", "fc1", "fc2"}
    for bw, mx in pairs:
        m, n, k = bw.m, bw.n, bw.k
        w, a = n * k * (4 / 128 ** 2 + 1 / 32), 4 / 128 + 1 / 32  # a weight's bytes; an activation's an element
        for backward, kernels, nbytes in ((False, 2, w + a * m * k), (True, 4, w + 2 * a * m * n + a * m * k)):
            # MXFP8's swizzles of the weight and of the sequence-parallel gathered operand (section 410), which
            # block-wise's conversions of both operands replace
            swz = weight_swizzles(mx, "fp8", backward) + gathered_swizzles(mx, "fp8", backward)
            assert kernels_launched(bw, "fp8", backward) == kernels_launched(mx, "fp8", backward) - swz + kernels
            as_mx = op_time_s(replace(mx, mxfp8=False), g, "fp8", backward, fp8_recipe="mxfp8")
            assert op_time_s(bw, g, "fp8", backward, fp8_recipe="blockwise") == pytest.approx(
                as_mx + kernels * km.launch_gpu_s + memory_s(km, nbytes), rel=1e-12)


def test_help_names_the_fp8_recipes():
    out = run_cli("train", "--help", check=True).stdout
    assert "fp8_recipe=delayed|current|blockwise|mxfp8" in " ".join(out.split())


def _comm_rows(stdout):
    """The collectives' table of topo train's text: the lines after its header, up to the blank line."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("dim  collective"))
    return lines[start + 1:lines.index("", start)]


def test_the_tp_rows_say_which_pass_they_run_in():
    """walk8: with sequence parallelism the collectives' table had five TP rows, all 128 MiB at the same calls,
    that only differed by name (all_gather, reduce_scatter, all_gather, all_gather, reduce_scatter). Each says its
    pass: forward (AG, RS per block), backward (AG of the output gradient, AG of the input again for the weight
    gradient, RS of the input gradient: step._tp_traffic). Full recomputation runs the forward twice, so its
    forward rows have twice the backward's calls; without it they match."""
    args = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "2", "--dp", "4",
            "--global-batch", "32"]
    for recompute, ratio in (("none", 1.0), ("full", 2.0)):
        doc = json.loads(run_cli(*args, "--recompute", recompute, "--json", check=True).stdout)
        comm = [c for c in doc["comm"] if c["dim"] == "tp"]
        # section 341 (stagetp73): the pacing (last) stage's output layer and loss also run TP collectives, each
        # ``what`` starting "head:"; full recomputation reruns the transformer layers only, so the head's forward
        # keeps one call a micro-batch (8) either way
        head = [(c["collective"], c["phase"], c["calls_per_step"]) for c in comm if c["what"].startswith("head:")]
        assert head == [("all_gather", "forward", 8.0), ("all_gather", "backward", 8.0),
                        ("reduce_scatter", "backward", 8.0), ("all_reduce", "forward", 8.0),
                        ("all_reduce", "forward", 8.0)], head
        # tidy76: the replicated gradients' all-reduce, once a step after the backward (finalize_model_grads)
        assert [(c["collective"], c["phase"], c["calls_per_step"]) for c in comm
                if c["what"] == "replicated gradients"] == [("all_reduce", "step", 1.0)]
        tp = [(c["collective"], c["phase"], c["calls_per_step"]) for c in comm
              if not c["what"].startswith("head:") and c["what"] != "replicated gradients"]
        fwd = [(n, k) for n, p, k in tp if p == "forward"]
        bwd = [(n, k) for n, p, k in tp if p == "backward"]
        assert sorted(n for n, _ in fwd) == ["all_gather", "reduce_scatter"]
        assert sorted(n for n, _ in bwd) == ["all_gather", "all_gather", "reduce_scatter"]
        assert {k for _, k in fwd} == {ratio * bwd[0][1]} and len({k for _, k in bwd}) == 1
        assert len(fwd) + len(bwd) == len(tp)
        assert all(c["phase"] == "" for c in doc["comm"] if c["dim"] != "tp")
    rows = [ln.split()[1:3] for ln in _comm_rows(run_cli(*args, check=True).stdout) if ln.startswith("tp ")]
    assert rows == [["all_gather", "forward"], ["reduce_scatter", "forward"], ["all_gather", "backward"],
                    ["all_gather", "backward"], ["reduce_scatter", "backward"], ["all_gather", "forward"],
                    ["all_gather", "backward"], ["reduce_scatter", "backward"], ["all_reduce", "forward"],
                    ["all_reduce", "forward"], ["all_reduce", "step"]]  # tidy76: the replicated gradients
    # without sequence parallelism: one all-reduce of the activation each pass and block, seq 8192 x hidden 4096 x 2
    # bytes = 64 MiB, 8 micro-batches x 16 layers a stage x 2 blocks = 256 calls (llama3-8b.toml: 32 layers, hidden
    # 4,096); and the next stage's gather of a pipeline send (Megatron's scatter/gather: each TP rank sends 1/tp,
    # 8 MiB; 2 x (8 micro-batches + pp - 1) = 18 sends, step._pp_traffic)
    rows = [ln.split()[1:6] for ln in _comm_rows(run_cli(*args, "--no-sequence-parallel", check=True).stdout)
            if ln.startswith("tp ")]
    # section 341: the last stage's heads, once a micro-batch: the output layer's input gradient all-reduced (64 MiB,
    # Megatron-LM@7094270c tensor_parallel/layers.py line 489) and the fused loss's all-reduces of T = 8,192 and 2T
    # FP32 values (32 and 64 KiB, fused_cross_entropy.py lines 42, 94, 112)
    assert rows == [["all_reduce", "forward", "64", "MiB", "256"], ["all_reduce", "backward", "64", "MiB", "256"],
                    ["all_reduce", "backward", "(head:", "output", "layer"],
                    ["all_reduce", "forward", "(head:", "loss,", "max"],  # ux107: each says what it reduces
                    ["all_reduce", "forward", "(head:", "loss,", "target"],
                    ["all_gather", "pipeline", "8", "MiB", "18"]], rows
    sizes = [ln.split(")")[1].split()[:3] for ln in _comm_rows(run_cli(*args, "--no-sequence-parallel",
                                                                        check=True).stdout) if "(head:" in ln]
    assert sizes == [["64", "MiB", "8"], ["32", "KiB", "8"], ["64", "KiB", "8"]], sizes


def test_more_gpus_than_the_fabric_is_named_before_the_batch_rule():
    """walk8: `--gpus 100000 --global-batch 4096` on gb200-nvl72-superpod (32 racks x 72 = 2,304 GPUs) was told
    that 4,096 sequences do not split into dp 100,000, not that the fabric is 43x too small."""
    p = run_cli("train", "gb200-nvl72-superpod", "--model", "deepseek-v3-671b", "--gpus", "100000",
                "--global-batch", "4096")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("error: --gpus: 100,000 GPUs asked, but the fabric has 2,304; grow the spec's "
                               "[cluster]"), p.stderr


def test_ep_comm_sms_is_said_to_do_nothing_under_the_alltoall_dispatcher():
    """Under the ``alltoall`` dispatcher the expert all-to-all's NCCL send/recv pairs run on NCCL's p2p channels
    (:func:`topo.training.step.ep_held_sms`, fix44), so ``ep_comm_sms`` moves nothing there: the options line says so,
    and the step is the same as at the default 20 SMs; under the flex dispatcher (``deepep``) the field sets the SMs
    its kernels hold, and is shown without the mark."""
    base = run_cli(*MOE, check=True).stdout
    a2a = run_cli(*MOE, "--layout", "ep_comm_sms=32", check=True).stdout
    deepep = run_cli(*MOE, "--layout", "ep_comm_sms=32,ep_dispatcher=deepep", check=True).stdout
    assert _options_line(a2a) == [
        "framework options: " + _UNSET_AMAX + "ep_comm_sms 32 (no effect: the alltoall dispatcher's NCCL send/recv kernels run on "
        "NCCL's p2p channels) (layout fields)"]
    assert [ln for ln in a2a.splitlines() if ln.startswith("step time")] == [
        ln for ln in base.splitlines() if ln.startswith("step time")]
    assert _options_line(deepep) == ["framework options: " + _UNSET_AMAX
                                     + "ep_dispatcher deepep, ep_comm_sms 32 (layout fields)"]


def test_dualpipe_charges_its_own_all_to_all_sms_and_only_dualpipe_does():
    """DeepSeek-V3's DualPipe runs DeepSeek's own all-to-all kernels on 20 SMs beside the compute (DeepSeek-V3
    technical report, arXiv 2412.19437 sec. 3.2.2: "only 20 SMs are sufficient to fully utilize the bandwidths
    of IB and NVLink"), not NCCL's: under ``pipeline_schedule = "dualpipe"`` with the all-to-alls overlapped, the
    layout's ``ep_comm_sms`` is what the hidden all-to-all holds, and NCCL's channel count (``nccl_min_ctas``)
    leaves it alone; under 1F1B with the ``alltoall`` dispatcher it is the other way round (NCCL's p2p channels,
    fix44); with nothing overlapped no SM is charged either way (fix44 section 95: "the DualPipe row keeps
    ep_comm_sms through the schedule")."""
    run = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch", "256",
           "--seq", "4096", "--precision", "fp8", "--dp", "8", "--ep", "8", "--etp", "1", "--pp", "2", "--json"]

    def ep_s(schedule, fields):
        doc = json.loads(run_cli(*run, "--pipeline-schedule", schedule, "--layout", fields, check=True).stdout)
        return doc["breakdown_s"]["ep"]

    dual = {k: ep_s("dualpipe", f) for k, f in [("20", "overlap_ep=true,ep_comm_sms=20"),
                                                ("40", "overlap_ep=true,ep_comm_sms=40"),
                                                ("ctas", "overlap_ep=true,ep_comm_sms=20,nccl_min_ctas=32"),
                                                ("off", "overlap_ep=false,ep_comm_sms=20"),
                                                ("off40", "overlap_ep=false,ep_comm_sms=40")]}
    assert dual["40"] > dual["20"] * 1.05  # more SMs held: the compute beside the hidden all-to-all loses more
    assert dual["ctas"] == dual["20"]  # no NCCL kernel carries DualPipe's all-to-all
    assert dual["off"] == dual["off40"] > dual["40"]  # exposed whole: no compute beside it to charge
    one = {k: ep_s("1f1b", f) for k, f in [("20", "overlap_ep=true,ep_comm_sms=20"),
                                           ("40", "overlap_ep=true,ep_comm_sms=40"),
                                           ("ctas", "overlap_ep=true,ep_comm_sms=20,nccl_min_ctas=32")]}
    assert one["40"] == one["20"]  # the alltoall dispatcher's NCCL send/recv pairs: ep_comm_sms moves nothing
    assert one["ctas"] > one["20"] * 1.05  # ... NCCL's p2p channels do (32 SMs instead of 16)


def test_text_names_the_moe_recipe_options_and_when_they_have_no_effect():
    """walk11: an MoE recipe's grouped GEMM, capacity factor, router fusion, EP overlap and FP8 dispatch changed the
    step but were named on no line; with ep 1 there is no all-to-all for the last two to change (the step says so:
    it equals the step without them)."""
    moe = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--tp", "1", "--dp", "8",
           "--global-batch", "8"]
    out = run_cli(*moe, "--ep", "8", "--overlap", "ep=on", "--layout", "ep_dispatch_bytes=1,moe_router_fusion=true,"
                  "moe_grouped_gemm=false,moe_capacity_factor=1.25", check=True).stdout
    assert _options_line(out) == ["framework options: moe_grouped_gemm false, moe_capacity_factor 1.25, "
                                  "moe_router_fusion true, overlap_ep true, ep_dispatch_bytes 1.0 (layout fields)"]
    idle = run_cli(*moe, "--ep", "1", "--overlap", "ep=on", "--layout", "ep_dispatch_bytes=1", check=True).stdout
    assert _options_line(idle) == ["framework options: overlap_ep true (no effect: ep 1: no all-to-all), "
                                   "ep_dispatch_bytes 1.0 (no effect: ep 1: no all-to-all) (layout fields)"]
    plain = run_cli(*moe, "--ep", "1", check=True).stdout
    step = [ln for ln in plain.splitlines() if ln.startswith("step time")]
    assert step == [ln for ln in idle.splitlines() if ln.startswith("step time")]


def test_text_names_the_dp_bucket_and_reduction_start_and_when_they_do_nothing():
    """dpov47's two data-parallel fields: the bucket size always prices the DP collectives; the reduction's start
    (``dp_align_grad_reduce``) only changes an interleaved pipeline's chunk queue (``topo.training.dp_overlap``), so
    at vpp 1 the line marks it, and the step is the same either way."""
    flat = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "2", "--dp", "8",
            "--global-batch", "64"]
    out = run_cli(*flat, "--layout", "dp_align_grad_reduce=false,dp_bucket_params=128000000", check=True).stdout
    assert _options_line(out) == ["framework options: dp_bucket_params 128000000, dp_align_grad_reduce false "
                                  "(no effect: vpp 1: the first stage, which ends the step, reduces its buckets as "
                                  "they are ready either way) "
                                  "(layout fields)"]
    steps = [json.loads(run_cli(*flat, "--layout", f"dp_align_grad_reduce={a}", "--json", check=True).stdout)
             ["step_time_s"] for a in ("true", "false")]
    assert steps[0] == steps[1]
    inter = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--vpp", "5", "--dp",
             "4", "--global-batch", "64"]
    out = run_cli(*inter, "--layout", "dp_align_grad_reduce=false", check=True).stdout
    assert _options_line(out) == ["framework options: dp_align_grad_reduce false (layout fields)"]
    steps = [json.loads(run_cli(*inter, "--layout", f"dp_align_grad_reduce={a}", "--json", check=True).stdout)
             ["step_time_s"] for a in ("true", "false")]
    assert steps[1] < steps[0]


def test_the_dp_bucket_has_an_effect_when_only_cp_reduces_the_gradients():
    """The gradients reduce over the data- and context-parallel ranks together (Megatron-Core's dp_cp group), so at
    dp 1 with cp 2 the bucket size still prices the reduction's calls (26 buckets of Llama 3 8B at 40M parameters)
    and moves the step: no 'no effect' mark. At dp 1 and cp 1 nothing is reduced across ranks: marked, step equal."""
    cp = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout",
          "tp=8,cp=2,dp=1,global_batch=8,seq_len=16384,dp_bucket_params={}"]
    out = run_cli(*cp[:-1], cp[-1].format(400_000_000), check=True).stdout
    assert _options_line(out) == ["framework options: cp_comm_type p2p, dp_bucket_params 400000000 (layout fields)"]
    steps = [json.loads(run_cli(*cp[:-1], cp[-1].format(b), "--json", check=True).stdout)["step_time_s"]
             for b in (40_000_000, 400_000_000)]
    assert steps[0] != steps[1]
    one = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout",
           "tp=8,dp=1,global_batch=8,seq_len=4096,dp_bucket_params={}"]
    out = run_cli(*one[:-1], one[-1].format(400_000_000), "--gpus", "8", check=True).stdout
    assert "dp_bucket_params 400000000 (no effect: dp x cp 1: no data-parallel collective)" in _options_line(out)[0]
    steps = [json.loads(run_cli(*one[:-1], one[-1].format(b), "--gpus", "8", "--json", check=True).stdout)
             ["step_time_s"] for b in (40_000_000, 400_000_000)]
    assert steps[0] == steps[1]


_TE_DEFAULT = "fp8_amax_reduction true (the default with delayed scaling: Transformer Engine's reduce_amax)"
_CURRENT_SP = ("fp8_amax_reduction true (the default with current scaling and sequence parallelism: Transformer Engine "
               "all-reduces each gathered input's amax over the TP group)")


@pytest.mark.parametrize("fields, shown", [
    ("fp8_recipe=delayed", f"fp8_recipe delayed, {_TE_DEFAULT}"),
    ("fp8_recipe=delayed,fp8_amax_reduction=true",
     "fp8_recipe delayed, fp8_amax_reduction true (set by the layout)"),
    ("fp8_recipe=delayed,fp8_scale_inverse_kernel=true",
     f"fp8_recipe delayed, {_TE_DEFAULT}, fp8_scale_inverse_kernel true"),
    ("fp8_recipe=current,fp8_amax_pass=true", f"fp8_recipe current, {_CURRENT_SP}, fp8_amax_pass true"),
])
def test_options_line_names_the_fp8_scaling_work_it_priced(fields, shown):
    """rev54: the layout fields that price FP8 scaling work (fp8dl51's amax reduction and scale inverse kernel,
    the current-scaling amax pass) change the step, so the options line names them, as it names fp8_recipe; before,
    a user saw "fp8_recipe delayed" alone and could not tell which of TE's costs were in the step."""
    no_cp = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16", "--precision", "fp8"]
    out = run_cli(*no_cp, "--layout", fields, check=True).stdout
    assert _options_line(out) == [f"framework options: {shown} (layout fields)"]


def test_the_amax_reduction_default_and_who_chose_it_in_json():
    """amax52: delayed scaling reduces amaxes unless told not to (TE's DelayedScaling reduce_amax = True), and --json
    says what ran and whether the layout, the default or a JAX mesh chose it (Flax's FP8 ops reduce no amax buffer:
    jax_mesh.MAXTEXT_FP8_AMAX); current scaling runs TE's TP all-reduces under sequence parallelism only (rev57a); the
    step's fp8_amax line holds it."""
    no_cp = BASE[:6] + ["--cp", "1", "--dp", "4", "--global-batch", "16", "--precision", "fp8"]

    def run(*argv):
        d = json.loads(run_cli(*argv, "--json", check=True).stdout)
        return d["layout"]["fp8_amax_reduction"], d["chosen_by"]["fp8_amax_reduction"], d["breakdown_s"]["fp8_amax"]

    on, by, amax_s = run(*no_cp, "--layout", "fp8_recipe=delayed")
    assert (on, by) == (True, "default") and amax_s > 0
    assert run(*no_cp, "--layout", "fp8_recipe=delayed,fp8_amax_reduction=false") == (False, "layout", 0.0)
    # current scaling at TP8 with sequence parallelism: TE's TP amax all-reduces (rev57a); without SP none
    on, by, amax_s = run(*no_cp, "--layout", "fp8_recipe=current")
    assert (on, by) == (True, "default") and amax_s > 0
    assert run(*no_cp, "--layout", "fp8_recipe=current,sequence_parallel=false") == (False, "default", 0.0)
    mesh = BASE[:4] + ["--gpus", "8", "--jax-mesh", "ici_fsdp=8", "--global-batch", "16", "--precision", "fp8"]
    assert run(*mesh, "--layout", "fp8_recipe=delayed") == (False, "jax_mesh", 0.0)
    on, by, amax_s = run(*mesh, "--layout", "fp8_recipe=delayed,fp8_amax_reduction=true")
    assert (on, by) == (True, "layout") and amax_s > 0
    out = run_cli(*mesh, "--layout", "fp8_recipe=delayed", check=True).stdout
    assert ("fp8_amax_reduction false (a JAX mesh's default: Flax's FP8 ops reduce no amax buffer)"
            in _options_line(out)[0])


def test_fp8_attention_on_hopper_is_marked_no_effect_and_prices_nothing():
    """rev54: cuDNN's FP8 backward over the causal square is published on GB200 / GB300 at hdim 64 only (kernels.toml
    [attention.<table>.fp8_band_backward]); on an H100, GPT-OSS's hdim 64 has none, so attention_fp8 prices nothing
    and the options line says so (before: no note, and the step 4% longer from the Blackwell square at Hopper's
    BF16 causal rate)."""
    oss = ["train", "dgx-h100-superpod", "--model", "gpt-oss-20b", "--tp", "1", "--ep", "8", "--dp", "8",
           "--global-batch", "64", "--precision", "fp8"]
    out = run_cli(*oss, "--layout", "attention_fp8=fp8", check=True).stdout
    assert _options_line(out) == ["framework options: " + _UNSET_AMAX + "attention_fp8 fp8 (no effect: H100 publishes no FP8 attention "
                                  "backward at gpt-oss-20b's head dim 64) (layout fields)"]
    assert _step_s(*oss, "--layout", "attention_fp8=fp8") == _step_s(*oss)
