"""XLA's latency-hiding scheduler as the DP overlap policy of JAX runs (``ParallelLayout.dp_overlap_policy =
"xla_lhs"``): one collective in flight on one stream, every collective estimated at the same latency whatever its
bytes, so a pass's collectives share its compute by count and a large combined all-reduce exposes what it lasts
beyond its share.

Sources: openxla/openxla@1c79c8bf ``xla/service/gpu/gpu_hlo_schedule.cc`` lines 279-289 (``all_reduce_overlap_limit
= 1``), 435-463 (``GetNumAvailableResources``: 1 collective in flight, "s0,e0,s1,e1"), 551-590
(``GpuLatencyEstimator``: 5000 a collective, 1000 a custom call, "approximately 5 of these in between each
start/end pair"); ``xla/service/latency_hiding_scheduler.cc`` lines 795-881 (``kScheduleDone``, ``kLessStall``,
``kFreeBackedupResource``). AI-Hypercomputer/maxtext@efb6d9e4 ``MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh``
(``--xla_gpu_enable_latency_hiding_scheduler=true``, the all-reduce combine thresholds)."""

import json
import sys

import pytest

import topo
from conftest import ROOT, run_cli
from published_setups import published_setups
from topo.errors import TopoError
from topo.training import dp_overlap
from topo.training.comm import CommEngine
from topo.training.dp_overlap import xla_collectives_in_flight, xla_lhs_exposed_s
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import _xla_dp_exposed, estimate_step, step_traffic, xla_stream_calls

A3_CLI = ["train", "dgx-h100-superpod", "--set", "server.nics=4", "--set", "server.nic_rate=200 Gb/s", "--set",
          "fabric.tiers[leaf].port_rate=200 Gb/s", "--set", "fabric.tiers[spine].port_rate=200 Gb/s", "--set",
          "fabric.technology=gcp_tcpx", "--model", "llama2-7b", "--seq", "4096", "--micro-batch", "4",
          "--remat-policy", "minimal_flash"]


def _a3(vms: int, threshold: int, policy: str = "xla_lhs"):
    """MaxText's A3 Llama 2 7B layout at ``vms`` VMs (dcn_data vms x ici_fsdp 8, 4 sequences a GPU)."""
    return make_layout(dp=8 * vms, dp_shard=8, dp_sharding="zero3", global_batch=32 * vms, micro_batch=4,
                       weight_bytes=4.0, grad_bytes=4.0, optimizer_bytes_per_param=8.0, gather_bytes=2.0,
                       dp_all_reduce_combine_bytes=threshold, dp_overlap_policy=policy)


def test_one_collective_in_flight_as_xla_sets_it():
    assert xla_collectives_in_flight() == 1  # GetNumAvailableResources; the 2025 flag's default


@pytest.mark.parametrize("call_s, calls, unhidden, pass_s, pass_calls, in_flight, want", [
    (0.010, 4, 1, 0.090, 9, 1, 0.010),  # each share 10 ms: the three hidden fit, the last is exposed whole
    (0.030, 4, 1, 0.090, 9, 1, 3 * 0.020 + 0.030),  # each outlasts its 10 ms share by 20 ms
    (0.030, 4, 1, 0.090, 9, 2, 3 * 0.010 + 0.030),  # two in flight: 20 ms shares
    (0.030, 4, 0, 0.090, 9, 1, 4 * 0.020),  # none unhidden (the backward's gathers)
    (0.005, 1, 1, 0.0, 1, 1, 0.005),
])
def test_each_collective_exposes_what_it_lasts_beyond_its_share_of_the_pass(call_s, calls, unhidden, pass_s,
                                                                             pass_calls, in_flight, want):
    assert xla_lhs_exposed_s(call_s, calls, unhidden, pass_s, pass_calls, in_flight) == pytest.approx(want)


