"""rev87 (section 388): tests for behaviour changes of the session's merged diff (5398359b..80f0dd96) that no test
caught when the code was broken on purpose. Each figure is a closed form of the sources named beside it.

LatentMoE (super80): Nemotron 3 Super's MoE blocks project each token from ``hidden`` down to ``latent_size``
before the dispatch (``fc1_latent_proj``) and back after the combine (``fc2_latent_proj``), the routed experts at
the latent width (NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/moe_layer.py lines 266-304, 466-491;
moe/experts.py lines 219, 241); Megatron-LM's FLOP count (megatron/training/training.py ``moe_layer_flops``, lines
846-860) adds ``4 x tokens x hidden x latent`` for the two projections.
"""

import json
import tomllib

import pytest

from conftest import run_cli
from small_regions import loss_crossing_s, region_file, spy_dp_crossing, two_sites
from topo.fabric.region import build_region
from topo.resources import data_dir
from topo.training import multisite
from topo.training.ep_buffers import ep_buffer_bytes
from topo.training.flops import layer_flops
from topo.training.flops_megatron_lm import megatron_lm_flops_per_token
from topo.training.memory import block_activation_bytes
from topo.training.model import Block, load_model, model_from_dict
from topo.training.multisite import SiteReady, dp_gather_window_s, dp_window_s, estimate_across_sites
from topo.training.parallel import make_layout

H, L, F, K = 4096, 1024, 2688, 22  # Super's hidden, latent, expert FFN, top-k (its model file, the model card)


@pytest.fixture(scope="module")
def sup():
    return load_model("nemotron-3-super-120b-a12b")


def _variant(sup, name: str, **top):
    """Super's shape without its latent (the experts at ``hidden``), top-level fields replaced by ``top``."""
    data = sup.model_dump(exclude_none=True, exclude_unset=True)  # as its file gives it: a default written back
    # (mamba.expand 2 beside num_heads) contradicts the heads and is refused (walk43, model.py's mamba check)
    data["moe"].pop("latent_size")
    return model_from_dict({**data, **top}, f"{name}.toml")


def _moe_forward_difference() -> float:
    """One MoE block's forward FLOPs per token, latent minus unlatent (moe_layer_flops): the routed experts
    ``2 x k x (2 l f - 2 h f)`` (squared ReLU: two matrices) and the projections ``2 x 2 h l``."""
    return 2 * (K * 2 * (L - H) * F + 2 * H * L)


def test_a_token_goes_through_the_latent_shapes(sup):
    # routed top-k at the latent (2 l f each, squared ReLU), the shared expert 2 h fs, the projections 2 h l: the one
    # count both FLOP conventions take (moe_layer_flops, training.py lines 846-860)
    assert sup.moe_token_params == K * 2 * L * F + 2 * H * 5376 + 2 * H * L
    assert load_model("llama3-8b").moe_token_params == 0


def test_the_step_model_counts_the_latent_projections_flops(sup):
    # layer_flops' mean layer: the MoE layers' share of the block difference (the router and shared expert alike)
    unlatent = _variant(sup, "unlatent")
    got = layer_flops(sup, 8192).matmul - layer_flops(unlatent, 8192).matmul
    assert got == pytest.approx(sup.num_moe_layers / sup.layers * _moe_forward_difference(), rel=1e-12)


def test_megatron_lms_count_has_the_latent_projections(sup):
    # forward and backward 3 x forward, over every MoE block: the layers' and each MTP depth's
    unlatent = _variant(sup, "unlatent")
    blocks = sup.num_moe_layers + sup.mtp_layers * sup.mtp_pattern.count("E")
    got = megatron_lm_flops_per_token(sup, 8192, 1) - megatron_lm_flops_per_token(unlatent, 8192, 1)
    assert got == pytest.approx(3 * blocks * _moe_forward_difference(), rel=1e-12)


@pytest.mark.parametrize("backend", ["deepep", "hybridep"])
def test_the_ep_buffers_hold_latents(sup, backend):
    # the dispatcher is handed fc1_latent_proj's output (moe_layer.py preprocess: project, then dispatch), so the
    # DeepEP / HybridEP buffers sized by the dispatched token's width hold latents: Super's equal a model whose
    # hidden is its latent
    twin = _variant(sup, "twin", hidden=L)
    lay = make_layout(ep=64, dp=64, global_batch=512, micro_batch=1, seq_len=8192, ep_dispatcher="deepep",
                      ep_flex_backend=backend)
    assert ep_buffer_bytes(sup, lay) == ep_buffer_bytes(twin, lay) > 0


