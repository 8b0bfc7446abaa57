"""rev106's review of this session's merges (findings sections 438, 440, 442, 443 and the lead's commits): the
mutations no test caught (findings section 444).

Sources: the SSD backward's measured product rate, ``kernels.toml`` ``[ssd] backward_products_TFLOPs`` (Beck et al.
2025, arXiv 2503.14376; NX-AI/mlstm_kernels@39d3c61, data/reference/kernels_ssd_fwbw_h100.csv), taken as a floor on
the kernel's time, not in place of it (``topo.training.operators.sm_bound_floor_s``: "takes no less than its products
at the measured rate"); Megatron-Core's ``CudaGraphScope`` (NVIDIA/Megatron-LM@01b9cb23
megatron/core/transformer/enums.py: ``attn`` captures attention layers) and its hybrid MTP depths, whose layers
``mtp_hybrid_override_pattern`` sets apart from the main pattern (Nemotron 3 Super's "*E", its model file).
"""

import math
import re

import pytest
from conftest import every_kernel_a_call

import topo
from topo.cli.main import build_parser
from topo.cli.report import _job, _one_figure
from topo.cli.train import _framework_options
from topo.errors import TopoError
from topo.fabric.builders import build_fabric
from topo.fabric.inventory import inventory
from topo.plan import plan
from topo.report.figures import inventory_figure
from topo.resources import data_dir
from topo.spec import load_spec
from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s, memory_s, ssd_backward_products_flops
from topo.training.latent_note import latent_size_note
from topo.training.model import load_model
from topo.training.operators import Op, sm_bound_floor_s, stage_compute
from topo.training.parallel import check_layout, make_layout
from topo.training.ssd import ssd_flops, ssd_kernels
from topo.training.step import estimate_step
from topo.training.tp_overlap import userbuffers_off_note
from topo.units import in_unit


def _products(shape):
    """The backward's own product kernels of mamba_ssm's SSD at ``shape`` (T, H, G, P, N, Q), as the step's ops."""
    return [Op(k.name, "mamba", "kernel", ssd_flops(k.dots), k.bytes, launches=k.launches, passes=k.passes,
               dots=tuple(k.dots), sm_bound=k.triton, ssd_gradient=k.gradient)
            for k in ssd_kernels(*shape, gated=False, seq_len=4096.0) if k.gradient and k.dots]


def test_the_measured_rate_is_a_floor_not_the_time():
    """On H100 (the reference) a backward product kernel takes the longer of its own model (its products by the tile
    model, its bytes through HBM) and its products at the measured rate: under a fit's candidate HBM efficiency of
    0.6 (as test_training_ssd's overrides) the TFLA file's 64-group shape (65,536 tokens, 64 heads of 64, state 64,
    chunk 256) has dB and dC move their fp32 bytes for longer than their products take at 39 TFLOP/s, and they take
    their bytes' time (rev106: the floor turned into the rate alone failed no test)."""
    km = gpu_compute("H100", overrides={"memory": {"memory_efficiency": 0.6}}).kernels
    rate = ssd_backward_products_flops()
    by_bytes = set()
    for op in _products((65536.0, 64.0, 64.0, 64.0, 64.0, 256.0)):
        own = max(sum(gemm_s(km, m, n, k, "bf16", g) for m, n, k, g in op.dots), memory_s(km, op.bytes))
        assert sm_bound_floor_s(op, km) == pytest.approx(max(own, ssd_flops(op.dots) / rate), rel=1e-9), op.name
        if own > ssd_flops(op.dots) / rate:
            by_bytes.add(op.name)
    assert by_bytes == {"ssd_bwd_db", "ssd_bwd_dc"}


def _mtp_attention_only(tmp_path, mtp: bool):
    """Nemotron 3 Nano with its attention layers taken out of the main pattern (Mamba-2 and MoE layers only) and,
    with ``mtp``, one MTP depth of an attention and an MoE layer (Super's ``mtp_pattern = "*E"``)."""
    text = (data_dir("models") / "nemotron-3-nano-30b-a3b.toml").read_text(encoding="utf-8")
    text = re.sub(r'(?m)^name = .*$', 'name = "mamba-moe-mtp"', text)
    text = re.sub(r'(?m)^layer_pattern = .*$', 'layer_pattern = "' + "ME" * 26 + '"', text)
    if mtp:
        text = re.sub(r'(?m)^layers = 52$', 'layers = 52\nmtp_layers = 1\nmtp_pattern = "*E"', text)
    path = tmp_path / f"mtp{int(mtp)}.toml"
    path.write_text(text, encoding="utf-8")
    return load_model(str(path))


def _scoped(scope):
    return make_layout(tp=1, dp=8, ep=8, global_batch=8, cuda_graph_scope=scope)


