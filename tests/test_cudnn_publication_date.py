"""The cuDNN a run with no named container could have used: at most the newest release published by the run's own
publication date (topo/training/cudnn.py ``run_cudnn``; release dates topo/data/compute/cudnn_release_dates.toml,
each NVIDIA's ``redistrib_<version>.json`` ``release_date``), the container's where the software string names one,
and every published row's ``published_date`` (a date or an explicit ``unknown``, with its source)."""

import csv
import datetime
import sys
import tomllib
from pathlib import Path

import pytest

from topo.training.cudnn import dated_cudnn, parse_published_date, run_cudnn
from topo.training.gpus import gpu_compute
from topo.training.kernels import attention_rate_flops

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import training_accuracy  # noqa: E402
from run_recipe_columns import RunColumnError, check_published_dates  # noqa: E402

REF = ROOT / "data" / "reference"
FILES = ("training_runs.csv", "training_runs_published.csv", "training_runs_holdout.csv")
DATES = tomllib.loads((ROOT / "topo" / "data" / "compute" / "cudnn_release_dates.toml").read_text())["version"]


def _rows(name):
    with open(REF / name, newline="") as f:
        return list(csv.DictReader(f))


def test_a_release_is_the_newest_published_by_the_date():
    """NVIDIA's manifests (NixOS/nixpkgs copies, cudnn_release_dates.toml): redistrib_9.2.1.json release_date
    2024-07-03, redistrib_9.3.0.json 2024-08-01, redistrib_9.6.0.json 2024-12-02. A date reads the newest release
    on or before it; a date before 9.0.0 (2024-02-05) the oldest listed."""
    assert dated_cudnn(datetime.date(2024, 7, 31)) == "9.2.1"
    assert dated_cudnn(datetime.date(2024, 8, 1)) == "9.3.0"
    assert dated_cudnn(datetime.date(2024, 12, 31)) == "9.6.0"
    assert dated_cudnn(datetime.date(2021, 4, 30)) == "9.0.0"
    versions = sorted(DATES, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert [DATES[v]["date"] for v in versions] == sorted(DATES[v]["date"] for v in versions)  # later is newer
    for v, e in DATES.items():
        assert e["status"] == "published" and e["source"], v


def test_a_2024_row_reads_a_2024_cudnn_and_a_container_row_keeps_its_own():
    """The Llama 3 paper (arXiv 2407.21783, July 2024) names no container: at most 9.2.1, which reads cuDNN 9.1's
    Hopper set (NVIDIA/cudnn-frontend@b740542 benchmark/benchmark_results.csv, hdim 128 causal 8,192 forward 573
    TFLOP/s, not 9.19's 644). DeepSeek-V3's report (arXiv 2412.19437, December 2024): 9.6.0, 9.4's set (@61100c8,
    645.95). A named container wins over any date (NeMo 25.11: 9.13.1.26, Megatron-Bridge@2075a5b8
    docs/releases/software-versions.md); no container and no date: None (the newest table)."""
    assert run_cudnn("", "2024-07-31") == "9.2.1"
    assert run_cudnn("DeepSeek HAI-LLM", "2024-12-31") == "9.6.0"
    assert run_cudnn("NeMo 25.11", "2024-01-01") == "9.13.1.26"
    assert run_cudnn("NeMo 25.11") == "9.13.1.26"
    assert run_cudnn("NeMo AutoModel", "unknown") is None
    h = gpu_compute("H100").kernels
    s = h.sustained
    rate = attention_rate_flops(h, 128, 8192, True, False, cudnn=run_cudnn("", "2024-07-31"))
    assert rate == pytest.approx(573e12 * s, rel=2e-3)
    rate = attention_rate_flops(h, 128, 8192, True, False, cudnn=run_cudnn("DeepSeek HAI-LLM", "2024-12-31"))
    assert rate == pytest.approx(645.95e12 * s, rel=1e-3)


def test_the_benchmark_prices_each_row_at_its_dated_cudnn():
    """benchmarks/training_accuracy.py: the Llama 3 rows (training_runs.csv) and DeepSeek's H800 row read their
    date's cuDNN; a container row its container's, whatever its date."""
    paper = {s["run"]: s["lay"].cudnn_version for s in training_accuracy._paper_setups()}
    assert {paper[r] for r in ("llama3_405b_8k", "llama3_405b_16k", "llama3_405b_16k_cp16")} == {"9.2.1"}
    model = training_accuracy._row_model({"model": "llama3-70b", "run_id": "nemo2504_x"})
    for software, date, want in (("DeepSeek HAI-LLM", "2024-12-31", "9.6.0"), ("NeMo 25.11", "2024-01-01", "9.13.1.26"),
                                 ("Megatron-LM dev (commit not stated)", "unknown", None)):
        row = {"run_id": "x", "software": software, "precision": "bf16", "fsdp": "0", "model": "llama3-70b",
               "gpu": "H100", "note": "", "published_date": date}
        kw = dict(pp=1, vpp=1, dp=8)
        training_accuracy._framework_kw(row, model, kw)
        assert kw.get("cudnn_version") == want, software


def test_every_row_has_a_date_or_unknown_with_its_source():
    """Each runs file's rows carry ``published_date`` (a date or ``unknown``) and where it comes from."""
    for name in FILES:
        rows = _rows(name)
        check_published_dates(rows, name)
        for r in rows:
            assert r["published_date"] == "unknown" or parse_published_date(r["published_date"]), r["run_id"]
    dated = {r["run_id"]: r["published_date"] for r in _rows("training_runs_published.csv")}
    assert dated["deepseekv3_h800_2048"] == "2024-12-31"


@pytest.mark.parametrize("value, source, line", [
    ("", "x", "published_date = ''; allowed: a date YYYY-MM-DD (the run's publication) or 'unknown'"),
    ("July 2024", "x", "published_date = 'July 2024'; allowed: a date YYYY-MM-DD (the run's publication) or 'unknown'"),
    ("2024-02-30", "x", "published_date = '2024-02-30'; allowed: a date YYYY-MM-DD (the run's publication) or 'unknown'"),
    ("2024-07-31", "", "published_date_source = ''; allowed: where the date '2024-07-31' comes from (or why it is "
                       "unknown)"),
])
def test_a_bad_date_is_one_line_naming_the_run_and_key(value, source, line):
    row = {**_rows("training_runs.csv")[0], "published_date": value, "published_date_source": source}
    with pytest.raises(RunColumnError) as e:
        check_published_dates([row], "training_runs.csv")
    assert str(e.value) == f"training_runs.csv: run llama3_405b_8k: {line}"
