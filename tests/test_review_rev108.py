"""rev108 (section 461): review of sections 452-454, 457 and the lead's divisor rule; each test here fails under a
mutation of the merged code that no test had caught (docs/calibration-findings.md section 461 lists them), and two
test the fixes of this review.

Sources: AI-Hypercomputer/maxtext@e591f30c ``src/maxtext/configs/types.py`` lines 3458-3466
(``calculate_global_batch_sizes``: the global batch is ``per_device_batch_size`` x devices) and
``fill_unspecified_mesh_axes`` (the ICI sizes multiply to a slice's devices); pytorch/pytorch@01386103
``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync`` (a ``fully_shard``-ed stage, every chunk of
it, gathered and reduce-scattered once a schedule run); pytorch/pytorch@010ae4a8
``torch/distributed/fsdp/_fully_shard/_fsdp_param.py`` ``to_accumulated_grad_if_needed`` (the unsharded gradient
accumulated in the reduce dtype, each parameter's own: the experts' ``expert_grad_reduce_bytes``).
"""

import json
import shutil

import pytest

import topo
from conftest import run_cli
from topo.errors import TopoError
from topo.training.jax_mesh import check_mesh_placement
from topo.training.mapping import placed_gpus_used
from topo.training.memory import memory_per_gpu, stage_params
from topo.training.model import load_model, models_dir
from topo.training.parallel import check_layout, make_layout
from topo.training.step import step_traffic

NVL72 = ("gb200-nvl72-superpod", "--set", "cluster.num_units=8")  # 8 racks of 72 GPUs, 576
TORCHTITAN = dict(tp=8, pp=2, dp=4, global_batch=64, micro_batch=1, dp_sharding="zero3", wgrad_output="fsdp2",
                  weight_bytes=4.0, gather_bytes=2.0, optimizer_bytes_per_param=8.0,
                  fsdp_reshard_after_forward=False)


def _lay(**kw):
    return make_layout(**{**TORCHTITAN, **kw})


def _dp(model, lay):
    return {it["collective"]: it for it in step_traffic(model, lay) if it["dim"] == "dp"}


# --- the JAX mesh: the divisor rule's allowed fill, the placed domain, the per-device batch ---------------------

@pytest.mark.parametrize("mesh, names_fill", [
    ("ici_fsdp=36,dcn_data=2", True),    # 36 divides 72: gpus_per_domain_used = 72 would pass
    ("ici_fsdp=48,dcn_data=2", False),   # 48 divides neither 64 nor 72
    ("ici_fsdp=128,dcn_data=2", False),  # more than 72
])
def test_the_fill_is_named_only_where_it_would_pass(mesh, names_fill):
    """rev108 fix: a refusal at 64 of each 72-GPU rack named ``gpus_per_domain_used = 72`` as allowed even where the
    ICI product does not divide 72, which the same check then refused."""
    with pytest.raises(TopoError) as e:
        check_mesh_placement(mesh, 64, source="--jax-mesh", domain_gpus=72)
    assert ("gpus_per_domain_used = 72" in str(e.value)) is names_fill
    if names_fill:  # and what it names passes
        check_mesh_placement(mesh, 72, source="--jax-mesh", domain_gpus=72)


def test_the_first_refusal_allows_only_divisors():
    """An ICI product above the domain's is told the rule both checks apply: a divisor, not 'at most'."""
    with pytest.raises(TopoError) as e:
        check_mesh_placement("ici_fsdp=16,dcn_data=2", 8, source="--jax-mesh")
    assert "whose product divides 8" in str(e.value)


@pytest.mark.parametrize("gpus, want", [(512, 64), (513, 72)])
def test_placed_gpus_used_at_the_fabrics_edge(gpus, want):
    """8 racks x 64 = 512 GPUs fit at 64 a rack; the 513th would be GPU 576 of a 576-GPU fabric: every GPU."""
    assert placed_gpus_used(gpus, 72, 576) == want


@pytest.mark.parametrize("extra", [(), ("--first-gpu", "72"), ("--skip-domains", "0")])
def test_the_mesh_check_reads_where_the_job_starts(extra):
    """``ici_fsdp=16,dcn_data=30`` (480 GPUs) fits at 64 of each of the 8 racks from GPU 0, so its 16-GPU ICI groups
    tile the racks; from rack 1 (``--first-gpu 72`` or ``--skip-domains 0``) 7 x 64 = 448 < 480, the job is placed
    at every GPU of 7 racks, and 16 does not divide 72: refused (rev107's ``_mesh_domain_used``)."""
    proc = run_cli("train", *NVL72, "--model", "llama3-8b", "--global-batch", "480", "--jax-mesh",
                   "ici_fsdp=16,dcn_data=30", *extra)
    if not extra:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 2 and proc.stdout == ""
    assert "does not divide the 72 the job uses of an NVLink domain" in proc.stderr


def test_per_device_batch_splits_over_data_and_fsdp():
    """dp is data x fsdp (4 x 8 = 32): 0.25 x 32 GPUs = 8 sequences splits over the 4 data replicas but not the
    32 dp ranks, and is refused naming --per-device-batch."""
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--jax-mesh", "ici_fsdp=8,dcn_data=4",
                   "--per-device-batch", "0.25")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: --per-device-batch: ") and "the mesh's 32 data-parallel replicas" in lines[0]


# --- FSDP2 under PyTorch's pipelining (fsdp_pipeline_sync = "step") ---------------------------------------------

