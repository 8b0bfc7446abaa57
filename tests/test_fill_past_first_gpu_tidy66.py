"""A job given neither dp nor ``--gpus`` fills the GPUs from its first GPU past the NVLink domains it skips, as a
scheduler runs it (tidy66, rev65's Left): ``first_gpu`` or ``skip_domains`` beside a layout without dp filled every
GPU of the fabric, so the job could never be placed ("a first GPU from which its 1,024 GPUs fit (0 fits)", "the job
needs GPUs 0 to 1,031"). One rule (``training/mapping.py``: ``job_gpus`` over ``free_gpus``) for ``topo
train`` (flags, ``--layout``, ``--search``), ``topo plan`` and ``topo report``.

Closed forms: a DGX H100 SuperPOD of 1,024 GPUs in 8-GPU domains: from GPU 8, 1,016 GPUs; past skipped domain 3,
1,024 - 8 = 1,016; from GPU 4, 1,020 (which TP 8 does not divide). Three GB200 NVL72 racks (216 GPUs): past rack 1,
or from GPU 72, 2 x 64 = 128, at the production placement's 64 of each rack, as for the whole fabric's 3 x 64 = 192
without hints (tidy122, section 445: before, the fill took all 72 of each rack, 144 and 216, where ``topo train
--gpus`` placed 64)."""

import json

from conftest import run_cli

from topo.training.mapping import free_gpus

H100 = ["dgx-h100-superpod", "--model", "llama3-8b"]
NVL = ["gb200-nvl72-superpod", "--set", "cluster.num_units=3", "--model", "llama3-8b"]


def test_free_gpus_closed_forms():
    assert free_gpus(1024, 8) == 1024
    assert free_gpus(1024, 8, 8) == 1016 and free_gpus(1024, 8, 0, (3,)) == 1016 and free_gpus(1024, 8, 4) == 1020
    assert free_gpus(1024, 8, 8, (3, 5)) == 1000
    assert free_gpus(216, 72, 0, (1,)) == 144 and free_gpus(216, 72, 72) == 144 and free_gpus(216, 72) == 216
    assert free_gpus(216, 72, 72, (0, 9)) == 144  # below the first GPU's domain or past the fabric: skips nothing here
    assert free_gpus(216, 72, 300) == 0


def _train(*args):
    return json.loads(run_cli("train", *args, "--json", check=True).stdout)


def _job(doc):
    lay = doc["layout"]
    return lay["dp"], lay["first_gpu"], list(lay["skip_domains"])


def test_train_fills_from_the_first_gpu_and_past_the_skipped_domain():
    assert _job(_train(*H100, "--tp", "8", "--global-batch", "1016", "--skip-domains", "3")) == (127, 0, [3])
    assert _job(_train(*H100, "--tp", "8", "--global-batch", "1016", "--first-gpu", "8")) == (127, 8, [])
    assert _job(_train(*H100, "--layout", "tp=8,global_batch=1016,first_gpu=8")) == (127, 8, [])
    # a flag wins over the layout's field, as for the sizes
    assert _job(_train(*H100, "--layout", "tp=8,global_batch=1016,first_gpu=0", "--first-gpu", "8")) == (127, 8, [])


def test_nvl72_past_a_skipped_rack_at_64_of_each():
    doc = _train(*NVL, "--tp", "8", "--global-batch", "128", "--skip-domains", "1")
    assert _job(doc) == (16, 0, [1]) and doc["layout"]["gpus_per_domain_used"] == 64
    assert _job(_train(*NVL, "--tp", "8", "--global-batch", "128", "--first-gpu", "72")) == (16, 72, [])
    assert _job(_train(*NVL, "--tp", "8", "--global-batch", "192"))[0] == 24  # no hint: 64 of each rack (tidy122)


def test_a_count_tp_does_not_divide_is_one_line_naming_the_gpus():
    bad = run_cli("report", *H100[:1], "--train", "llama3-8b", "--layout", "tp=8,global_batch=1024,first_gpu=4")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: --layout: dp: not given, and tp x cp x pp = 8 does not divide the 1,020 GPUs of dgx-h100-superpod "
        "from GPU 4 to the fabric's last; allowed: tp, cp, pp whose product divides 1,020, or dp=N in the layout (the "
        "job then takes tp x cp x pp x N of them)"), bad.stderr
    bad = run_cli("train", *H100, "--tp", "8", "--global-batch", "1024", "--first-gpu", "4")
    assert bad.returncode == 2 and "does not divide the 1,020 GPUs from GPU 4 to the fabric's last" in bad.stderr


def test_plan_and_report_fill_as_train_does(tmp_path):
    layout = "tp=8,global_batch=1016,first_gpu=8"
    plan = run_cli("plan", *H100, "--layout", layout, check=True).stdout
    assert "a job of 1,016 of its 1,024 GPUs (dp 127 fills its GPUs" in plan, plan
    out = tmp_path / "r.html"
    run_cli("report", H100[0], "--train", "llama3-8b", "--layout", layout, "-o", str(out), check=True)
    assert "tp8 cp1 pp1 dp127 ep1" in out.read_text(encoding="utf-8")


def test_the_search_fills_as_the_step_does():
    doc = json.loads(run_cli("train", *NVL, "--global-batch", "128", "--search", "--top", "1", "--first-gpu", "72",
                             "--json", check=True).stdout)
    best = doc["ranked"][0]["layout"]
    assert best["tp"] * best["cp"] * best["pp"] * best["dp"] == 128 and best["first_gpu"] == 72
