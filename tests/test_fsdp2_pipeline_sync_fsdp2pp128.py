"""fsdp2pp128: FSDP2 under PyTorch's pipelining as torchtitan runs it (``fsdp_pipeline_sync = "step"``).

torchtitan ``fully_shard``-s each stage's model part (pytorch/torchtitan@b5bcd76c ``torchtitan/distributed/fsdp.py``
line 368) and keeps the gathered weights from forward to backward under PP (lines 129-132). PyTorch's pipelining then
runs every backward but the last with gradient sync and resharding off (pytorch/pytorch@01386103
``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync``) and reduce-scatters every unit after the
stage's last backward (``_post_backward``; pytorch/pytorch@00722e64 ``schedules.py`` ``Schedule1F1B`` calls
``perform_reduce_grad`` after its cooldown); FSDP2 accumulates the unsynced gradients unsharded in the reduce dtype
(pytorch/pytorch@010ae4a8 ``_fsdp_param.py`` ``to_accumulated_grad_if_needed``). So: each unit gathered and
reduce-scattered once a schedule run, the stage's gathered bf16 weights and its fp32 unsharded gradients held.
"""

import json

import pytest

from conftest import run_cli
from topo.training.memory import memory_per_gpu, stage_params
from topo.training.model import load_model
from topo.training.multisite import dp_passes
from topo.training.parallel import check_layout, make_layout
from topo.training.step import step_traffic

TORCHTITAN = dict(tp=8, pp=2, dp=4, global_batch=64, micro_batch=1, dp_sharding="zero3", wgrad_output="fsdp2",
                  weight_bytes=4.0, gather_bytes=2.0, optimizer_bytes_per_param=8.0,
                  fsdp_reshard_after_forward=False)  # torchtitan's state: fp32 params gathered in bf16, fp32 reduce


def _lay(**kw):
    return make_layout(**{**TORCHTITAN, **kw})


def _dp(model, lay):
    return {it["collective"]: it for it in step_traffic(model, lay) if it["dim"] == "dp"}


@pytest.mark.parametrize("flushes", [1, 2])
def test_each_unit_is_gathered_and_reduce_scattered_once_a_schedule_run(flushes):
    """Per-micro-batch FSDP2 makes m x units gathers and reduce-scatters; PyTorch pipelining's branch makes one of
    each per unit per schedule run (``pipeline_flushes``), each call the same unit's bytes: bf16 gathers, fp32
    reductions, of the busiest stage's units."""
    model = load_model("llama3-8b")
    per_mb, once = _lay(pipeline_flushes=flushes), _lay(pipeline_flushes=flushes, fsdp_pipeline_sync="step")
    m = per_mb.microbatches  # 64 / (4 x 1) = 16
    a, b = _dp(model, per_mb), _dp(model, once)
    for coll in ("all_gather", "reduce_scatter"):
        assert a[coll]["calls"] == m * b[coll]["calls"] / flushes
        assert a[coll]["size_bytes"] == b[coll]["size_bytes"]
    # the step's bytes: every parameter of the busiest stage once per run, at 2 B gathered and 4 B reduced (1/tp)
    dense, expert, _ = max(stage_params(model, once), key=lambda r: r[0] + r[1])
    n = dense + expert
    assert b["all_gather"]["size_bytes"] * b["all_gather"]["calls"] == pytest.approx(flushes * 2.0 * n)
    assert b["reduce_scatter"]["size_bytes"] * b["reduce_scatter"]["calls"] == pytest.approx(flushes * 4.0 * n)
    assert dp_passes(once) == flushes and dp_passes(per_mb) == m  # the regions' windows read the same rule


def test_memory_holds_the_gathered_stage_and_its_unsharded_fp32_gradients():
    """Closed form on 8B, tp 8, pp 2: the rank's stage params n (16 layers and the embedding or the output layer, over
    tp) are held gathered at 2 B (bf16 ``param_dtype``) and their gradients unsharded at 4 B (fp32 ``reduce_dtype``),
    instead of 4 B sharded over dp 4; the weights and the optimizer state stay sharded."""
    model = load_model("llama3-8b")
    h, f, kv, v = 4096, 14336, 1024, 128256
    layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h  # q, o, k, v, the MLP's three, two norms (Llama 3 8B)
    stage0 = (16 * layer + v * h) / 8  # embedding first (tp 8 splits the vocabulary)
    stage1 = (16 * layer + h + v * h) / 8  # final norm and output layer last (the norm's share as topo divides it)
    per_mb, once = _lay(), _lay(fsdp_pipeline_sync="step")
    a = memory_per_gpu(model, per_mb, 80e9)
    b = memory_per_gpu(model, once, 80e9)
    n = (stage0, stage1)[b.stage]
    assert b.gradients_bytes == pytest.approx(4.0 * n, rel=1e-3)
    assert a.gradients_bytes == pytest.approx(4.0 * (stage0, stage1)[a.stage] / 4, rel=1e-3)
    assert b.buffers_bytes == pytest.approx(2.0 * n, rel=1e-3)  # the whole stage gathered, as kept per micro-batch
    assert b.weights_bytes == a.weights_bytes and b.optimizer_bytes == a.optimizer_bytes
    assert b.total_bytes - a.total_bytes == pytest.approx(4.0 * n * (1 - 1 / 4), rel=1e-3)