def test_each_chunk_is_gathered_once_a_run_under_vpp():
    """vpp 2: the rank's two chunks are each a fully_shard-ed stage module, each unit of both gathered and
    reduce-scattered once a schedule run (not once per chunk per run): the step's bytes are the rank's parameters
    once, 2 B gathered and 4 B reduced."""
    model = load_model("llama3-8b")
    lay = _lay(vpp=2, fsdp_pipeline_sync="step")
    dp = _dp(model, lay)
    dense, expert, _ = max(stage_params(model, lay), key=lambda r: r[0] + r[1])
    assert dp["all_gather"]["size_bytes"] * dp["all_gather"]["calls"] == pytest.approx(2.0 * (dense + expert))
    assert dp["reduce_scatter"]["size_bytes"] * dp["reduce_scatter"]["calls"] == pytest.approx(4.0 * (dense + expert))


def test_hsdps_replica_all_reduce_is_once_a_run_too():
    """HSDP (dp 4 sharded in groups of 2): the shard's all-reduce across the replicas follows the reduce-scatter,
    once a schedule run under ``step``, every micro-batch otherwise, the same bytes a call."""
    model = load_model("llama3-8b")
    per_mb, once = _dp(model, _lay(dp_shard=2)), _dp(model, _lay(dp_shard=2, fsdp_pipeline_sync="step"))
    m = _lay().microbatches
    assert per_mb["all_reduce"]["calls"] == m * once["all_reduce"]["calls"]
    assert per_mb["all_reduce"]["size_bytes"] == once["all_reduce"]["size_bytes"]


def _train(tmp_path, extra=""):
    argv = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "2", "--dp", "4",
            "--global-batch", "64", "--dp-sharding", "zero3", "--json", "--layout",
            "wgrad_output=fsdp2,weight_bytes=4,gather_bytes=2,optimizer_bytes_per_param=8,"
            "fsdp_reshard_after_forward=false" + extra]
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return doc, next(c for c in doc["comm"] if c["dim"] == "dp" and c["collective"] == "all_gather")


def test_a_runs_gathers_hide_as_one_micro_batchs_do(tmp_path):
    """Under ``step`` the units are gathered in the first micro-batch's forward, each prefetched behind the one
    before as in any micro-batch: the step's exposed gather seconds are one micro-batch's of the per-micro-batch
    way (16 micro-batches, one schedule run), the same calls. The windows are each way's mean micro-batch forward,
    which under ``step`` carries FSDP2's copy-outs once a run, not every micro-batch (tidy126,
    :func:`topo.training.fsdp2_copies.unit_round_share`): slightly shorter, so slightly more exposed (0.02% here), no
    less."""
    (per_mb, g_mb), (_, g_once) = _train(tmp_path), _train(tmp_path, ",fsdp_pipeline_sync=step")
    m = per_mb["layout"]["microbatches"]
    assert g_mb["calls_per_step"] == m * g_once["calls_per_step"]
    assert g_mb["exposed_s"] / m <= g_once["exposed_s"] <= g_mb["exposed_s"] / m * (1 + 1e-3)


def test_the_experts_unsharded_gradients_take_their_own_reduce_dtype():
    """An MoE stage under ``step``: dense gradients held unsharded at ``grad_reduce_bytes``, the experts' at
    ``expert_grad_reduce_bytes`` (each FSDP2 unit's own reduce dtype)."""
    model = load_model("mixtral-8x7b")
    lay = _lay(tp=2, pp=2, dp=4, ep=4, global_batch=16, fsdp_pipeline_sync="step", grad_reduce_bytes=4.0,
               expert_grad_reduce_bytes=2.0)
    check_layout(model, lay)
    mem = memory_per_gpu(model, lay, 192e9)
    dense, expert, _ = stage_params(model, lay)[mem.stage]
    assert expert > 0 and mem.gradients_bytes == pytest.approx(4.0 * dense + 2.0 * expert)


@pytest.mark.parametrize("extra, says", [
    ({"pipeline_schedule": "dualpipe"}, "pipeline_schedule dualpipe is not PyTorch's pipelining"),
    ({"dp_shard": 2, "dp_outer_sharding": "optim"}, "dp_outer_sharding optim is Megatron-FSDP's"),
    ({"dp_overlap_policy": "xla_lhs"}, "dp_overlap_policy xla_lhs is XLA's"),  # rev108 fix
])
def test_what_pytorch_pipelining_does_not_run_is_refused(extra, says):
    """DeepSeek's DualPipe, Megatron-FSDP's optimizer-sharded replicas and XLA's latency-hiding scheduler are not
    PyTorch pipelining's FSDP2 branch (before rev108 ``xla_lhs`` with ``step`` ran, XLA's overlap rule pricing a
    PyTorch job)."""
    model = load_model("llama3-8b")
    with pytest.raises(TopoError) as e:
        check_layout(model, _lay(fsdp_pipeline_sync="step", **extra))
    assert e.value.key == "fsdp_pipeline_sync" and says in e.value.message


def test_a_model_files_unknown_key_gets_no_torchtitan_hint(tmp_path):
    """The torchtitan key hints are the layout's: a model file's unknown ``compile`` key keeps the plain message."""
    path = tmp_path / "m.toml"
    shutil.copy(models_dir() / "llama3-8b.toml", path)
    path.write_text("compile = true\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(TopoError) as e:
        load_model(path)
    assert "unknown key 'compile'" in str(e.value) and "torch.compile" not in str(e.value)


def test_the_bundled_nvl72_fabric_is_what_these_tests_assume():
    fabric = topo.build_fabric(topo.load_spec(NVL72[0], [NVL72[2]]))
    assert fabric.spec.gpus_per_domain == 72 and fabric.layout.num_gpus == 576
