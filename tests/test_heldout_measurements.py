"""The held-out measurements (data/measurements/heldout_nccl_tests.csv, issue 33): each row sourced and modelled,
and no fit of benchmarks/accuracy.py ever reads them."""

from __future__ import annotations

import csv
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import accuracy  # noqa: E402

HELD = ROOT / "data" / "measurements" / "heldout_nccl_tests.csv"
ROWS = list(csv.DictReader(HELD.open(newline="")))


def test_every_held_out_row_is_sourced_modelled_and_flagged():
    assert ROWS
    fitted_ids = ({r["setup_id"] for r in csv.DictReader(accuracy.EXTRA.open(newline=""))}
                  | {r["setup_id"] for r in csv.DictReader(accuracy.DATA.open(newline=""))})
    for r in ROWS:
        assert r["source_url"].startswith("https://"), r["setup_id"]
        d = accuracy.HELDOUT_SETUPS[r["setup_id"]]
        assert d.held_out and d.gpus == int(r["total_gpus"]) == int(r["gpus_per_node"]) * int(r["nodes"])
        assert r["setup_id"] not in fitted_ids  # a held-out run is not also in a fitted file
    assert not any(d.held_out for d in {**accuracy.SETUPS, **accuracy.EXTRA_SETUPS}.values())


@pytest.fixture(scope="module")
def held():
    return accuracy.load_groups(HELD, accuracy.HELDOUT_SETUPS)


def test_no_fit_reads_the_held_out_set(held, monkeypatch):
    # the fit's own entry refuses them ...
    with pytest.raises(ValueError, match="never fitted"):
        accuracy.fit_groups(held)
    # ... and every path to a fit (leave-one-setup-out, leave-one-family-out, --fit) goes through fitting_set,
    # which leaves them out: record what fit_cases is given
    seen = []

    def record(cases, params, **kw):
        seen.extend(c.label for c in cases)
        raise StopIteration

    monkeypatch.setattr(accuracy, "fit_cases", record)
    ref = accuracy.load_groups(accuracy.DATA, accuracy.SETUPS)[:2]
    with pytest.raises(StopIteration):
        accuracy.fit_groups(accuracy.fitting_set(ref + held))
    assert seen and not any(label.startswith(tuple(accuracy.HELDOUT_SETUPS)) for label in seen)
    accuracy._FOLDS.update(groups=ref + held, max_nfev=1)
    seen.clear()
    with pytest.raises(StopIteration):
        accuracy._family_fold("roce")  # held-out InfiniBand runs would be in the training families here
    assert seen and not any(label.startswith(tuple(accuracy.HELDOUT_SETUPS)) for label in seen)


def test_held_out_runs_are_scored(held):
    # NVIDIA/nccl-tests #150: 2 x 1 A100 over HDR, 19.2-20.7 us at 8-64 B. The model: ring/LL with one rank per
    # node, priced by NCCL with the Tree's network step (tuning.cc): 6.6 + 2 steps x 5.0 us = 16.6 us (13-20% fast),
    # + the A100's kernel launch 2.555 us (gpu/ampere.toml, te42kyfo/gpu-benches @1c36d509ee71) = 19.155 us
    (g,) = held
    s = accuracy.score(g, g.case.profile)
    assert g.case.measured_s == pytest.approx([19.90e-6, 20.67e-6, 19.16e-6, 19.36e-6])
    model = [(1 + e) * m for e, m in zip(s.errors, g.case.measured_s)]
    assert model == pytest.approx([19.155e-6] * 4, rel=2e-3) and s.algorithms == ["ring"] * 4
    assert max(abs(e) for e in s.errors) < 0.08
