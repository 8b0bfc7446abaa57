"""tidy74: walk31's and tidy73's small leftovers, each one rule in one place."""

import json

import numpy as np
import pytest

from conftest import ROOT, run_cli
from small_regions import loss_crossing_s, region_file, two_sites
from topo.fabric.region import build_region
from topo.training.dp_across import dp_ranks_per_node
from topo.training.multisite import estimate_across_sites
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.unit_params import block_params_on_gpu

SPEC = "dgx-h100-superpod"
JOB = ["--model", "llama3-8b", "--layout", "tp=8,dp=128,global_batch=1024"]


def _plan(*args):
    return run_cli("plan", SPEC, "--no-collectives", *args, check=True)


def test_each_tco_says_what_its_storage_was_sized_for(tmp_path):
    """walk31: `topo plan` without --model priced storage for a compute-optimal model of the cluster's budget and
    `report --train` for the job's model, two TCOs for one building with no word why. Each says it, from
    PlanResult.storage_sized_for: the model, its parameters, checkpoints and data; without a model, how to size
    it for a job. The checkpoint is parameters x the catalog's bytes per parameter (reliability.checkpoint)."""
    doc = json.loads(_plan("--json").stdout)
    said, params = doc["storage_sized_for"], doc["reliability"]["params"]
    assert said.startswith(f"storage sized for compute-optimal, {params:.3g} parameters (5 checkpoints of ")
    assert said.endswith("--model M --layout L sizes it for a job's model")
    assert f"note: the capex and TCO price the {said}" in _plan().stdout.splitlines()
    doc = json.loads(_plan(*JOB, "--json").stdout)
    n = load_model("llama3-8b").total_params
    ckpt_TB = doc["storage"]["checkpoint_bytes"] / 1e12
    assert doc["reliability"]["params"] == n
    assert doc["storage_sized_for"] == (f"storage sized for llama3-8b, {n:.3g} parameters (5 checkpoints of "
                                        f"{ckpt_TB:,.3g} TB and {doc['storage']['dataset_tokens']:.3g} tokens of data)")
    assert f"note: the capex and TCO price the {doc['storage_sized_for']}" in _plan(*JOB).stdout.splitlines()
    # side by side: a row under the TCO names each design's
    rows = run_cli("plan", SPEC, "dgx-b200-superpod", "--no-collectives", check=True).stdout.splitlines()
    (row,) = [ln for ln in rows if ln.startswith("  storage sized for")]
    assert row.count("compute-optimal, ") == 2
    # report --plan --train: the same words in its TCO row as plan --model's
    out = tmp_path / "r.html"
    run_cli("report", SPEC, "--plan", "--train", *JOB[1:], "-o", str(out), check=True)
    assert f"over 5 years; {doc['storage_sized_for']}</td>" in out.read_text()


def test_the_readme_says_what_grow_tiers_does():
    """walk31 Left 4: fabric.grow_tiers was named by describe's error and the spec reference, not the README's tour.
    Its line's command builds 3 tiers (tests/test_readme_figures.py); without the key the spec is refused with the
    key named."""
    p = run_cli("describe", SPEC, "--set", "cluster.num_units=256")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "set fabric.grow_tiers = true" in p.stderr
    readme = (ROOT / "README.md").read_text()
    tour = readme[readme.index("A fabric may have up to 8 tiers"):readme.index("## Planning a cluster")]
    assert "`fabric.grow_tiers = true`" in tour


def test_the_readme_says_designs_of_different_sizes_need_dp():
    """walk31 Left 3: one --layout on 65,536 B200 and 64,512 GB200 without dp fills each (tp 8 x pp 16: dp 512 and
    448, the GB200 job at 64 of each of its 896 racks since tidy122, section 445; 504 at every GPU before), and one
    global batch of 8,192 does not divide 448; the README's comparison says to give dp (dp=504 runs every GPU)."""
    flat = " ".join((ROOT / "README.md").read_text().split())
    assert 65_536 // 128 == 512 and 64_512 // 72 * 64 // 128 == 448 and 8_192 % 448 and 8_064 % 504 == 0
    assert "dp 512 and 448" in flat
    assert "to compare designs of different sizes on one job, give `dp=`" in flat
    assert "designs of different sizes compare one job with `dp=` given" in flat


def test_an_moe_blocks_router_and_norm_are_one_formula():
    """tidy73 Left (b): block_params_on_gpu wrote the MoE block's router and norm (h x experts + h) beside
    block_params; both read ModelSpec.router_and_norm_params. DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json:
    hidden_size 7168, n_routed_experts 256): 7,168 x 257 = 1,842,176. On one GPU (tp = ep = etp = 1) an MoE block's
    dense and expert parameters sum to its weights less the router's expert bias (a buffer, no optimizer state)."""
    m = load_model("deepseek-v3-671b")
    assert m.router_and_norm_params == 7_168 * 257 == 1_842_176 and m.router_params == 7_168 * 256
    one = make_layout(tp=1, dp=1, global_batch=1)
    assert sum(block_params_on_gpu(m, one, "E")) == m.block_params("E") - m.router_bias_params
    q = load_model("qwen3-30b-a3b")  # Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, num_experts 128
    assert q.router_and_norm_params == 2_048 * 129 and q.router_bias_params == 0
    assert sum(block_params_on_gpu(q, one, "E")) == q.block_params("E")
    assert load_model("llama3-8b").router_and_norm_params == 0


