"""walk16's (section 178) defects of ``topo train REGION``: a job that does not fit, the one-site share's
uncertainty interval, ``--tokens``, the DCI bytes of pipeline stages, and ``--search --across pp``."""

import json

import pytest

from conftest import run_cli
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout


def _replica_params(model, tp):
    """One replica's parameters summed over its TP ranks: each rank holds every norm whole (two a layer and the
    final one, ``h`` each; Megatron-Core's TENorm and TE LayerNormLinear weights are not split over TP), so
    ``(tp - 1) x (2 L + 1) h`` more than the model's count (mla78, findings 365)."""
    return model.total_params + (tp - 1) * (2 * model.layers + 1) * model.hidden

BIG = ("train", "two-site-h100", "--model", "llama3-70b", "--tp", "1", "--global-batch", "3072", "--dp-sharding",
       "none", "--no-contention")
SMALL = ("train", "two-site-h100", "--model", "llama3-8b", "--tp", "8", "--global-batch", "768", "--no-contention")


def test_a_region_job_that_does_not_fit_says_so_as_one_site_does():
    """walk16: Llama 3 70B at tp 1 printed a 7.7 s step and 99.8% of one site, exit 0, at 1,454 GB per GPU of the
    H100's 85.5 GB. 70.6e9 parameters x (2 + 4 + 12) B (bf16 weights, fp32 gradients, Adam's fp32 master and two
    moments, unsharded) = 1,270 GB before activations: far past 85.5 GB. With the process's own 1.09 GB
    (memory_reserve.toml) 1,455.0 GB, with NCCL's DP ring (mem57) 1,455.2 GB, with the vocab of Meta's config.json
    (128,256: 2 x 256 x 8,192 more weights x 18 B = 0.08 GB, tidy74) 1,455.3 GB; the text leads with it (mem56)."""
    text = run_cli(*BIG, check=True).stdout
    assert text.startswith("DOES NOT FIT: 1455.3 GB per GPU (stage 0), 1369.8 GB more than the H100's 85.5 GB")
    assert "one site's share: memory per GPU" in text and "DOES NOT FIT by 1369.8 GB" in text
    assert "note: one site's share: does not fit: 1455.3 GB per GPU on stage 0" in text
    doc = json.loads(run_cli(*BIG, "--json", check=True).stdout)
    assert doc["fits"] is False and doc["one_site"]["fits"] is False
    assert any(n.startswith("one site's share: does not fit: 1455.3 GB") for n in doc["notes"])
    fits = json.loads(run_cli(*SMALL, "--json", check=True).stdout)
    assert fits["fits"] is True and not any("does not fit" in n for n in fits["notes"])
    small = run_cli(*SMALL, check=True).stdout
    assert ": fits (" in small and "DOES NOT FIT" not in small


def test_a_region_search_ranks_only_layouts_that_fit():
    doc = json.loads(run_cli("train", "two-site-h100", "--model", "llama3-70b", "--search", "--global-batch", "768",
                             "--top", "3", "--no-contention", "--json", check=True).stdout)
    assert doc["ranked"] and all(r["fits"] and r["one_site"]["fits"] for r in doc["ranked"])


def test_a_region_step_shows_the_one_site_share_s_uncertainty_interval():
    """The interval one-site ``topo train`` prints (step / (1 +/- p90) of the group's out-of-family errors,
    topo/training/uncertainty.py), said of the step it bounds: one site's share's."""
    doc = json.loads(run_cli(*SMALL, "--json", check=True).stdout)
    u, step = doc["uncertainty"], doc["one_site_step_s"]
    assert u["bounds"] == "one_site_step_s" and u["runs"] >= 1
    assert u["low_s"] == step / (1 + u["p90"]) and u["high_s"] == step / (1 - u["p90"])
    text = run_cli(*SMALL, check=True).stdout.splitlines()
    low, high = (f"{u[k] * 1e3:.1f} ms" for k in ("low_s", "high_s"))
    assert text[1].startswith(f"uncertainty {low} - {high} of one site's share's step: on {u['runs']} published "
                              f"Hopper runs of dense BF16 models")