def test_an_moe_blocks_activations_hold_latent_wide_inputs(sup):
    # under sequence parallelism, per GPU: s b h / t x (bytes a value) x (k routed copies of fc1's input at l / h,
    # not 1, plus fc2_latent_proj's saved input, l / h)
    unlatent = _variant(sup, "unlatent")
    s, t, x = 8192, 2, 2  # BF16
    lay = make_layout(tp=t, ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=s, sequence_parallel=True)
    got = block_activation_bytes(sup, lay, Block.MOE) - block_activation_bytes(unlatent, lay, Block.MOE)
    assert got == pytest.approx(s * H / t * x * (K * (L / H - 1) + L / H), rel=1e-12)


def test_a_regions_job_of_part_of_its_gpus_stands_at_those_gpus_idle_draw():
    # plan81: each site's share of the job's GPUs (not every GPU of the site) drops to its idle draw: 512 of the
    # region's 3,072 H100, 256 a site; gpus.toml H100 tdp_W 700, idle_W 80; facility.toml server_average_fraction
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=16,global_batch=512",
                "--tokens", "15T", "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    gpu = tomllib.loads((data_dir("catalog") / "gpus.toml").read_text())["H100"]
    frac = tomllib.loads((data_dir("catalog") / "facility.toml").read_text())["server_average_fraction"]["value"]
    pues = {s["facility_power_W"] / s["it_power_W"] for s in d["sites"]}
    assert len(pues) == 1 and d["training"]["gpus"] == 512 < d["num_gpus"]
    drop_W = 512 * (gpu["tdp_W"]["value"] * frac - gpu["idle_W"]["value"]) * pues.pop()
    e = d["energy_to_train"]
    assert e["job_power_W"] - e["job_standing_power_W"] == pytest.approx(drop_W, rel=1e-9)


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    text = (two_sites("rev87", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
            + '[nccl]\ndp_reduction = "flat_ring"\n')
    return build_region(region_file(tmp_path_factory, text, "rev87"))


def test_a_sites_own_end_waits_for_the_slowest_optimizer(region, monkeypatch):
    # regions81: the flat ring's gather starts at the slowest site's optimizer end (Megatron-LM@d98e8a64
    # param_and_grad_buffer.py start_param_sync), so a site whose optimizer is Delta shorter than the other's ends
    # Delta later than it would beside an alike site; own_end_s picks the site whose run is reported
    seen = spy_dp_crossing(monkeypatch)
    lay = make_layout(tp=8, dp=4, global_batch=64, micro_batch=8, seq_len=4096, dp_sharding="zero1")
    estimate_across_sites(region, load_model("llama3-8b"), lay)
    one, slay, cross = seen["one"], seen["lay"], seen["cross"]
    assert cross.name == "flat_ring" and cross.gather_phase.time_s > 0
    T, o, c, delta = one.step_time_s, one.breakdown_s["optimizer"], one.breakdown_s["compute"], 0.2
    V = multisite.replica_dp_bytes(load_model("llama3-8b"), slay)

    def own(optimizers):
        ready = SiteReady((T, T + delta), (dp_window_s(one, slay),) * 2, (c, c), (dp_gather_window_s(one, slay),) * 2,
                          (0.0, 0.0), optimizers)
        return multisite._dp(region, one, slay, V, {"flat_ring": cross}, 0.0, ready).own_end_s

    assert own((o, o + delta)) - own((o, o)) == pytest.approx(delta, rel=1e-9)


def test_fsdps_edge_bucket_pays_one_collectives_latency(tmp_path_factory, monkeypatch):
    # regions81: FSDP crosses in every micro-batch (m collectives, m x the ring's latency: pytorch@3ade90a6
    # _runtime_utils.py _post_backward_hook), but only the last one's edge bucket cannot hide; where every
    # backward's window covers the phase, the step exposes that edge (one collective's latency, one bucket's
    # bandwidth time) and the logged loss's crossing, whatever m
    text = (two_sites("edge87", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
            + '[nccl]\ndp_reduction = "hierarchical"\n')
    reg = build_region(region_file(tmp_path_factory, text, "edge87"))
    exposed = {}
    for m in (2, 4):
        seen = spy_dp_crossing(monkeypatch)
        lay = make_layout(tp=2, dp=4, global_batch=4 * 8 * m, micro_batch=8, seq_len=8192, dp_sharding="fsdp")
        job = estimate_across_sites(reg, load_model("llama3-8b"), lay)
        cross = seen["cross"]
        assert cross.passes == m and dp_window_s(seen["one"], seen["lay"]) > cross.phase.time_s
        exposed[m] = job.strategies[0].exposed_s - loss_crossing_s(reg, job)
        assert exposed[m] > cross.phase.latency_s / m  # one collective's latency exposed, at least
    assert exposed[4] == pytest.approx(exposed[2], rel=1e-9)