def test_llama3_parameter_counts_are_the_released_checkpoints():
    """Llama 3 / 3.1's files read vocab 128,000 (arXiv 2407.21783 Table 3's rounding); Meta's config.json gives
    vocab_size 128,256 for each (https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json, -70B, -405B),
    and the checkpoints hold 8,030,261,248 / 70,553,706,496 / 405,853,388,800 parameters (Hugging Face's safetensors
    totals, 8.03B / 70.6B / 406B on the model pages). By hand: L (2 h^2 + 2 h kv + 3 h ffn + 2 h) + 2 V h + h."""
    for name, (L, h, ffn, n) in {"llama3-8b": (32, 4_096, 14_336, 8_030_261_248),
                                 "llama3-70b": (80, 8_192, 28_672, 70_553_706_496),
                                 "llama3-405b": (126, 16_384, 53_248, 405_853_388_800)}.items():
        m = load_model(name)
        assert m.vocab == 128_256, name
        assert L * (2 * h * h + 2 * h * 1_024 + 3 * h * ffn + 2 * h) + 2 * 128_256 * h + h == n
        assert m.total_params == n, name


# regpp73 Left 1: two DGX H100 SUs 40 km apart on 16 x 800 Gb/s (tests/small_regions.py), one 400 Gb/s ConnectX-7 a
# GPU, 50 GB/s (../shared/data/hardware.md, DGX H100 RA); 8 GPUs a server
REGION = two_sites("t74", "two SUs", "dgx-h100-superpod", 1)
CROWDED = dict(tp=4, dp=8, global_batch=8, seq_len=4096)  # 4 replicas a site: a DP group's ranks 0, 4, 8, 12: 2 a node


def test_a_dp_groups_ranks_on_one_node():
    """The most ranks of a data-parallel group on one 8-GPU node: 2 at a stride of 4, 1 at a stride of 8, 8 at tp 1."""
    assert dp_ranks_per_node(np.array([[0, 4, 8, 12], [1, 5, 9, 13]]), 8) == 2
    assert dp_ranks_per_node(np.array([[0, 8, 16, 24]]), 8) == 1
    assert dp_ranks_per_node(np.arange(16).reshape(1, 16), 8) == 8


def test_the_flat_ring_is_not_priced_where_a_dp_group_shares_a_node(tmp_path_factory):
    """The flat cross-DC ring's crossings assume one rank of a data-parallel group a node (regpp73, section 333);
    with tp 4 on 8-GPU servers each group has 2 ranks a node: auto takes the hierarchical reduction, 2 hop +
    V / (16 NICs x 50 GB/s) over the share's 16 GPUs, and says why the ring was not priced."""
    region = build_region(region_file(tmp_path_factory, REGION, "t74"))
    job = estimate_across_sites(region, load_model("llama3-8b"), make_layout(**CROWDED))
    s = job.strategies[0]
    loss = loss_crossing_s(region, job)  # regions76: the logged loss's all-reduce, in the DCI time
    assert s.dci_time_s == pytest.approx(s.latency_s + s.dci_bytes_per_step / (16 * 50e9) + loss, rel=1e-12)
    line = next(a for a in job.assumptions if a.startswith("dp across sites: the gradients cross"))
    assert "by the hierarchical reduction (the only one priced)" in line
    assert "flat cross-DC ring not priced: a data-parallel group has up to 2 ranks on one node" in line


def test_the_flat_ring_named_where_a_dp_group_shares_a_node_is_one_line(tmp_path_factory):
    path = region_file(tmp_path_factory, REGION + '[nccl]\ndp_reduction = "flat_ring"\n', "t74")
    p = run_cli("train", path, "--model", "llama3-8b", "--tp", "4", "--dp", "8", "--global-batch", "8")
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith("error: nccl.dp_reduction: 'flat_ring': ") and "allowed here: hierarchical or auto" \
        in p.stderr, p.stderr
    ok = run_cli("train", path, "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "8")
    assert ok.returncode == 0, ok.stderr  # one rank a node: the ring is priced


def test_a_set_hierarchical_form_on_a_crowded_node_keeps_its_reason():
    """rev74 Left b: with ``nccl.dp_reduction = "hierarchical"`` set and two ranks of a data-parallel group on one
    node (tp 4 on 8-GPU servers), the flat ring is not priced, yet the form was chosen by the region's setting: the
    note says so, and "the only one priced" only under ``auto``. Both forms are worked out once for the step and its
    note (rev74 Left a)."""
    job = ("train", "two-site-h100", "--model", "llama3-8b", "--tp", "4", "--dp", "16", "--global-batch", "64")

    def said(*extra):
        out = run_cli(*job, *extra, check=True).stdout
        (line,) = [x for x in out.splitlines() if "dp across sites: the gradients cross" in x]
        return line

    assert "(as the region's nccl.dp_reduction sets)" in said("--set", "nccl.dp_reduction=hierarchical")
    auto = said()
    assert "(the only one priced)" in auto and "flat cross-DC ring not priced: a data-parallel group has up to 2" in auto
