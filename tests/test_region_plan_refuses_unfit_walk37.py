"""A region's job that does not fit in GPU memory is not planned (walk37): ``topo plan two-site-h100 --model
nemotron-3-super-120b-a12b --layout tp=2,pp=2,ep=8,... --across pp`` printed its time to train, energy per token and
cost per million tokens while ``topo train`` of the same job says DOES NOT FIT (89.3 GB per GPU on the H100's
85.5 GB); one site's ``topo plan --model`` refuses such a job (``topo.training.mfu.predict_step``: "the MFU of a run
that cannot start is not a planning figure"). Now the region's plan and report refuse it too, in one line naming
``--layout``; the figures are the step's own (``one_site.memory`` of ``topo train REGION --json``), not literals."""

import json

from conftest import run_cli

JOB = ["--model", "nemotron-3-super-120b-a12b"]
UNFIT = 'tp=2,pp=2,ep=8,global_batch=1536,precision="fp8"'
FITS = 'tp=2,pp=4,ep=8,global_batch=1536,precision="fp8"'


def _share_memory(layout):
    doc = json.loads(run_cli("train", "two-site-h100", *JOB, "--layout", layout, "--across", "pp", "--json",
                             check=True).stdout)
    return doc["fits"], doc["one_site"]["memory"]


def test_plan_and_report_refuse_a_share_that_does_not_fit():
    fits, mem = _share_memory(UNFIT)
    assert not fits and mem["total_bytes"] > mem["capacity_bytes"]
    want = (f"error: --layout: nemotron-3-super-120b-a12b with this layout does not fit in GPU memory across the "
            f"sites (one site's share: {mem['total_bytes'] / 1e9:.1f} GB per GPU of {mem['capacity_bytes'] / 1e9:.1f}"
            f" GB); the MFU of a run that cannot start is not a planning figure")
    bad = run_cli("plan", "two-site-h100", *JOB, "--layout", UNFIT, "--across", "pp", "--no-collectives")
    assert bad.returncode == 2 and bad.stderr.strip() == want and not bad.stdout, bad.stderr
    bad = run_cli("report", "two-site-h100", "--plan", "--train", JOB[1], "--layout", UNFIT, "--across", "pp",
                  "-o", "-")
    assert bad.returncode == 2 and bad.stderr.strip() == want, bad.stderr


def test_a_share_that_fits_is_planned():
    fits, _ = _share_memory(FITS)
    assert fits
    ok = run_cli("plan", "two-site-h100", *JOB, "--layout", FITS, "--across", "pp", "--no-collectives", check=True)
    assert "pipeline stages across them: step" in ok.stdout