def _train(tmp_path, *extra):
    argv = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "2", "--dp", "4",
            "--global-batch", "64", "--dp-sharding", "zero3", "--json", "--layout",
            "wgrad_output=fsdp2,weight_bytes=4,gather_bytes=2,optimizer_bytes_per_param=8,"
            "fsdp_reshard_after_forward=false" + "".join(extra)]
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_reduce_scatter_after_the_last_backward_hides_behind_nothing(tmp_path):
    """``perform_reduce_grad`` runs after the stage's last backward and the optimizer waits for it
    (``_root_post_backward_final_callback``): all its seconds are exposed. Per micro-batch, all but the last unit's
    hide behind the backward. The note says which was priced."""
    per_mb, once = _train(tmp_path), _train(tmp_path, ",fsdp_pipeline_sync=step")
    rs = [c for c in once["comm"] if c["dim"] == "dp" and c["collective"] == "reduce_scatter"]
    rs_mb = [c for c in per_mb["comm"] if c["dim"] == "dp" and c["collective"] == "reduce_scatter"]
    assert rs and rs[0]["exposed_s"] == pytest.approx(rs[0]["time_s"], rel=1e-9)
    assert rs_mb[0]["exposed_s"] < rs_mb[0]["time_s"]
    assert any(n.startswith("FSDP2 under pp: priced as PyTorch pipelining runs a fully_shard-ed stage module")
               for n in once["notes"])


def test_walk45s_405b_moves_to_the_once_a_step_figure(tmp_path):
    """walk45 (section 453): Llama 3.1 405B on 2,048 H100 (TP8 PP8 DP32) at 100 Gb/s NICs priced 129.9 s per
    micro-batch against 30.5 s for fsdp_grad_op's once-a-step gathers. torchtitan's once-a-step FSDP2 moves the same
    bytes once a step as fsdp_grad_op (bf16 gathers, fp32 reductions), so it lands next to it, not next to the
    per-micro-batch figure (it differs in the reduction exposed after the last backward and the memory)."""
    def step(sharding, extra=""):
        argv = ["train", "dgx-h100-superpod", "--model", "llama3-405b", "--set", "cluster.num_units=8",
                "--set", "server.nic_rate=100Gbps", "--set", "fabric.tiers[0].port_rate=100Gbps",
                "--set", "fabric.tiers[1].port_rate=100Gbps", "--tp", "8", "--pp", "8", "--vpp", "2", "--dp", "32",
                "--global-batch", "1024", "--recompute", "full", "--dp-sharding", sharding, "--json", "--layout",
                "wgrad_output=fsdp2,weight_bytes=4,gather_bytes=2,optimizer_bytes_per_param=8" + extra]
        proc = run_cli(*argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["step_time_s"]
    per_mb = step("zero3")
    once = step("zero3", ",fsdp_reshard_after_forward=false,fsdp_pipeline_sync=step")
    grad_op = step("fsdp_grad_op")
    assert per_mb > 3 * grad_op  # the per-micro-batch gathers and reductions over 100G NICs
    assert once < per_mb and abs(once - grad_op) < 0.1 * (per_mb - grad_op)


@pytest.mark.parametrize("extra,says", [
    ({"pp": 1, "dp": 8}, "step pp 1"),
    ({"fsdp_reshard_after_forward": True}, "fsdp_reshard_after_forward false"),
    ({"vpp": 4}, "max_active_stages=3"),
    ({"wgrad_output": "main_grad"}, "wgrad_output fsdp2"),
    ({"dp_sharding": "fsdp_grad_op", "fsdp_reshard_after_forward": True}, "dp_sharding zero3 or fsdp"),
])
def test_what_the_mode_cannot_express_is_refused(extra, says):
    """Without pp FSDP2 reduces every micro-batch; resharding after the forward gathers again each micro-batch; a
    fourth chunk per rank is re-gathered each round (``_add_unshard_reshard``); only FSDP2 under ZeRO-3 has units."""
    from topo.errors import TopoError
    model = load_model("llama3-8b")
    lay = _lay(fsdp_pipeline_sync="step", **extra)
    with pytest.raises(TopoError) as e:
        check_layout(model, lay)
    assert e.value.key == "fsdp_pipeline_sync" and says in e.value.message


def test_a_bad_mode_from_the_cli_is_one_line(tmp_path):
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--dp", "64", "--global-batch", "64",
                   "--dp-sharding", "zero3", "--layout", "wgrad_output=fsdp2,fsdp_pipeline_sync=step", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert "fsdp_pipeline_sync" in proc.stderr and "Traceback" not in proc.stderr