def test_the_pass_shares_its_compute_among_all_its_dp_collectives():
    """8 VMs, 1 GiB: a micro-batch's forward runs 34 unit gathers; its backward 34 gathers (resharded after the
    forward), 34 reduce-scatters and 4 combined all-reduces: 72 on the one stream."""
    m = load_model("llama2-7b")
    lay = _a3(8, 2**30)
    traffic = step_traffic(m, lay)
    assert xla_stream_calls(traffic, lay) == (m.layers + 2, 3 * (m.layers + 2) - (m.layers + 2) + 4)
    (ar,) = [it for it in traffic if it["dim"] == "dp" and it["collective"] == "all_reduce"]
    (ag,) = [it for it in traffic if it["dim"] == "dp" and it["collective"] == "all_gather"]
    # 0.72 s of backward over 72 collectives: 10 ms each; a 136 ms all-reduce exposes 126 ms, the last all 136
    assert _xla_dp_exposed(ar, 0.136, 0.36, 0.72, (34, 72), lay) == pytest.approx(3 * 0.126 + 0.136)
    # 1 ms gathers: the forward's first is exposed, the rest (forward and backward) fit their shares
    assert _xla_dp_exposed(ag, 0.001, 0.36, 0.72, (34, 72), lay) == pytest.approx(0.001)


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_large_combined_all_reduces_are_exposed_beyond_their_share(pod):
    """16 VMs at 1 GiB: each of the 4 all-reduces (a quarter of the gradients) runs beside 1/C of the backward, not
    beside all of it, so the scheduler exposes more than the hooks' rule; without the threshold (one a unit) each
    fits its share and the policy changes little."""
    m = load_model("llama2-7b")
    engine = CommEngine(pod)
    r = {p: estimate_step(pod, m, _a3(16, 2**30, p), engine=engine) for p in ("hooks", "xla_lhs")}
    (hooks,), (lhs,) = ([c for c in x.comm if c.collective == "all_reduce"] for x in r.values())
    one = lhs.time_s / lhs.calls_per_step
    assert lhs.calls_per_step == 4 and lhs.exposed_s > hooks.exposed_s
    # the backward (no more than the compute) over its 72 collectives bounds each share
    assert lhs.exposed_s >= one + 3 * (one - r["xla_lhs"].breakdown_s["compute"] / 72) - 1e-9
    assert r["xla_lhs"].step_time_s > r["hooks"].step_time_s
    for coll in ("reduce_scatter", "all_gather"):  # the NVLink collectives fit their shares either way
        a, b = ([c.exposed_s for c in x.comm if c.collective == coll] for x in r.values())
        assert a == pytest.approx(b, rel=1e-6)


def test_maxtext_rows_take_the_scheduler_as_their_recipes_set_it():
    sys.path.insert(0, str(ROOT / "benchmarks"))

    setups = {s["run"]: s["lay"] for s in published_setups()}
    maxtext = {k: v for k, v in setups.items() if k.startswith("maxtext_")}
    assert len(maxtext) == 8 and {v.dp_overlap_policy for v in maxtext.values()} == {"xla_lhs"}
    assert {v.dp_overlap_policy for k, v in setups.items() if not k.startswith("maxtext_")} == {"hooks"}


def test_cli_names_the_policy_and_refuses_a_bad_one():
    mesh = ["--jax-mesh", "dcn_data=2,ici_fsdp=8", "--global-batch", "64"]
    out = run_cli(*A3_CLI, *mesh, "--layout", "dp_overlap_policy=xla_lhs", check=True).stdout
    assert "framework options: dp_overlap_policy xla_lhs (layout fields)" in out
    bad = run_cli(*A3_CLI, *mesh, "--layout", "dp_overlap_policy=lhs")
    assert bad.returncode == 2 and "dp_overlap_policy" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_bad_in_flight_count_is_one_line_naming_the_file(tmp_path, monkeypatch):
    (tmp_path / "xla_scheduler.toml").write_text("collectives_in_flight = 0\n", encoding="utf-8")
    monkeypatch.setattr(dp_overlap, "data_dir", lambda kind: tmp_path)
    xla_collectives_in_flight.cache_clear()
    try:
        with pytest.raises(TopoError) as err:
            xla_collectives_in_flight()
    finally:
        xla_collectives_in_flight.cache_clear()
    assert str(err.value) == ("xla_scheduler.toml: collectives_in_flight: 0; allowed: a whole number >= 1 "
                              "(XLA's GetNumAvailableResources)")


def test_a_jax_mesh_defaults_to_the_latency_hiding_scheduler_and_says_so():
    """rev54: a JAX program has no backward hooks, so the hooks' rule (Megatron-Core / FSDP) is no JAX run's; every
    published MaxText GPU recipe turns XLA's latency-hiding scheduler on (maxtext@efb6d9e4
    MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh line 28; gpu-recipes@2e1fd5ef training/a4/*/values.yaml;
    JAX-Toolbox@67b79492 docs/frameworks/maxtext/README.md), so --jax-mesh prices xla_lhs unless the layout says
    otherwise, and the options line names it."""
    mesh = ["--jax-mesh", "dcn_data=2,ici_fsdp=8", "--global-batch", "64"]
    out = run_cli(*A3_CLI, *mesh, check=True).stdout
    assert "framework options: dp_overlap_policy xla_lhs (layout fields)" in out
    step = json.loads(run_cli(*A3_CLI, *mesh, "--json", check=True).stdout)["step_time_s"]
    lhs = json.loads(run_cli(*A3_CLI, *mesh, "--layout", "dp_overlap_policy=xla_lhs", "--json",
                             check=True).stdout)["step_time_s"]
    hooks = run_cli(*A3_CLI, *mesh, "--layout", "dp_overlap_policy=hooks", check=True).stdout
    assert step == lhs and "dp_overlap_policy" not in hooks
