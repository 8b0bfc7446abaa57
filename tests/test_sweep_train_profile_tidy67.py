"""A sweep's training points take its ``profile`` axis as its estimate points do (tidy67; prof66's Left): a train
point's step is ``estimate_step(..., profile=)``'s, prof66's ``engine_for`` building the engine that prices with
it, and a study that computes train only may sweep the profile."""

import json

import pytest

import topo
from conftest import ROOT, run_cli
from topo.sweep.point import clear_cache, run_point
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

SPEC = "dgx-h100-superpod"
SETS = {"cluster.num_units": 1}
# one DP group of 16 ranks, one all-reduce of the fp32 gradients, not overlapped (prof66's job): the profile's
# network efficiency shows in the step
JOB = {"model": "llama3-8b", "layout": "tp=1,dp=16", "global_batch": 32, "dp_sharding": "none",
       "overlap_dp": False}


def _profile(tmp_path, efficiency: float) -> str:
    """A profile file as ``topo calibrate`` writes it (prof66's test's): a base and the network efficiency."""
    path = tmp_path / "half-net.toml"
    path.write_text('[profile]\nkind = "user"\nname = "half-net"\nbase = "nccl"\n'
                    f'[network_efficiency]\nvalue = {efficiency}\nsource = "a test"\nfitted = true\n'
                    'fitted_on = "a test log"\n')
    return str(path)


def _step_s(profile) -> float:
    fabric = topo.build_fabric(topo.load_spec(SPEC, [f"{k}={v}" for k, v in SETS.items()]))
    lay = make_layout("layout", tp=1, dp=16, global_batch=32, dp_sharding="none", overlap_dp=False)
    return estimate_step(fabric, load_model("llama3-8b"), lay, profile=profile).step_time_s


def test_a_train_point_is_priced_with_its_profile(tmp_path):
    half = _profile(tmp_path, 0.5)
    specs = {SPEC: (SPEC, (ROOT / "topologies" / f"{SPEC}.toml").read_text())}
    clear_cache()
    rows = {p: run_point({"spec": SPEC, **SETS, **JOB, **({"profile": p} if p else {})}, ["train"], specs)
            for p in (None, half)}
    assert all(r["error"] is None for r in rows.values()), rows
    assert rows[None]["step_time_s"] == pytest.approx(_step_s(None), rel=1e-12)
    assert rows[half]["step_time_s"] == pytest.approx(_step_s(half), rel=1e-12)
    assert rows[half]["step_time_s"] > rows[None]["step_time_s"] * 1.01  # half the network efficiency: slower


def test_a_train_only_study_may_sweep_the_profile(tmp_path):
    half = _profile(tmp_path, 0.5)
    (tmp_path / "study.toml").write_text(
        f'spec = "{SPEC}"\ncompute = ["train"]\n[axes]\n"cluster.num_units" = 1\nmodel = "llama3-8b"\n'
        f'layout = "tp=1,dp=16"\nglobal_batch = 32\ndp_sharding = "none"\noverlap_dp = false\n'
        f'profile = ["hopper+infiniband_ndr", {json.dumps(half)}]\n')
    r = run_cli("sweep", "study.toml", "--scheduler", "serial", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