def test_tokens_across_sites_is_the_time_to_train_at_the_step_across_sites():
    """walk16 refused ``--tokens`` on a region (it had been dropped): the time is tokens / (global batch x sequence)
    steps of the chosen step across the sites, as one site's is at its step. Llama 3's 15T tokens (Meta's model
    card) at 768 x 8,192 = 6,291,456 tokens a step."""
    doc = json.loads(run_cli(*SMALL, "--tokens", "15e12", "--json", check=True).stdout)
    step = next(s["step_time_s"] for s in doc["strategies"] if s["strategy"] == doc["chosen"])
    assert doc["tokens_per_step"] == 768 * 8192 and doc["train_tokens"] == 15e12
    assert doc["time_to_train_s"] == pytest.approx(15e12 / (768 * 8192) * step, rel=1e-12)  # the same to rounding
    (line,) = [x for x in run_cli(*SMALL, "--tokens", "15e12", check=True).stdout.splitlines()
               if x.startswith("time to train")]
    assert doc["gpu_hours_to_train"] == doc["gpus"] * doc["time_to_train_s"] / 3600  # walk24: and its GPU-hours
    assert doc["gpu_hours_to_train"] < 1e6  # whole hours below a million, as one site's line writes them
    assert line.startswith(f"time to train 15T tokens: {doc['time_to_train_s'] / 86400:.1f} days, "
                           f"{round(doc['gpu_hours_to_train']):,} GPU-hours on {doc['gpus']:,} GPUs (at the step "
                           f"across sites, dp: ")
    refused = run_cli(*SMALL, "--tokens", "15e12", "--search")
    assert refused.returncode == 2 and refused.stderr.startswith("error: --tokens: reports one layout's time to "
                                                                 "train; not with --search"), refused.stderr


@pytest.mark.parametrize("model_name,sizes", [
    ("llama3-70b", dict(tp=8, pp=4, dp=96, global_batch=768)),  # walk16: 270.6 GiB where the gradients are 262.8
    ("llama3-8b", dict(tp=8, pp=2, dp=8, global_batch=64)),
    ("llama3-8b", dict(tp=8, pp=4, vpp=2, dp=8, global_batch=64)),
    ("qwen3-30b-a3b", dict(tp=1, ep=8, pp=2, dp=16, global_batch=64)),  # dense and expert bytes, each stage's own
])
def test_pipeline_stages_each_send_their_own_gradients_across(model_name, sizes):
    """Across two sites the ring all-reduce moves 2 (K - 1) / K x V = V per direction, V one replica's gradients:
    every parameter once at 4 bytes (fp32 reduction, Megatron's default), whatever pp splits them into. The
    busiest stage counted for every stage put the embedding and the head on each (3% high for Llama 3 70B pp 4)."""
    model = load_model(model_name)
    r = estimate_across_sites(build_region("two-site-h100"), model, make_layout(**sizes), contention=False)
    assert r.strategies[0].dci_bytes_per_step == pytest.approx(_replica_params(model, sizes.get("tp", 1)) * 4,
                                                               rel=1e-6)


def test_search_across_pp_searches_pipelines_that_split_at_the_sites():
    """walk16: ``--search --across pp`` ranked one site's share, whose best layouts have pp 1, then refused ("none of
    the 2 best layouts of a site's share spans the sites by pp"). The search now tries only pp a multiple of the
    sites, each ranked layout timed as ``--across pp`` times it alone."""
    doc = json.loads(run_cli("train", "two-site-h100", "--model", "llama3-70b", "--search", "--across", "pp",
                             "--global-batch", "768", "--top", "3", "--no-contention", "--json", check=True).stdout)
    assert len(doc["ranked"]) == 3 and doc["across"] == "pp" and not doc["skipped"]
    region, model = build_region("two-site-h100"), load_model("llama3-70b")
    for r in doc["ranked"]:
        L = r["one_site"]["layout"]
        assert L["pp"] % 2 == 0 and r["chosen"] == "pp" and r["fits"]
        fields = {k: L[k] for k in ("tp", "cp", "pp", "vpp", "ep", "micro_batch", "recompute", "dp_sharding")}
        alone = estimate_across_sites(region, model, make_layout(dp=L["dp"] * 2, global_batch=768, **fields),
                                      across="pp", contention=False)
        assert r["step_time_s"] == pytest.approx(alone.step_time_s, rel=1e-9)