def test_an_mtp_depth_of_a_kind_the_layers_lack_is_priced(tmp_path):
    """A model whose only attention layer is its MTP depth's: the step runs (rev106: the memory's activations by
    block kind counted the main layers' kinds only, a KeyError, 'internal error' on the command line) and prices the
    MTP depth's attention, so ``cuda_graph_scope`` ``attn`` captures it and the step is shorter."""
    model = _mtp_attention_only(tmp_path, mtp=True)
    assert model.count("*") == 0 and "*" in model.mtp_block
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    steps = [estimate_step(fabric, model, _scoped(s)).step_time_s for s in (("mamba",), ("attn", "mamba"))]
    assert steps[1] < steps[0]


def test_the_graph_scope_mark_counts_the_mtp_depths_blocks(tmp_path):
    """``attn`` on that model captures the MTP depth's attention layer (above): the options line does not mark it
    'no effect'; on the same model without the MTP depth it does (rev106: counting the main layers alone marked it,
    and no test saw it: no bundled model's MTP depth holds a kind its layers lack)."""
    gpu = gpu_compute("H100")
    with_mtp, without = _mtp_attention_only(tmp_path, mtp=True), _mtp_attention_only(tmp_path, mtp=False)
    assert _framework_options(_scoped(("attn", "mamba")).model_dump(), with_mtp, gpu) == (
        'cuda_graph_scope ["attn", "mamba"]')
    assert _framework_options(_scoped(("attn", "mamba")).model_dump(), without, gpu) == (
        'cuda_graph_scope ["attn", "mamba"] (no effect on attn: mamba-moe-mtp has no attention layers)')


def test_a_planner_figure_takes_each_designs_own_sets():
    """``topo report A B --set A:KEY=VALUE --figure power``: the planner's figure plans each design with its own
    overrides (walk43, section 440, as ``topo plan`` takes them; rev106: the figure's path read the raw ``--set``
    list and no test drew it). Each bar's total is that design's facility power, planned on its own."""
    h100, gb200 = "dgx-h100-superpod", "gb200-nvl72-superpod"
    args = build_parser("report").parse_args(["report", h100, gb200, "--set", f"{h100}:cluster.num_units=2",
                                              "--format", "svg", "--figure", "power"])
    fig = _one_figure(args, args.specs)
    totals = [sum(t.y[i] for t in fig.data) for i in range(2)]
    own = [plan(build_fabric(load_spec(h100, ["cluster.num_units=2"])), collectives=False),
           plan(build_fabric(load_spec(gb200)), collectives=False)]
    assert totals == pytest.approx([in_unit(r.power.facility_power_W, "MW") for r in own], rel=1e-9)
    whole = plan(build_fabric(load_spec(h100)), collectives=False)
    assert totals[0] < in_unit(whole.power.facility_power_W, "MW")  # two units of the bundled design's more


