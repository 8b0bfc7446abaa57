"""The clock footing of topo's attention tables (issue 29, docs/calibration-findings.md 'Long-context attention,
second pass'). topo derates every attention rate by its generation's sustained ratio, the GEMMs' MSMF / MAMF
(``kernels.toml`` ``[sustained]``), which is right only for a rate taken at the boost clock of a short benchmark, the
MAMF's footing. The tables' sources are such benchmarks:

- Hopper ``[attention]``: the FA3 authors' harness times 100 repeats a shape and sleeps one second before the cuDNN
  and FA3 timings "to avoid residual power throttling from the previous benchmark" (Dao-AILab/flash-attention@dfe1a59e
  ``hopper/benchmark_attn.py`` lines 164, 223-253); cuDNN's 9.1 / 9.4 harness locks application clocks at
  3201 / 1980 MHz under a 700 W limit (NVIDIA/cudnn-frontend@61100c8 ``benchmark/README.md``).
- ``[attention.window]``, ``[attention.blackwell]``, ``[attention.GB300]``: cuDNN's ``sdpa_benchmark_training``, the
  median of iterations 6-10 of 10 on one GPU, no clock or power setting, no warm-up (NVIDIA/cudnn-frontend@3929da2ef4c1
  ``benchmark_single_sdpa.py`` lines 1575-1594, ``config_types.py``, ``configs/llama.py``).

No soaked (power-saturated) attention rate is published, so the loader admits only ``clock = "burst"``: a table
measured at a saturated clock would be derated twice. These tests fail if a table loses its footing or the check
goes.
"""

import copy
import re
from dataclasses import replace

import pytest

import topo.training.kernels as kernels
from topo.training.gpus import gpu_compute
from topo.training.kernels import ATTENTION_CLOCK, _attention_table, _burst_footing, attention_rate_flops

STATUSES = {"published", "secondary", "derived", "assumption"}


def _tables() -> dict:
    attn = kernels._table()["attention"]
    named = {n: t for n, t in attn.items() if isinstance(t, dict) and "fwd_causal" in t}
    return {"attention": attn, "attention.window": attn["window"], **{f"attention.{n}": t for n, t in named.items()}}


def test_every_attention_table_declares_the_burst_clock_with_its_source():
    tables = _tables()
    assert set(tables) == {"attention", "attention.window", "attention.blackwell", "attention.GB300"}
    for where, t in tables.items():
        assert t["clock"] == ATTENTION_CLOCK == "burst", where
        assert t["clock_status"] in STATUSES, where
        assert t["clock_source"].strip(), where
    # the Hopper table's footing is the FA3 authors' own statement, not an inference from the iteration count
    assert "residual power throttling" in tables["attention"]["clock_source"]
    assert "dfe1a59e" in tables["attention"]["clock_source"]


def test_every_gpu_reads_a_burst_table_and_is_derated_by_its_sustained_ratio():
    for gpu in ("A100", "H100", "H200", "H800", "B200", "B300", "GB200", "GB300"):
        km = gpu_compute(gpu).kernels
        rate = attention_rate_flops(km, 128, 16384, True, False)
        # the derate is the GEMMs' sustained-over-burst ratio, exactly (Hopper: H200 MSMF / MAMF 698.6 / 823.9)
        over = replace(km, sustained=1.0)
        assert rate == pytest.approx(attention_rate_flops(over, 128, 16384, True, False) * km.sustained, rel=1e-12)
    assert gpu_compute("H100").kernels.sustained == pytest.approx(698.6 / 823.9, abs=5e-4)


@pytest.mark.parametrize("table, where", [("blackwell", "attention.blackwell"), ("GB300", "attention.GB300"),
                                          ("", "attention"), ("window", "attention.window")])
def test_a_table_on_another_clock_is_refused_with_its_key(table, where):
    attn = copy.deepcopy(kernels._table()["attention"])
    (attn[table] if table else attn)["clock"] = "sustained"
    reads = {"blackwell": "blackwell", "GB300": "GB300", "": "", "window": ""}[table]
    with pytest.raises(ValueError, match="^" + re.escape(f"kernels.toml: {where}.clock: 'sustained'; allowed: 'burst'")):
        _burst_footing(attn, reads)


def test_gb300_checks_its_base_table_too(monkeypatch):
    attn = copy.deepcopy(kernels._table()["attention"])
    del attn["blackwell"]["clock"]
    table = {**kernels._table(), "attention": attn}
    monkeypatch.setattr(kernels, "_table", lambda: table)
    with pytest.raises(ValueError, match=r"kernels\.toml: attention\.blackwell\.clock: None; allowed: 'burst'"):
        _attention_table("GB300", "blackwell")
    assert _attention_table("H100", "hopper") == ""  # Hopper's own table and window still read
