"""``topo plan --profile`` (tidy67; prof66's Left): the plan's own collectives (the blast radius's all-reduce with a
part failed, the all-reduce and all-to-all across the top tier) and ``--model``'s step are priced with the profile
as ``topo estimate --profile`` and ``topo train --profile`` price them; a profile fitted on another network gets
their note; a bad profile is one line; a region's plan refuses the flag in one line (it prices no collective, tidy68)."""

import json

import pytest

from conftest import run_cli

SPEC = ("dgx-h100-superpod", "--set", "cluster.num_units=1")  # 256 H100 on InfiniBand NDR, one pod


def _profile(tmp_path, name: str, base: str, efficiency: float) -> str:
    """A profile file as ``topo calibrate`` writes it (prof66's test's): a base and the network efficiency."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[profile]\nkind = "user"\nname = "{name}"\nbase = "{base}"\n'
                    f'[network_efficiency]\nvalue = {efficiency}\nsource = "a test"\nfitted = true\n'
                    'fitted_on = "a test log"\n')
    return str(path)


def _estimate_s(*extra) -> float:
    """The healthy all-reduce the plan's blast radius times on a one-pod fabric: 1 GiB over every GPU."""
    out = run_cli("estimate", *SPEC, "-c", "all_reduce", "-b", "1GiB", "-e", "1GiB", "--json", *extra, check=True)
    return json.loads(out.stdout)["results"][0]["time_s"]


def test_the_plans_collectives_take_the_profile(tmp_path):
    half = _profile(tmp_path, "half-net", "nccl", 0.5)
    base = json.loads(run_cli("plan", *SPEC, "--json", check=True).stdout)["failure_impact"][0]
    mine = json.loads(run_cli("plan", *SPEC, "--json", "--profile", half, check=True).stdout)["failure_impact"][0]
    assert base["healthy_s"] == pytest.approx(_estimate_s(), rel=1e-12)
    assert mine["healthy_s"] == pytest.approx(_estimate_s("--profile", half), rel=1e-12)
    assert mine["healthy_s"] > 1.5 * base["healthy_s"]  # half the network efficiency on a bandwidth-bound 1 GiB


def test_the_model_step_takes_the_profile(tmp_path):
    half = _profile(tmp_path, "half-net", "nccl", 0.5)
    job = ("--model", "llama3-8b", "--layout", "tp=8,global_batch=256")
    mfu = json.loads(run_cli("plan", *SPEC, *job, "--profile", half, "--json", check=True).stdout)["compute"]["mfu"]
    train = json.loads(run_cli("train", *SPEC, "--model", "llama3-8b", "--tp", "8", "--global-batch", "256",
                               "--no-contention", "--profile", half, "--json", check=True).stdout)
    plain = json.loads(run_cli("train", *SPEC, "--model", "llama3-8b", "--tp", "8", "--global-batch", "256",
                               "--no-contention", "--json", check=True).stdout)
    assert train["profile"] == "half-net" and train["mfu"] < plain["mfu"]
    assert mfu == pytest.approx(train["mfu"], rel=1e-12)


def test_notes_and_refusals_as_train_and_report(tmp_path):
    roce = _profile(tmp_path, "roce-fit", "hopper+roce", 0.9)
    ok = run_cli("plan", *SPEC, "--profile", roce, check=True)
    assert "fitted on a hopper+roce cluster" in ok.stderr, ok.stderr  # estimate's note (prof66's test)
    bad = run_cli("plan", *SPEC, "--profile", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "no such profile file" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    region = run_cli("plan", "two-site-h100", "--profile", roce)
    assert region.returncode == 2 and len(region.stderr.strip().splitlines()) == 1, region.stderr
    assert region.stderr.startswith("error: --profile: "), region.stderr
