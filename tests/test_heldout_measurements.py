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
    (g,) = [g for g in held if g.setup == "ncclt150_a100_2x1_hdr"]
    s = accuracy.score(g, g.case.profile)
    assert g.case.measured_s == pytest.approx([19.90e-6, 20.67e-6, 19.16e-6, 19.36e-6])
    model = [(1 + e) * m for e, m in zip(s.errors, g.case.measured_s)]
    assert model == pytest.approx([19.155e-6] * 4, rel=2e-3) and s.algorithms == ["ring"] * 4
    assert max(abs(e) for e in s.errors) < 0.08


@pytest.mark.parametrize("sid, size, busbw_GBps, factor, model_us, lo, hi", [
    # Azure ND H200 v5 (Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md @7f20e5fa): 8 H200, NVLS,
    # in-place busbw 0.47 GB/s at 8K: time = 8192 x 2 x 7/8 / busbw = 30.50 us. The model: NCCL's NVLS latency on
    # Hopper, hwLat Simple 25 us (tuning.cc, compute capability 9.0 row) + the kernel launch 2.433 us (gpu/hopper.toml)
    ("azure_ndh200v5_1n", 8192, 0.47, 2 * 7 / 8, 27.433, -0.12, -0.08),
    # Azure ND GB200 v6 (ND_GB200_v6_results.md @2a370be6): the 4 GPUs of one NVL72 tray, Ring, 0.76 GB/s at 8K:
    # 8192 x 2 x 3/4 / busbw = 16.17 us. The model: ring LL, 6.6 + 2 x 3 steps x (0.6 us, NCCL's NVLink constant,
    # + 0.704 us, Blackwell's step, gpu/blackwell.toml nvlink_hop_extra_us, fitted on other setups) + Hopper's
    # launch (Blackwell takes it) = 16.857 us: 4-5% slow (with NCCL's step alone 12.633 us, 22% fast)
    ("azure_ndgb200v6_1n", 8192, 0.76, 2 * 3 / 4, 16.857, 0.03, 0.07),
])
def test_azure_single_node_runs_are_held_out_and_scored(held, sid, size, busbw_GBps, factor, model_us, lo, hi):
    (g,) = [g for g in held if g.setup == sid]
    i = g.case.sizes.index(size)
    assert g.case.measured_s[i] == pytest.approx(size * factor / (busbw_GBps * 1e9), rel=1e-9)
    s = accuracy.score(g, g.case.profile)
    assert (1 + s.errors[i]) * g.case.measured_s[i] == pytest.approx(model_us * 1e-6, rel=1e-2)
    assert lo < s.errors[i] < hi and len(g.case.sizes) == 24


def test_nvlstree_chunk_cap_runs_are_held_out_and_scored(held):
    # NVIDIA/nccl PR #1112: 8 x p5.48xlarge (64 ranks: busbw / algbw = 104.20 / 52.93 = 2 x 63/64), NVLSTree, 4 GiB:
    # 81,146 us at NCCL 2.19.3, whose src/enqueue.cc (8c6c5951) caps the NVLSTree chunk at 64 KiB from 4 nodes on,
    # and 30,196 us at 2.19.1 (f9c3dc25: the chunk is the Simple step, 4 MiB / 8 = 512 KiB). time = size / algbw.
    by = {g.setup: g for g in held if g.setup.startswith("nccl1112_p5_8n_nvlstree_")}
    assert sorted(by) == ["nccl1112_p5_8n_nvlstree_2191", "nccl1112_p5_8n_nvlstree_2193"]
    for sid, algbw_GBps in (("nccl1112_p5_8n_nvlstree_2193", 52.93), ("nccl1112_p5_8n_nvlstree_2191", 142.24)):
        g = by[sid]
        assert g.case.sizes == [4 * 2**30] and g.d.gpus == 64 and g.d.algorithm == "nvls_tree"
        assert g.case.measured_s[0] == pytest.approx(4 * 2**30 / (algbw_GBps * 1e9), rel=1e-3)
    s_new, s_old = (accuracy.score(by[k], by[k].case.profile) for k in sorted(by, reverse=True))
    model = [(1 + s.errors[0]) * g.case.measured_s[0] for s, g in
             ((s_new, by["nccl1112_p5_8n_nvlstree_2193"]), (s_old, by["nccl1112_p5_8n_nvlstree_2191"]))]
    assert s_new.algorithms == s_old.algorithms == ["nvls_tree"]
    # the model does not tell the two chunks apart (the chunk bounds only the fill and the in-flight window, which
    # does not bind here): one time, NIC-bound past 2 nodes (an interior node's 32 NICs carry 2 x S, NCCL's
    # bwInter / 2 in src/graph/tuning.cc), within 15% of the uncapped run and 2.7x fast on the capped one
    assert model[0] == pytest.approx(model[1], rel=1e-9)
    assert abs(s_old.errors[0]) < 0.15 and s_new.errors[0] < -0.5
