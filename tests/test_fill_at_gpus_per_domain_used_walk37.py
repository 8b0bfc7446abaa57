"""A job given neither dp nor ``--gpus`` but ``gpus_per_domain_used`` (the flag or the layout's field) fills N GPUs
of each NVLink domain, not every GPU (walk37): on four GB200 NVL72 racks (288 GPUs) ``--gpus-per-domain-used 64``
filled dp 288, then its placement refused the job ("needs GPUs 0 to 319 (64 of each 72-GPU domain), but the
fabric has 288") and ``topo plan --layout ...,gpus_per_domain_used=64`` said dp 288 / 144. One count of what a
placement holds (``training/mapping.py``: ``free_gpus``, which a region's by-size shares already took it from,
skip72) now for one site's filled dp too (``job_gpus``).

Closed forms: 4 racks x 64 = 256 GPUs (the production recipes' 64 of 72, NVIDIA's NVL72 placement the README
describes); past skipped rack 1, 3 x 64 = 192; at 72 (every GPU) the whole fabric's 288, as before."""

import json

from conftest import run_cli

from topo import build_fabric, load_spec
from topo.training.mapping import job_gpus

NVL = ["gb200-nvl72-superpod", "--set", "cluster.num_units=4", "--model", "llama3-8b"]


def _fabric():
    return build_fabric(load_spec("gb200-nvl72-superpod", overrides=["cluster.num_units=4"]))


def test_job_gpus_at_n_of_each_domain():
    f = _fabric()
    # tidy122 (section 445): no hint fills at the production placement, 64 of each rack, as default_placement runs it
    assert job_gpus(f) == (4 * 64, "at 64 of each 72-GPU NVLink domain to the fabric's last")
    assert job_gpus(f, gpus_per_domain_used=64) == (4 * 64, "at 64 of each 72-GPU NVLink domain to the fabric's last")
    assert job_gpus(f, 0, (1,), 64)[0] == 3 * 64
    assert job_gpus(f, gpus_per_domain_used=72) == (288, "")  # every GPU of each: the whole fabric


def _dp(*args):
    doc = json.loads(run_cli("train", *NVL, *args, "--json", check=True).stdout)
    return doc["layout"]["dp"], doc["layout"]["gpus_per_domain_used"]


def test_train_fills_64_of_each_rack_by_flag_and_by_layout():
    assert _dp("--global-batch", "256", "--gpus-per-domain-used", "64") == (256, 64)
    assert _dp("--global-batch", "256", "--layout", "gpus_per_domain_used=64") == (256, 64)
    assert _dp("--tp", "2", "--global-batch", "128", "--gpus-per-domain-used", "64") == (128, 64)
    assert _dp("--global-batch", "256") == (256, 64)  # no hint: 64 of each rack (tidy122, section 445)
    assert _dp("--global-batch", "288", "--gpus-per-domain-used", "72") == (288, 72)  # the whole fabric, by hint


def test_a_batch_that_does_not_split_names_the_filled_dp():
    bad = run_cli("train", *NVL, "--global-batch", "288", "--gpus-per-domain-used", "64")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "dp (256)" in bad.stderr, bad.stderr
