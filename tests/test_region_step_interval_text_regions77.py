"""regions77 (section 370, item 4): ``topo train REGION`` prints the step across the sites' interval (plan80's
``step_interval``, until now in ``--json`` only), begun as one site's ``topo train`` begins its interval
(``topo.cli.train_text.interval_head``).

Closed form (topo/training/multisite_interval.py, plan80): ``low = T_s / (1 + p90) + exposed / (1 + e90)``, ``high =
T_s / (1 - p90) + exposed / (1 + e10)``, ``p90`` the step model's out-of-family error (step_uncertainty.toml), ``e10``
/ ``e90`` the collective model's held-out error at the bucket's size (collective_interval.toml).
"""

import pytest

from small_regions import built_region, two_sites
from topo.cli.region_train import render_across_sites
from topo.cli.train_text import interval_head
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    region = built_region(tmp_path_factory, two_sites("int77", "two SUs", "dgx-h100-superpod", 1), "int77")
    return estimate_across_sites(region, load_model("llama3-8b"), make_layout(tp=8, dp=4, global_batch=16,
                                                                              seq_len=4096))


def test_the_text_says_the_interval_of_the_step_across_the_sites(job):
    i, dp = job.step_interval, next(s for s in job.strategies if s.strategy == "dp")
    share = dp.step_time_s - dp.exposed_s
    assert i["low_s"] == pytest.approx(share / (1 + i["p90"]) + dp.exposed_s / (1 + i["error_p90_fraction"]), rel=1e-9)
    assert i["high_s"] == pytest.approx(share / (1 - i["p90"]) + dp.exposed_s / (1 + i["error_p10_fraction"]), rel=1e-9)
    head = interval_head(i["low_s"], i["high_s"], " of the step across the sites (dp)")
    line = next(x for x in render_across_sites(job).splitlines() if x.startswith(head))
    assert f"p90 {i['p90']:.1%}" in line and f"{i['regime']} regime" in line


def test_one_sites_line_begins_the_same_way(job):
    """The one-site wording (the share's interval) begins with the same helper."""
    u = job.uncertainty
    assert render_across_sites(job).splitlines()[1].startswith(interval_head(u["low_s"], u["high_s"],
                                                                             " of one site's share's step"))