def test_the_reports_job_fills_each_design_with_its_own_sets():
    """``topo report A B --set A:KEY=VALUE --train MODEL --layout L`` without dp: each design's job fills that
    design's GPUs as its own overrides build it (rev106: the job's path read the raw ``--set`` list and no test
    saw it). Two DGX H100 scalable units hold 2 x 32 x 8 = 512 GPUs (the bundled spec's source), dp 512 / tp 8; the
    GB200 job fills 64 of each NVL72 rack's 72 (the production placement, tidy122's one rule for train, plan and
    report)."""
    h100, gb200 = "dgx-h100-superpod", "gb200-nvl72-superpod"
    dp_g = build_fabric(load_spec(gb200)).layout.num_gpus // 72 * 64 // 8
    args = build_parser("report").parse_args(["report", h100, gb200, "--set", f"{h100}:cluster.num_units=2",
                                              "--train", "llama3-8b", "--layout",
                                              f"tp=8,global_batch={math.lcm(64, dp_g)}"])
    _, (lay_h, lay_g) = _job(args, args.specs)
    assert (lay_h.dp, lay_g.dp) == (2 * 32 * 8 // 8, dp_g)


def test_one_designs_figure_takes_its_own_sets():
    """``topo report A --set A:KEY=VALUE --format svg --figure inventory`` draws A as its own overrides build it,
    as the HTML report does (rev106: the one-design figures' path read the raw ``--set`` list, refusing
    ``A:cluster`` as an unknown key, and no test drew it)."""
    h100 = "dgx-h100-superpod"
    args = build_parser("report").parse_args(["report", h100, "--set", f"{h100}:cluster.num_units=2", "--format",
                                              "svg", "--figure", "inventory"])
    own = inventory(build_fabric(load_spec(h100, ["cluster.num_units=2"])))
    assert own.num_gpus == 2 * 32 * 8
    assert _one_figure(args, args.specs).to_dict() == inventory_figure(own).to_dict()


def test_full_remat_policy_with_graphs_names_the_policy():
    """A layout that sets full recomputation through MaxText's ``remat_policy = "full"`` and holds a
    ``cuda_graph_scope`` is refused naming ``remat_policy``, the key the user wrote, not ``recompute`` (walk43's
    refusal, Megatron-LM@000c4ac2 ``validate_args``; rev106: naming ``recompute`` always failed no test)."""
    with pytest.raises(TopoError) as exc:
        check_layout(load_model("llama3-8b"), make_layout(tp=1, dp=8, global_batch=8, remat_policy="full",
                                                          cuda_graph_scope=("attn",)))
    assert exc.value.key == "remat_policy" and "full recomputation with CUDA graphs" in exc.value.message


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "dropless"])
def test_host_bound_layers_past_n_replay_no_module(padded):
    """Under ``recompute = "full"`` the layers past ``recompute_num_layers`` replay no ``recompute_modules`` in the
    backward's host balance either (tidy121's rule, ``activation_bytes.modules_recomputed``: Megatron-Core gates each
    module's checkpoint on selective granularity, NVIDIA/Megatron-LM@d98e8a64 ``moe/moe_layer.py`` lines 248-255).
    With the backward host-bound (an eager H100 at 20 us a launch, 512-token sequences, as
    test_training_selective_replay_host) a replayed ``moe`` module would cost its launches; the stage is the same
    with or without the module (rev106: the host balance's replay terms reading the raw modules failed no test,
    tidy121's tests being GPU-bound)."""
    gpu = gpu_compute("H100", overrides={"launch": every_kernel_a_call(2e-5)})
    kw = dict(tp=1, ep=8, dp=8, micro_batch=1, global_batch=64, seq_len=512, etp=1, recompute="full",
              recompute_num_layers=10, **(dict(moe_capacity_factor=1.0) if padded else {}))
    model = load_model("qwen3-30b-a3b")
    with_mods = stage_compute(model, make_layout(**kw, recompute_modules=("moe",)), gpu)
    without = stage_compute(model, make_layout(**kw), gpu)
    assert (with_mods.forward_s, with_mods.backward_s, with_mods.recompute_s) == (
        without.forward_s, without.backward_s, without.recompute_s)
    selective = stage_compute(model, make_layout(**{**kw, "recompute": "none", "recompute_num_layers": None},
                                                 recompute_modules=("moe",)), gpu)
    plain = stage_compute(model, make_layout(**{**kw, "recompute": "none", "recompute_num_layers": None}), gpu)
    assert selective.backward_s + selective.recompute_s > plain.backward_s + plain.recompute_s  # the module costs


@pytest.mark.parametrize("recipe", ["blockwise", "nvfp4"])
@pytest.mark.parametrize("tp, sp", [(1, True), (2, False)], ids=["tp1", "no_sp"])
def test_a_refused_recipe_stands_where_no_userbuffers_are_built(recipe, tp, sp):
    """Block-wise FP8 and NVFP4 are refused with TP overlap only where userbuffers are built: tp > 1 with sequence
    parallelism (Transformer Engine's "Unsupported quantizer for Userbuffers", NVIDIA/TransformerEngine@d0067d0d
    ``transformer_engine/pytorch/module/base.py`` lines 607-754). At tp 1 (Megatron-LM turns sequence parallelism
    off, then refuses ``--tp-comm-overlap``) or without sequence parallelism the layout stands and the step notes the
    overlap off (rev106: refusing there failed no test: tests/test_userbuffers_recipe's tp 1 row has sequence
    parallelism off too)."""
    model = load_model("llama3-8b")
    lay = make_layout(tp=tp, dp=1, global_batch=8, precision="fp8", fp8_recipe=recipe, overlap_tp=True,
                      sequence_parallel=sp)
    check_layout(model, lay)
    note = userbuffers_off_note(lay, model)
    assert note.startswith("TP overlap: no effect at tp 1" if tp == 1 else "TP overlap off: userbuffers need "
                           "sequence parallelism")


def test_a_latent_as_wide_as_hidden_is_noted():
    """``[moe] latent_size`` equal to ``hidden`` is noted as a wider one is: "not below hidden" (tidy121's note,
    section 443), a projection that does not narrow the routed tokens (rev106: ``<=`` for ``<`` failed no test,
    tests/test_latent_size_note_tidy121 checking a wider latent only)."""
    model = load_model("nemotron-3-super-120b-a12b")
    assert model.moe.latent_size is not None and model.moe.latent_size < model.hidden  # Super's own: no note
    assert latent_size_note(model) is None
    same = model.model_copy(update={"moe": model.moe.model_copy(update={"latent_size": model.hidden})})
    assert latent_size_note(same).startswith(f"moe latent_size {model.hidden:,} is not below hidden {model.hidden:,}")
