"""goodput69: a named job's goodput from its own GPUs' interruptions, a NIC failure as a stop counted in the goodput,
and one knob for the interruption rate (``plan.reliability.rate_scale``).

Closed forms (Meta, "The Llama 3 Herd of Models", arXiv 2407.21783, sec. 3.3.4 and Table 5: 419 unexpected
interruptions in a 54-day snapshot of pre-training on 16,384 H100, 7 of them NIC failures):

- interruptions a day at N GPUs = 419 / 54 x N / 16,384: 7.76 for Meta's own 16,384-GPU job, 11.64 for all 24,576
  GPUs of the cluster it ran on (the bundled meta-llama3-24k);
- Young's interval sqrt(2 C M) (Young, CACM 17(9), 1974) and Daly's higher-order one
  sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + C / 18M) - C (Daly, FGCS 22(3), 2006), C the checkpoint stall, M the MTBF;
- the renewal goodput at work T between checkpoints, recovery R per failure, rate l = 1 / M:
  l T / (e^(l R) (e^(l (T + C)) - 1)) (failures strike during work, checkpoints and recovery alike).
"""

import json
import math

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.plan.reliability import reliability
from topo.sweep import sweep

# Llama 3 405B as Meta published it (the README's job: 16,384 of meta-llama3-24k's 24,576 GPUs)
_LAYOUT = ("tp=8,pp=16,dp=128,vpp=8,seq_len=8192,global_batch=2048,dp_sharding=fsdp_grad_op,"
           "pipeline_embedding=true")
_JOB = ("plan", "meta-llama3-24k", "--model", "llama3-405b", "--layout", _LAYOUT)
META_PER_DAY = 419 / 54  # Llama 3 sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs
META_NIC_PER_DAY = 7 / 54  # Llama 3 Table 5: 7 of them NIC failures


@pytest.fixture(scope="module")
def job_json():
    return json.loads(run_cli(*_JOB, "--json", check=True).stdout)


def _renewal_goodput(T, C, R, M):
    lam = 1 / M
    return lam * T / (math.exp(lam * R) * math.expm1(lam * (T + C)))


def test_a_jobs_goodput_counts_the_interruptions_of_its_own_gpus(job_json):
    """Meta's 7.76 a day on its 16,384 GPUs, not the 11.64 of the cluster's 24,576; the interval is Daly's and the
    goodput the renewal closed form at that rate."""
    r = job_json["reliability"]
    assert (r["interruptions_of"], r["interrupting_gpus"]) == ("job", 16_384)
    assert r["interruptions_per_day"] == pytest.approx(META_PER_DAY, rel=1e-12)  # 7.759
    assert r["cluster_interruptions_per_day"] == pytest.approx(META_PER_DAY * 24_576 / 16_384, rel=1e-12)  # 11.64
    M, C = r["mtbf_s"], r["checkpoint_stall_s"]
    assert M == pytest.approx(86_400 / META_PER_DAY, rel=1e-12)  # 11,135 s, one per 3.1 h
    young = math.sqrt(2 * C * M)
    assert r["young_interval_s"] == pytest.approx(young, rel=1e-12)
    daly = young * (1 + math.sqrt(C / (2 * M)) / 3 + C / (18 * M)) - C
    assert r["checkpoint_interval_s"] == pytest.approx(daly, rel=1e-5)  # 797.0 s
    R = r["detection_s"] + r["restart_s"] + r["reload_s"]
    assert r["goodput"] == pytest.approx(_renewal_goodput(r["checkpoint_interval_s"], C, R, M), rel=1e-12)
    assert r["goodput"] == pytest.approx(0.879, abs=5e-4)  # walk27's 87.9% at 16,384 GPUs, by hand
    # the job's goodput is the one its time to train and its cost per effective GPU-hour carry
    assert job_json["goodput"] == r["goodput"]


def test_without_a_job_the_goodput_is_the_clusters():
    r = json.loads(run_cli("plan", "meta-llama3-24k", "--no-collectives", "--json", check=True).stdout)["reliability"]
    assert (r["interruptions_of"], r["interrupting_gpus"]) == ("cluster", 24_576)
    assert r["interruptions_per_day"] == pytest.approx(META_PER_DAY * 24_576 / 16_384, rel=1e-12)
    assert r["cluster_interruptions_per_day"] == r["interruptions_per_day"]


