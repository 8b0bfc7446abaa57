"""plan131: a site's own checkpoint interval (``plan.reliability.checkpoint.interval_s``, walk46's Left 2).

A reliability lead often runs a fixed cadence, a policy rather than the optimum. Given, the goodput (and with it the
days, the restart's share and the effective FLOP) is priced at that work between checkpoints through the same renewal
model the optimum uses (:mod:`topo.plan.renewal`), and the optimum and its goodput are reported beside it. Closed
form (Bougeret et al., SC 2011, eq. 1 without downtime; Daly, FGCS 22(3), 2006): at work T between checkpoints,
stall C, recovery R per failure and rate l = 1 / MTBF, goodput = l T / (e^(l R) (e^(l (T + C)) - 1)).
"""

import json
import math
from dataclasses import replace

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.plan import plan
from topo.plan.reliability import joint_reliability
from topo.plan.renewal import optimum_work_s

# Llama 3 405B as Meta published it on 16,384 of meta-llama3-24k's GPUs (walk46's job)
_LAYOUT = ("tp=8,pp=16,dp=128,vpp=8,seq_len=8192,global_batch=2048,dp_sharding=fsdp_grad_op,"
           "pipeline_embedding=true")
_JOB = ("plan", "meta-llama3-24k", "--model", "llama3-405b", "--layout", _LAYOUT, "--tokens", "15.6T",
        "--no-collectives")
_KEY = "plan.reliability.checkpoint.interval_s"


def _renewal_goodput(T, C, R, M):
    lam = 1 / M
    return lam * T / (math.exp(lam * R) * math.expm1(lam * (T + C)))


def _with_interval(interval_s, **checkpoint):
    return plan(layers=[("t", {"reliability": {"checkpoint": {"interval_s": interval_s, **checkpoint}}})],
                collectives=False).reliability


def test_without_the_key_the_plan_checkpoints_at_the_renewal_optimum():
    r = plan(collectives=False).reliability
    assert r.checkpoint_interval_of == "optimum"
    assert r.checkpoint_interval_s == r.optimum_interval_s == optimum_work_s(r.checkpoint_stall_s, r.mtbf_s)
    assert r.goodput_at_optimum == pytest.approx(r.goodput, rel=1e-12)


def test_a_sites_interval_is_priced_by_the_renewal_formula_with_the_optimum_beside():
    base = plan(collectives=False).reliability
    r = _with_interval(1800.0)
    R = r.detection_s + r.restart_s + r.reload_s
    assert r.checkpoint_interval_of == "policy" and r.checkpoint_interval_s == 1800.0
    assert r.goodput == pytest.approx(_renewal_goodput(1800.0, r.checkpoint_stall_s, R, r.mtbf_s), rel=1e-12)
    # the optimum and its goodput are those of the plan without the key (the policy moves neither)
    assert r.optimum_interval_s == base.checkpoint_interval_s
    assert r.goodput_at_optimum == pytest.approx(base.goodput, rel=1e-12)
    assert r.goodput < r.goodput_at_optimum  # 1800 s is not the optimum (about 4.6 min on the 100k default)
    # every part of the lost time is at the policy's interval: the catch-up is the mean of an exponential gap cut at
    # the segment T + C, and the parts still add up to 1 - goodput
    seg = 1800.0 + r.checkpoint_stall_s
    assert r.catch_up_s == pytest.approx(r.mtbf_s - seg / math.expm1(seg / r.mtbf_s), rel=1e-12)
    assert sum(r.lost_fraction_by_part.values()) == pytest.approx(1 - r.goodput, rel=1e-12)
    assert r.effective_flop / base.effective_flop == pytest.approx(r.goodput / base.goodput, rel=1e-12)
    # the sensitivity keeps the policy: twice the interruption rate at 1800 s, not at the new optimum
    twice = next(x for x in r.sensitivity if x["input"] == "interruption rate")["goodput_double"]
    assert twice == pytest.approx(_renewal_goodput(1800.0, r.checkpoint_stall_s, R, r.mtbf_s / 2), rel=1e-12)


