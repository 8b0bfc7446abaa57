"""JAX remat policies (issue 29, "memory of the runs that ran"): MaxText's ``remat_policy`` as the recomputation it
causes. MaxText's ``Decoder.get_remat_policy`` (AI-Hypercomputer/maxtext@0013a4d8 MaxText/layers/decoders.py) names
what each policy saves; the backward pass recomputes the rest it needs."""

import itertools
import json

import pytest

import topo
from conftest import run_cli
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.memory import block_activation_bytes
from topo.training.model import load_model
from topo.training.operators import block_ops, op_time_s, stage_compute
from topo.training.parallel import make_layout
from topo.training.remat import remat_policies, remat_settings
from topo.training.step import estimate_step


def lay(policy, **kw):
    return make_layout(dp=8, global_batch=64, remat_policy=policy, **kw)


def test_save_dot_except_mlpwi_recomputes_the_input_projection_not_the_output_one():
    """It saves query, key, value, out_proj and mlpwo: the backward recomputes the norms, the attention output
    (context is not saved) and the MLP's input projection with its activation (fc2's input), not fc2."""
    m, gpu = load_model("llama3-8b"), gpu_compute("H100")
    lo = lay("save_dot_except_mlpwi")
    assert lo.recompute == "none" and set(lo.recompute_modules) == {"layernorm", "core_attn", "mlp_wi"}
    fwd = {(k, op.name): op_time_s(op, gpu, "bf16", cudnn=lo.cudnn_version)  # attnh71: its cuDNN
           for k in "*-" for op in block_ops(m, lo, k)}
    want = (fwd[("*", "norm")] + fwd[("*", "core_attention")] + fwd[("-", "norm")] + fwd[("-", "fc1")]
            + fwd[("-", "activation")] + fwd[("-", "residual")] + fwd[("*", "residual")])
    rec = stage_compute(m, lo, gpu).recompute_s
    assert rec == pytest.approx(m.layers * want, rel=1e-9)
    assert rec < stage_compute(m, lay("save_dot_except_mlp"), gpu).recompute_s  # that one recomputes fc2 too


def test_full_and_none_are_megatrons_full_and_none():
    assert remat_settings("full") == {"recompute": "full", "recompute_modules": ()}
    assert remat_settings("none") == {"recompute": "none", "recompute_modules": ()}


def test_a_policy_that_recomputes_more_is_slower_and_stores_less():
    """Where one policy's recomputed modules contain another's, it recomputes at least as much and keeps at most
    as many activations (MaxText's base.yml orders its policies by speed and HBM use the same way)."""
    m, gpu = load_model("llama3-8b"), gpu_compute("H100")
    mods = {p: set(remat_settings(p)["recompute_modules"]) for p in remat_policies() if p != "full"}
    rec = {p: stage_compute(m, lay(p), gpu).recompute_s for p in mods}
    act = {p: sum(block_activation_bytes(m, lay(p), k) for k in "*-") for p in mods}
    pairs = [(a, b) for a, b in itertools.permutations(mods, 2) if mods[a] < mods[b]]
    assert len(pairs) >= 10
    for a, b in pairs:
        assert rec[a] < rec[b] and act[a] >= act[b], (a, b)
    assert act["save_out_proj"] < act["save_qkv_proj"]  # Q, K and V are not kept


@pytest.mark.parametrize("policy, needle", [("bogus", "unknown remat policy 'bogus'; allowed: none, full"),
                                            ("minimal_offloaded", "which topo does not model; allowed:"),
                                            ("custom", "which topo does not model")])
def test_policies_topo_does_not_model_are_named(policy, needle):
    with pytest.raises(TopoError) as e:
        lay(policy)
    assert e.value.key == "remat_policy" and needle in str(e.value)


def test_a_policy_and_explicit_recomputation_together_are_refused():
    with pytest.raises(TopoError) as e:
        lay("minimal", recompute="full")
    assert e.value.key == "remat_policy" and "give one or the other" in str(e.value)


def test_cli_takes_a_policy_and_refuses_an_unknown_one_in_one_line():
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--dp", "8", "--global-batch", "64"]
    ok = run_cli(*base, "--remat-policy", "save_dot_except_mlpwi", "--json")
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(*base, "--remat-policy", "qkv_proj_offloaded")
    assert bad.returncode == 2 and bad.stdout == ""
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --remat-policy: 'qkv_proj_offloaded'")


def test_the_maxtext_run_is_timed_with_its_policy():
    """JAX-Toolbox's MaxText Llama 2 7B run (minimal_flash: the weight GEMMs' outputs and the attention output
    saved) recomputes its norms and activations: a little slower than saving everything."""
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("llama2-7b")
    kw = dict(dp=8, global_batch=16, micro_batch=2, seq_len=4096, dp_sharding="zero3")
    saved_all = estimate_step(f, m, make_layout(**kw)).step_time_s
    flash = estimate_step(f, m, make_layout(remat_policy="minimal_flash", **kw)).step_time_s
    assert 1.0 < flash / saved_all < 1.1


def test_search_with_a_policy_does_not_enumerate_the_recomputation_it_sets():
    """walk2: ``--search --remat-policy minimal`` enumerated recompute none/selective/full and counted the two the
    policy contradicts as "break a divisibility rule" (1,274 considered, 740 rejected, for llama3-8b on 1,024 GPUs);
    with --recompute-modules beside it every layout was rejected and the error blamed --gpus. Now the policy fixes
    the recomputation: a third of the layouts, the same best step; both flags together are the single run's error."""
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--search", "--global-batch", "256", "--top", "1"]
    plain = run_cli(*base, "--recompute", "none", "--json", check=True)
    pol = run_cli(*base, "--remat-policy", "minimal", "--json", check=True)
    a, b = json.loads(plain.stdout), json.loads(pol.stdout)
    assert b["considered"] == a["considered"]  # one recomputation value each: none, as minimal's recompute
    assert b["ranked"][0]["layout"]["recompute_modules"] == ["layernorm", "core_attn", "mlp_act", "moe_act"]
    bad = run_cli(*base, "--remat-policy", "minimal", "--recompute-modules", "mlp")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr == (
        "error: --remat-policy: 'minimal' sets recompute and recompute_modules itself; give one or the other\n")


def test_an_explicit_recompute_none_beside_a_policy_that_recomputes_is_refused():
    """walk3: ``--remat-policy full --recompute none`` (or a layout file with both) ran as full recomputation, the
    explicit "none" silently dropped, while ``minimal`` with ``--recompute full`` was refused: both are refused now.
    A recompute equal to the policy's own (minimal's "none", as the search passes it) still stands."""
    with pytest.raises(TopoError) as e:
        lay("full", recompute="none")
    assert e.value.key == "remat_policy" and "give one or the other" in str(e.value)
    assert lay("full", recompute="full").recompute == "full"
    same = lay("minimal", recompute="none")
    assert same.recompute_modules == lay("minimal").recompute_modules == ("layernorm", "core_attn", "mlp_act",
                                                                           "moe_act")