def test_the_text_says_whose_parts_interrupt_and_a_nic_failure_stops_the_job():
    out = run_cli(*_JOB, check=True).stdout
    assert ("7.76 interruptions/day (one per 3.1 h) from the job's 16,384 GPUs' parts (their servers, NICs, and the "
            "switches and cables the failure table counts per GPU; the whole cluster's: 11.6/day)") in out
    assert "goodput   87.9% (the job's, at its GPUs' interruptions)" in out
    assert ("nic0.0 stops the job (the failure table's 'nic' interruptions, 0.13/day here, counted in the goodput), "
            "then 1.00x after the restart on the parts left") in out
    assert "nic0.0 1.00x" not in out


def test_a_nic_failure_is_an_interruption_at_the_tables_nic_rate(job_json):
    rows = {x["part"]: x for x in job_json["failure_impact"]}
    assert rows["nic"]["interrupts_as"] == "nic"
    assert rows["nic"]["interruptions_per_day"] == pytest.approx(META_NIC_PER_DAY, rel=1e-12)  # 0.1296 a day
    assert rows["nic"]["interruptions_per_day"] == job_json["reliability"]["interruptions_per_day_by_cause"]["nic"]
    assert rows["spine"]["interrupts_as"] is None and rows["spine"]["interruptions_per_day"] is None


def test_optics_as_parts_count_the_modules_on_the_jobs_gpu_links():
    """Modules on GPU links fail at their MTTF: a job of 2/3 of the GPUs has 2/3 of them (2 modules a GPU link at
    5 years: 16,384 x 2 / (5 x 365) a day)."""
    kw = dict(causes={"gpu": 0.0, "network": 1.0}, observed_gpus=16_384, observed_days=54, modules=[(49_152, 5.0)],
              nic_modules=[(24_576, 5.0)], job_modules=[(49_152, 5.0)], optics="parts", params=8e9,
              bytes_per_param=14, write_Bps=1e11, restart_s=480, repair_s=14_400, hot_spare_fraction=0.01, flop=1e24)
    r = reliability(24_576, 8, job_gpus=16_384, **kw)
    assert r.interruptions_per_day == pytest.approx(16_384 * 2 / (5 * 365), rel=1e-12)
    assert r.cluster_interruptions_per_day == pytest.approx(24_576 * 2 / (5 * 365), rel=1e-12)
    assert r.job_optical_modules == 32_768


def test_one_knob_scales_every_cause_of_the_interruption_rate():
    base = json.loads(run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--json", check=True).stdout)
    twice = json.loads(run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--json", "--set",
                               "plan.reliability.rate_scale=2", check=True).stdout)
    b, t = base["reliability"], twice["reliability"]
    assert t["rate_scale"] == 2 and b["rate_scale"] == 1
    assert t["interruptions_per_day"] == pytest.approx(2 * b["interruptions_per_day"], rel=1e-12)
    for k, v in b["interruptions_per_day_by_cause"].items():
        assert t["interruptions_per_day_by_cause"][k] == pytest.approx(2 * v, rel=1e-12), k
    M, C = t["mtbf_s"], t["checkpoint_stall_s"]
    R = t["detection_s"] + t["restart_s"] + t["reload_s"]
    assert t["goodput"] == pytest.approx(_renewal_goodput(t["checkpoint_interval_s"], C, R, M), rel=1e-12)
    assert t["goodput"] < b["goodput"]
    # the sensitivity's "interruption rate doubled" is the knob at 2
    rate = next(x for x in b["sensitivity"] if x["input"] == "interruption rate")
    assert rate["goodput_double"] == pytest.approx(t["goodput"], rel=1e-9)


def test_a_sweep_varies_the_interruption_rate_with_the_one_knob():
    df = sweep({"spec": "dgx-h100-superpod", "compute": ["plan"],
                "axes": {"plan.reliability.rate_scale": [0.5, 1, 2]}}, scheduler="serial")
    assert df["error"].isna().all()
    g = df["goodput"].tolist()
    assert g[0] > g[1] > g[2]


@pytest.mark.parametrize("value", ["0", "-2"])
def test_a_zero_or_negative_scale_is_one_line(value):
    r = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", f"plan.reliability.rate_scale={value}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "plan.reliability.rate_scale" in lines[0] and f"must be > 0, got {value}" in lines[0]


def test_the_library_refuses_a_scale_that_is_not_positive():
    kw = dict(causes={"gpu": 1.0}, observed_gpus=16_384, observed_days=54, modules=[], nic_modules=[], params=8e9,
              bytes_per_param=14, write_Bps=1e11, restart_s=480, repair_s=14_400, hot_spare_fraction=0.01, flop=1e24)
    with pytest.raises(TopoError, match="allowed: a positive finite number") as e:
        reliability(1024, 8, rate_scale=0.0, **kw)
    assert e.value.key == "plan.reliability.rate_scale"