def test_a_sync_interval_shorter_than_the_write_is_priced_not_refused():
    r = _with_interval(10.0)  # a stall of some 30 s after every 10 s of work: the goodput shows it
    R = r.detection_s + r.restart_s + r.reload_s
    assert r.checkpoint_stall_s > 10.0
    assert r.goodput == pytest.approx(_renewal_goodput(10.0, r.checkpoint_stall_s, R, r.mtbf_s), rel=1e-12)


def test_an_async_interval_shorter_than_the_background_write_is_refused():
    with pytest.raises(TopoError, match=r"background write .* queue without end; allowed: at least") as err:
        _with_interval(10.0, mode="async")
    assert err.value.key == _KEY
    ok = _with_interval(3600.0, mode="async")
    assert ok.checkpoint_interval_s == 3600.0 >= ok.checkpoint_write_s


def test_the_cli_prices_the_days_at_the_interval_and_shows_both():
    default = json.loads(run_cli(*_JOB, "--json", check=True).stdout)
    doc = json.loads(run_cli(*_JOB, "--json", "--set", f"{_KEY}=1800", check=True).stdout)
    r, d = doc["reliability"], default["reliability"]
    R = r["detection_s"] + r["restart_s"] + r["reload_s"]
    assert r["checkpoint_interval_s"] == 1800 and r["checkpoint_interval_of"] == "policy"
    assert r["goodput"] == pytest.approx(_renewal_goodput(1800, r["checkpoint_stall_s"], R, r["mtbf_s"]), rel=1e-12)
    assert r["goodput"] == pytest.approx(0.857, abs=5e-4)  # by hand: 0.16165 / (1.05618 x 0.17861)
    assert r["optimum_interval_s"] == d["checkpoint_interval_s"]  # 797.0 s, the optimum without the key
    assert r["goodput_at_optimum"] == pytest.approx(d["goodput"], rel=1e-12)  # 87.9%
    t = doc["time_to_train"]
    assert t["goodput"] == r["goodput"]
    assert t["time_to_train_s"] == pytest.approx(t["time_at_step_s"] / r["goodput"], rel=1e-12)
    text = run_cli(*_JOB, "--set", f"{_KEY}=1800", check=True).stdout
    assert "every 1800 s (plan.reliability.checkpoint.interval_s; the renewal optimum: every 797.0 s)" in text
    assert (f"{100 * r['goodput']:.1f}% (the job's, at its GPUs' interruptions) at the checkpoint interval set "
            f"(1800 s, plan.reliability.checkpoint.interval_s); at the renewal optimum (797.0 s): "
            f"{100 * d['goodput']:.1f}%") in text


@pytest.mark.parametrize("value, words", [
    ("0", "must be > 0, got 0"), ("-60", "must be > 0, got -60"), ("nan", "must be a finite number"),
    ("inf", "must be a finite number"), ("30min", "must be a number in s"),
    ("1e9", "it would almost never reach a checkpoint"),
])
def test_a_bad_interval_is_one_line_naming_the_key(value, words):
    proc = run_cli(*_JOB, "--set", f"{_KEY}={value}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert _KEY in line and words in line


def test_the_library_refuses_a_non_positive_interval():
    from topo.plan.reliability import _check_interval
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(TopoError, match="positive finite number of seconds") as err:
            _check_interval(bad, 0.0, 30.0, 1e4)
        assert err.value.key == _KEY


def test_a_region_checkpoints_at_one_interval():
    a = _with_interval(1800.0)
    b = replace(a, checkpoint_interval_s=900.0)
    with pytest.raises(TopoError, match=r"different checkpoint intervals \(900 s, 1800 s\)"):
        joint_reliability([a, b], [100_352, 100_352], [1.0, 1.0], 0.0)
    joint = joint_reliability([a, a], [100_352, 100_352], [1.0, 1.0], 0.0)
    assert (joint.checkpoint_interval_of, joint.checkpoint_interval_s) == ("policy", 1800.0)
