"""A steady collective's slowdown is weighted by the busy time of the collectives it meets on an over-asked link
only (findings section 391): DP on the NICs does not lengthen the time TP and EP on NVLink slow each other."""

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.engine.options import EstimateOptions as O
from topo.engine.traffic import Member, over_asked_sharers, run_mix
from topo.training.step import duty_weighted_slowdowns


def test_sharers_are_the_members_on_an_over_asked_resource():
    # resource 0: a 0.6 + b 0.6 = 1.2 > 1 (over-asked); resource 1: b 0.3 + c 0.3 = 0.6 (not); resource 2: c 1.0
    # alone (full, but alone): a and b meet, c meets no one although it uses b's resource 1
    U = np.array([[0.6, 0.0, 0.0], [0.6, 0.3, 0.0], [0.0, 0.3, 1.0]])
    assert over_asked_sharers(U, ["a", "b", "c"]) == {"a": ("b",), "b": ("a",), "c": ()}


def test_duty_weight_counts_only_the_sharers_busy_time():
    # The Ultra GB200 HSDP mix (section 391): over a 2.02 s window TP (raw x2.667) meets DP's gathers (0.612 s)
    # and EP (0.317 s) on NVLink; the experts' all-reduce (1.066 s) runs on the NICs, sharing no over-asked link.
    # f = (0.612 + 0.317) / 2.02 = 0.4599, slowdown 1 + 1.667 x 0.4599 = 1.767 (all the others: f = 1.995 / 2.02,
    # x2.646: the coupling ultra85 saw, section 386's Left 1).
    slow, busy = {"tp": 2.667, "dp_experts": 1.0}, {"tp": 0.148, "dp": 0.612, "dp_experts": 1.066, "ep": 0.317}
    sharers = {"tp": ("dp", "ep"), "dp_experts": ()}
    w = duty_weighted_slowdowns(slow, busy, 2.02, sharers)
    assert w["tp"] == pytest.approx(1 + 1.667 * (0.612 + 0.317) / 2.02)
    assert w["dp_experts"] == 1.0
    assert duty_weighted_slowdowns(slow, busy, 2.02)["tp"] == pytest.approx(1 + 1.667 * 1.995 / 2.02)  # all others


@pytest.fixture(scope="module")
def pod():
    return build_fabric(load_spec("dgx-h100-superpod"))


def test_a_mix_names_nvlink_sharers_apart_from_a_network_member(pod):
    # Two rings inside server 0's NVLink (GPUs 0-7, 1 GiB each) over-ask its NVLink links together; a ring over
    # GPU 0 of servers 8-15 (64-71, ...) runs on other servers' NICs: no over-asked link in common with them.
    a = Member("tp", "all_reduce", "1GiB", O(ranks=list(range(8)), algorithm="ring"))
    b = Member("ep", "all_reduce", "1GiB", O(ranks=list(range(8)), algorithm="ring"))
    c = Member("dp", "all_reduce", "1GiB", O(ranks=[8 * k for k in range(8, 16)], algorithm="ring"))
    r = run_mix(pod, [a, b, c], profile="ideal", max_contested=0)
    assert r.sharers == {"tp": ("ep",), "ep": ("tp",), "dp": ()}
    assert r.members[2].slowdown == pytest.approx(1.0)


def test_the_ultra_hsdp_steps_tp_slowdown_leaves_out_the_experts_all_reduce(monkeypatch):
    # Nemotron 3 Ultra's GB200 row as hybrid ZeRO-3 (the recipe's inner groups: dp_shard 32, expert_dp_shard 1): the
    # experts' replicas all-reduce over the NICs (4 racks) every micro-batch; TP and EP meet DP's gathers on NVLink.
    # The step's TP slowdown is the mix's weighted by DP's and EP's busy share only.
    from published_setups import published_setups
    from topo.training import step

    seen = {}
    real = step.duty_weighted_slowdowns

    def spy(slow, busy, window, sharers=None):
        seen.update(slow=slow, busy=busy, window=window, sharers=sharers)
        return real(slow, busy, window, sharers)

    monkeypatch.setattr(step, "duty_weighted_slowdowns", spy)
    s = {x["run"]: x for x in published_setups() if "row" in x}["mb2608_gb200_nemotron3_ultra"]
    # no_shard: the replicas' all-reduce every micro-batch (the row itself runs its recipe's optim since ultracol91)
    lay = s["lay"].model_copy(update={"dp_shard": 32, "expert_dp_shard": 1, "dp_outer_sharding": "no_shard"})
    res = step.estimate_step(build_fabric(load_spec(s["spec"][0])), s["model"], lay)
    assert set(seen["sharers"]["tp"]) == {"dp", "ep"} and seen["sharers"]["dp_experts"] == ()
    b = seen["busy"]
    assert b["dp_experts"] > 0  # it is busy in the window, but not on TP's links
    f = min(1.0, (b["dp"] + b["ep"]) / seen["window"])
    assert res.contention["tp"] == pytest.approx(1 + (seen["slow"]["tp"] - 1) * f, rel=1e-9)
    assert res.contention["tp"] < 1 + (seen["slow"]["tp"] - 1) * min(1.0, (b["dp"] + b["ep"] + b["dp_experts"])
                                                                      / seen["window"])
