"""``topo train --ops`` (topo/training/op_table.py, topo/cli/train_ops.py): one block's operators as the step model
prices them. Its rows are the terms block_time sums, so their totals are block_time's, to the bit; the CLI prints
them as a table or the JSON key block_ops, and refuses --ops where there is no one layout on one site."""

import json

import pytest

from conftest import run_cli
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.op_table import block_op_table
from topo.training.operators import block_ops, block_time, op_passes_s
from topo.training.parallel import make_layout

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
    assert list(table) == ["*", "E"]
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
    assert set(doc["block_ops"]) == {"*", "E"}
    plain = json.loads(run_cli(*QWEN, "--json", check=True).stdout)
    assert "block_ops" not in plain and plain["step_time_s"] == doc["step_time_s"]


def test_ops_needs_one_layout():
    p = run_cli(*QWEN, "--ops", "--search")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == ("error: --ops: prints one layout's operators on one site; not with --search or a "
                                "region of several sites")
