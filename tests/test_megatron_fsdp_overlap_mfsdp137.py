"""mfsdp137 (issue 29, findings 473): Megatron-FSDP forcing ``overlap_grad_reduce`` on.

- Megatron-FSDP sets ``overlap_grad_reduce`` True whenever it shards the gradients (``optim_grads`` and
  ``optim_grads_params``) and ``overlap_param_gather`` True when it shards the weights, whatever the config says
  (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
  megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py lines 327-337; the same at core_v0.14.0 lines
  259-270), and Megatron-Core 0.13's ``custom_fsdp`` asserts both (``fully_sharded_data_parallel.py`` lines
  196-204). ``overlap_dp = false`` on a layout that names Megatron-FSDP sharding the gradients
  (``dp_outer_sharding = "optim"``, which Megatron-FSDP runs only with ``optim_grads_params``; ``wgrad_output =
  "copied"`` under ZeRO-2/3) is a run it never makes, refused in one line. FSDP2's and a layout naming no framework
  keep ``overlap_dp = false`` exposing the collectives.
- Section 469's Left 3: under ``overlap_param_gather_with_optimizer_step`` chunk 0's gather is dispatched right after
  its own optimizer's step, behind the later chunks' (NVIDIA/Megatron-LM@14346b65 ``optimizer.py`` lines 1667-1675);
  across sites it is the same collective (NCCL's flat cross-DC ring carries it over every site's replicas), so the
  cross-site gather window (``multisite.dp_gather_window_s``) starts that lead earlier, the step's own
  ``gather_lead_s`` (one formula, ``step.gather_lead_s``). Closed form for a dense model: the lead is the busiest
  stage's optimizer over ``(vpp - 1) / vpp`` of its shard, ``3/4`` of the step's ``optimizer`` line at vpp 4
  (``operators.optimizer_step_s`` is linear in the parameters).
"""

import dataclasses
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from small_regions import spy_dp_crossing
from topo.fabric.region import build_region
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.multisite import dp_gather_window_s, estimate_across_sites
from topo.training.parallel import check_layout, make_layout

FSDP = dict(tp=8, dp=4, global_batch=256, micro_batch=32, seq_len=8192)
TRAIN = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "256")


def _check(**kw):
    check_layout(load_model("llama3-8b"), make_layout(**FSDP, **kw))


def test_the_cli_refuses_overlap_off_under_the_outer_optimizer_group():
    r = run_cli(*TRAIN, "--overlap", "dp=off", "--layout", 'dp_sharding="fsdp",dp_shard=2,dp_outer_sharding="optim"')
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: --overlap: overlap_dp: false with dp_outer_sharding optim, which is Megatron-FSDP")
    assert "overlap_grad_reduce" in line and line.endswith("allowed with it: true")


@pytest.mark.parametrize("sharding", ["zero2", "zero3", "fsdp"])
def test_copied_gradients_under_sharded_gradients_are_megatron_fsdp(sharding):
    with pytest.raises(TopoError) as exc:
        _check(dp_sharding=sharding, wgrad_output="copied", overlap_dp=False)
    assert exc.value.key == "overlap_dp"
    assert f"wgrad_output copied under dp_sharding {sharding}" in str(exc.value)


@pytest.mark.parametrize("kw", [
    dict(dp_sharding="zero3", wgrad_output="fsdp2"),  # FSDP2 runs its collectives unoverlapped without prefetch
    dict(dp_sharding="zero3"),  # no framework named
    dict(dp_sharding="zero1", wgrad_output="copied"),  # Megatron-FSDP's "optim": the reduction is delayed, not forced
    dict(dp_sharding="fsdp", dp_shard=2),  # hybrid, replicas not optimizer-sharded: no field names Megatron-FSDP
], ids=["fsdp2", "unnamed", "mfsdp_optim", "hsdp_no_shard"])
def test_other_layouts_keep_overlap_off(kw):
    _check(**kw, overlap_dp=False)


def test_overlapped_megatron_fsdp_is_allowed():
    _check(dp_sharding="fsdp", dp_shard=2, dp_outer_sharding="optim", wgrad_output="copied")


def test_the_cross_site_gather_window_takes_the_optimizer_steps_lead(tmp_path, monkeypatch):
    """topologies/two-site-h100.toml at one SU a site, NCCL's flat cross-DC ring (the form whose gathers cross the
    sites in the next forward); Llama 3 70B tp 8 pp 4 vpp 4 dp 16 (8 a site), micro-batch 8."""
    text = (Path(ROOT) / "topologies" / "two-site-h100.toml").read_text()
    region_toml = tmp_path / "two.toml"
    region_toml.write_text(text.replace("cluster.num_units=6", "cluster.num_units=1")
                           + '\n[nccl]\ndp_reduction = "flat_ring"\n')
    region = build_region(str(region_toml))
    seen = spy_dp_crossing(monkeypatch)
    lay = make_layout(tp=8, pp=4, vpp=4, dp=16, global_batch=512, micro_batch=8, seq_len=8192, dp_sharding="zero1",
                      overlap_param_gather_with_optimizer_step=True)
    estimate_across_sites(region, load_model("llama3-70b"), lay)
    one, share = seen["one"], seen["lay"]
    assert share.dp == 8 and seen["cross"].name == "flat_ring" and seen["cross"].gather_phase.time_s > 0
    assert one.gather_lead_s == pytest.approx(3 / 4 * one.breakdown_s["optimizer"], rel=1e-12)
    without = dp_gather_window_s(dataclasses.replace(one, gather_lead_s=0.0), share)
    assert without > 0  # not clamped: the window grows by the whole lead
    assert dp_gather_window_s(one, share) == pytest.approx(without + one.gather_lead_s, rel=1e-12)
