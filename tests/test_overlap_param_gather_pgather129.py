"""Megatron-Core's ``overlap_param_gather`` apart from ``overlap_grad_reduce`` (pgather129, findings 460).

With the distributed optimizer and ``overlap_param_gather`` off, ``step_with_ready_grads`` all-gathers every bucket
of the updated weights synchronously after the optimizer step (NVIDIA/Megatron-LM@7094270c
``megatron/core/optimizer/distrib_optimizer.py`` lines 2088-2112): the whole gather is exposed once a step, each
bucket a call as ``overlap_grad_reduce`` cut them (``distributed_data_parallel.py`` lines 60-62), while the
gradients' reduce-scatter still hides behind the last backward. On, each bucket is waited for in a forward
pre-hook that dispatches the next (``param_and_grad_buffer.py`` lines 193-277): all but the first bucket hide
behind the first forward (:func:`topo.training.step.behind_window_s`)."""

import pytest
from conftest import run_cli

import topo
from topo.errors import TopoError
from topo.training.comm import CommEngine
from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.multisite import dp_gather_window_s
from topo.training.parallel import check_layout, dp_bucket_calls, make_layout
from topo.training.step import dp_floor_s, estimate_step, step_traffic

_LAY = dict(tp=4, dp=64, global_batch=512, dp_sharding="zero1")


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


@pytest.fixture(scope="module")
def steps(pod):
    m = load_model("llama3-8b")
    engine = CommEngine(pod)
    out = {}
    for key, extra in (("default", {}), ("on", {"overlap_param_gather": True}),
                       ("off", {"overlap_param_gather": False})):
        lay = make_layout(**_LAY, **extra)
        out[key] = (lay, estimate_step(pod, m, lay, engine=engine))
    return m, engine, out


def _dp(r, collective):
    (c,) = [c for c in r.comm if c.dim == "dp" and c.collective == collective]
    return c


def test_the_synchronous_gather_exposes_every_bucket_once_a_step(pod, steps):
    m, engine, out = steps
    lay, off = out["off"]
    ag = _dp(off, "all_gather")
    # the buckets are overlap_grad_reduce's, unchanged: ceil(params / bucket) calls
    assert ag.calls_per_step == _dp(out["default"][1], "all_gather").calls_per_step > 1
    groups = map_layout(lay, pod.spec.gpus_per_domain, pod.layout.num_gpus).groups("dpcp")
    one = engine.time("all_gather", groups, ag.size_bytes).time_s * ag.slowdown
    assert ag.time_s == pytest.approx(ag.calls_per_step * one, rel=1e-9)
    assert ag.exposed_s == pytest.approx(ag.time_s, rel=1e-12)  # every bucket, once a step


def test_the_overlapped_gather_hides_all_but_its_first_bucket_as_before(steps):
    _, _, out = steps
    ag = _dp(out["default"][1], "all_gather")
    assert ag.exposed_s < 0.5 * ag.time_s
    # explicit true is today's default: the same step
    assert out["on"][1].step_time_s == out["default"][1].step_time_s


def test_only_the_gather_moves_the_reduction_stays_hidden(steps):
    _, _, out = steps
    on, off = out["default"][1], out["off"][1]
    assert _dp(off, "reduce_scatter").exposed_s == pytest.approx(_dp(on, "reduce_scatter").exposed_s, rel=1e-9)
    assert off.step_time_s > on.step_time_s
    assert off.breakdown_s["compute"] == pytest.approx(on.breakdown_s["compute"], rel=1e-3)


def test_the_floor_counts_the_whole_gather_when_it_is_not_overlapped(steps):
    # dp_floor_s with no compute under it (covered 0): each item's least exposure (the reduction's last bucket; the
    # gather's first bucket when overlapped, every bucket when not) plus the longest overlapped item's other buckets
    # back to back; a synchronous gather is already counted whole, so it is not an overlapped item
    m, _, out = steps
    r, g = 1e-3, 2e-3  # one call of the reduce-scatter, of the all-gather (the gather the slower)
    for key in ("default", "off"):
        lay = out[key][0]
        traffic = step_traffic(m, lay)
        items = [it for it in traffic if it["dim"] == "dp"]
        assert [it["phase"] for it in items] == ["reduce", "gather"]
        k = items[1]["calls"]
        assert items[0]["calls"] == k > 1
        floor = dp_floor_s(traffic, lay, [r, g], 0.0)
        want = r + g + (k - 1) * g if key == "default" else r + k * g + (k - 1) * r
        assert floor == pytest.approx(want, rel=1e-12)


def test_no_cross_site_gather_window_when_the_gather_is_synchronous(steps):
    _, _, out = steps
    assert dp_gather_window_s(out["default"][1], out["default"][0]) > 0
    assert dp_gather_window_s(out["off"][1], out["off"][0]) == 0.0


def test_unset_follows_overlap_dp_and_true_runs_without_it():
    # None: both DP overlaps together (today's rows unchanged); true with overlap_dp off is allowed (Megatron-Core
    # and Megatron-Bridge run it: one bucket, the gather's first, so exposed whole)
    lay = make_layout(**_LAY, overlap_dp=False, overlap_param_gather=True)
    assert dp_bucket_calls(lay, 1e9) == 1
    assert make_layout(**_LAY, overlap_dp=False).overlap_param_gather is None


def test_true_without_a_distributed_optimizer_is_refused():
    lay = make_layout(**{**_LAY, "dp_sharding": "none"}, overlap_param_gather=True)
    with pytest.raises(TopoError) as e:
        check_layout(load_model("llama3-8b"), lay)
    assert e.value.key == "overlap_param_gather" and "use_distributed_optimizer" in e.value.message
    check_layout(load_model("llama3-8b"), make_layout(**{**_LAY, "dp_sharding": "none"}, overlap_param_gather=False))


_CLI = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "4", "--dp", "64", "--global-batch", "512"]


def test_cli_shows_the_field_and_prices_the_gather():
    base = run_cli(*_CLI, "--json", check=True).stdout
    out = run_cli(*_CLI, "--layout", "overlap_param_gather=false", check=True).stdout
    assert "overlap_param_gather false (layout fields)" in out
    import json
    off = json.loads(run_cli(*_CLI, "--layout", "overlap_param_gather=false", "--json", check=True).stdout)
    assert off["breakdown_s"]["dp"] > json.loads(base)["breakdown_s"]["dp"]


def test_cli_says_where_the_field_changes_nothing():
    out = run_cli(*_CLI, "--layout", 'overlap_param_gather=false,dp_sharding="fsdp"', check=True).stdout
    assert "overlap_param_gather false (no effect: dp_sharding fsdp gathers per unit, which overlap_dp sets)" in out


def test_cli_refuses_true_without_a_distributed_optimizer_on_one_line():
    r = run_cli(*_CLI, "--overlap", "tp=on", "--layout", 'overlap_param_gather=true,dp_sharding="none"')
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: --layout: overlap_param_gather: true overlaps the distributed optimizer's")
    assert "allowed with dp_sharding none: false, or unset" in line
