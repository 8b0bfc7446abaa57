"""``topo train --ops`` (topo/training/op_table.py, topo/cli/train_ops.py): one block's operators as the step model
prices them. Its rows are the terms block_time sums, so their totals are block_time's, to the bit; the end units
(embedding, output head and loss, MTP head) have rows too; each pipeline rank's compute per micro-batch, the
busiest's times the micro-batches being the step's compute; the CLI prints them as tables or the JSON keys
block_ops and stage_compute, and refuses --ops where there is no one layout on one site."""

import json

import pytest

import topo
from conftest import run_cli
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.op_table import block_op_table, step_op_table, step_stage_table
from topo.training.operators import block_ops, block_time, op_passes_s
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

QWEN = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "16", "--ep", "16", "--dp", "16",
        "--global-batch", "1024", "--precision", "fp8"]


@pytest.mark.parametrize("graphs", [(), ("moe_router", "moe_preprocess")])
def test_the_rows_add_up_to_block_time(graphs):
    """Qwen3-30B on H100 at EP 16, FP8 (the 26.04 row's layout), eager and with the router graphed: forward,
    backward and both passes' host seconds of each block kind sum to block_time's."""
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=16, dp=16, global_batch=1024, seq_len=4096, precision="fp8", cuda_graph_scope=graphs)
    gpu = gpu_compute("H100")
    table = block_op_table(model, lay, gpu)
    assert list(table) == ["*", "E", "embedding", "logits"]
    for kind, rows in table.items():
        bt = block_time(model, lay, gpu, kind)
        assert [r["op"] for r in rows] == [op.name for op in block_ops(model, lay, kind)]
        assert sum(r["forward_s"] for r in rows) == pytest.approx(bt.forward_s, rel=1e-12)
        assert sum(r["backward_s"] for r in rows) == pytest.approx(bt.backward_s, rel=1e-12)
        assert sum(r["host_forward_s"] for r in rows) == pytest.approx(bt.host_s, rel=1e-12)
        assert sum(r["host_backward_s"] for r in rows) == pytest.approx(bt.host_backward_s, rel=1e-12)
    router = {r["op"]: r for r in table["E"]}["router_topk"]
    assert router["captured"] == bool(graphs) and (router["host_forward_s"] == 0.0) == bool(graphs)
    fc1 = {r["op"]: r for r in table["E"]}["fc1"]
    op = {o.name: o for o in block_ops(model, lay, "E")}["fc1"]
    assert (fc1["forward_s"], fc1["backward_s"]) == op_passes_s(op, gpu, lay)
    # an FP8 grouped GEMM's kernels: a GEMM and a cast per local expert forward, two GEMMs and a cast backward
    assert (fc1["kernels_forward"], fc1["kernels_backward"]) == (2 * 8, 3 * 8)


def test_the_cli_prints_the_table_and_the_json_key():
    text = run_cli(*QWEN, "--ops", check=True).stdout
    assert "operators of one MoE block (E), one micro-batch on one GPU" in text
    assert any(line.startswith("fc1 ") and line.rstrip().endswith("16 / 24") for line in text.splitlines())
    doc = json.loads(run_cli(*QWEN, "--ops", "--json", check=True).stdout)
    assert set(doc["block_ops"]) == {"*", "E", "embedding", "logits"}
    assert [(r["rank"], r["busiest"], r["ends"]) for r in doc["stage_compute"]] == [(0, True, ["embedding", "logits"])]
    assert "compute of each pipeline rank" not in text  # one rank: no stage table
    plain = json.loads(run_cli(*QWEN, "--json", check=True).stdout)
    assert "block_ops" not in plain and plain["step_time_s"] == doc["step_time_s"]


def test_ops_needs_one_layout():
    p = run_cli(*QWEN, "--ops", "--search")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == ("error: --ops: prints one layout's operators on one site; not with --search or a "
                                "region of several sites")


# Megatron-Bridge's DeepSeek-V3 GB200 layout (26.06 row of data/reference/training_runs_published.csv: TP1 PP4 VPP4
# EP64, its recipe's pipeline layout, benchmarks/training_accuracy.py DSV3_LAYOUTS[(4, 4)])
DSV3 = dict(pp=4, vpp=4, dp=64, ep=64, etp=1, global_batch=4096, seq_len=4096, gpus_per_domain_used=64,
            precision="fp8", pipeline_layout="Et*4|(t*4|)*14tmL")


@pytest.mark.parametrize("extra", [{}, {"overlap_ep": True, "cuda_graph_scope": ("full_iteration",)}])
def test_each_rank_compute_and_the_busiest_is_the_step_compute(extra):
    """Rank i of PP 4 x VPP 4 holds chunks i, i + 4, i + 8, i + 12 of Et*4|(t*4|)*14tmL: 16 layers each, the last
    rank 3 x 4 + t + m = 14 (the MTP module's layer counted) with the MTP head and the output head. The busiest
    rank's compute per micro-batch times the 64 micro-batches is the step's compute, eager (the all-to-alls'
    cover of the host's waits passed on) and graphed; the last rank's logits seconds are both heads' rows."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", []))
    model = load_model("deepseek-v3-671b")
    lay = make_layout(**DSV3, **extra)
    r = estimate_step(fabric, model, lay)
    stages = step_stage_table(fabric, model, lay, ep_cover_s=r.ep_cover_s)
    assert [(s["rank"], s["layers"], s["ends"]) for s in stages] == [
        (0, 16, ["embedding"]), (1, 16, []), (2, 16, []), (3, 14, ["mtp_head", "logits"])]
    busiest = [s for s in stages if s["busiest"]]
    assert len(busiest) == 1
    assert busiest[0]["microbatch_s"] * r.layout["microbatches"] == pytest.approx(r.breakdown_s["compute"],
                                                                                  rel=1e-12)
    assert (r.ep_cover_s > 0) == (not extra)  # eager and not overlapped: the forward all-to-alls cover host waits
    ops = step_op_table(fabric, model, lay)
    heads = sum(o["forward_s"] + o["backward_s"] for k in ("logits", "mtp_head") for o in ops[k]
                if o["module"] == "logits")
    assert stages[3]["by_module_s"]["logits"] == pytest.approx(heads, rel=1e-12)
    assert all("logits" not in s["by_module_s"] for s in stages[:3])


def test_the_cli_prints_the_stage_table():
    text = run_cli("train", "gb200-nvl72-superpod", "--model", "deepseek-v3-671b", "--gpus", "256", "--pp", "4",
                   "--vpp", "4", "--dp", "64", "--ep", "64", "--etp", "1", "--gpus-per-domain-used", "64",
                   "--global-batch", "4096", "--precision", "fp8", "--pipeline-layout", "Et*4|(t*4|)*14tmL", "--ops",
                   check=True).stdout
    assert "operators of one output head and loss (logits)" in text
    assert "operators of one multi-token-prediction head and loss (mtp_head)" in text
    assert "compute of each pipeline rank, one micro-batch (ms) and the step's 64 (s)" in text
    rows = [line.split() for line in text.splitlines() if line[:2] in ("0 ", "1 ", "2 ", "3 ")]
    assert [row[:2] for row in rows][-4:] == [["0", "16"], ["1", "16"], ["2", "16"], ["3", "*"]]
