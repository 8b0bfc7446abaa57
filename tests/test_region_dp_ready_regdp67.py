"""The ``dp`` strategy across sites with each site's in-site reduction ending at its own time (regdp67).

Site i's share steps in T_i on its own fabric and its in-site DP reduction leaves w_i of its last backward
(``multisite.dp_window_s``): it is ready for the cross-site phase at r_i = T_i - w_i. The cross-site phase (D) is one
collective over every site, so it starts at R = max r_i, and its last bucket (e) crosses after the slowest share's
end: T = max(max T_i + e, R + D) (= max_i (T_i + max(e, D - w_i)); no FP8 amax here). Equal sites: T + max(e, D - w).

The region: two sites of 2 DGX H100 scalable units (the bundled dgx-h100-superpod spec, 512 GPUs each), 40 km apart
(tests/small_regions.py). The job: Llama 3 8B, TP 8, DP 64 a site, micro-batch 8, global batch 1,024: at 8
sequences a micro-batch the last backward is long enough that the in-site reduction leaves a window (w > 0).
"""

import json

import pytest

from conftest import run_cli
from small_regions import built_region, two_sites
from topo import build_fabric, load_spec
from topo.training.model import load_model
from topo.training.multisite import dp_window_s, estimate_across_sites
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

REGION = two_sites("two-su", "two sites of 2 DGX H100 scalable units, 40 km apart (a test region)", "dgx-h100-superpod", 2)
JOB = dict(tp=8, dp=128, global_batch=1024, micro_batch=8)
SHARE = dict(tp=8, dp=64, global_batch=512, micro_batch=8)


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, REGION)


@pytest.fixture(scope="module")
def model():
    return load_model("llama3-8b")


@pytest.fixture(scope="module")
def shares(model):
    """The share alone on one site's fabric: healthy and with leaf3 failed, each with its window."""
    fabric = build_fabric(load_spec("dgx-h100-superpod", ["cluster.num_units=2"]))
    lay = make_layout(**SHARE)
    out = []
    for f in (fabric, fabric.with_failures("leaf3")):
        one = estimate_step(f, model, lay)
        out.append((one.step_time_s, dp_window_s(one, lay)))
    return out


@pytest.fixture(scope="module")
def healthy(region, model):
    return estimate_across_sites(region, model, make_layout(**JOB))


def _edge(healthy, shares):
    """e: on healthy sites the window hides the whole phase (D < w), so the step exposes the last bucket alone."""
    (T, w), _ = shares
    dp = healthy.strategies[0]
    assert 0 < dp.dci_time_s < w  # the case the fixture is built for
    return dp.exposed_s


def test_equal_healthy_sites_step_as_one_site_formula(healthy, shares):
    """Equal sites: R = T - w, the one-site formula T + max(e, D - w), the share's step bit for bit."""
    (T, w), _ = shares
    dp = healthy.strategies[0]
    assert healthy.one_site_step_s == T
    assert dp.step_time_s == T + max(_edge(healthy, shares), dp.dci_time_s - w)
    assert healthy.pacing_site == "east"


@pytest.mark.parametrize("failed", ["west:leaf3", "east:leaf3"])
def test_failed_site_closed_form(region, model, healthy, shares, failed):
    """A failed leaf in one site: its share steps later and its reduction ends later; the step is
    max(max T_i + e, max r_i + D), paced by the failed site, the same whichever site holds the failure."""
    (T_h, w_h), (T_f, w_f) = shares
    e = _edge(healthy, shares)
    out = estimate_across_sites(region.with_failures(failed), model, make_layout(**JOB))
    dp = out.strategies[0]
    D = dp.dci_time_s
    want = max(max(T_h, T_f) + e, max(T_h - w_h, T_f - w_f) + D)
    assert dp.step_time_s == pytest.approx(want, rel=1e-12)
    assert dp.step_time_s == pytest.approx(max(T_h + max(e, D - w_h), T_f + max(e, D - w_f)), rel=1e-12)
    assert T_f > T_h and out.pacing_site == failed.split(":")[0]
    assert dp.exposed_s == pytest.approx(dp.step_time_s - T_f, rel=1e-12)


def test_dp_row_is_every_sites_whatever_paces_the_chosen_way(region, model):
    """With ``outer`` chosen the table's dp row is still the step across every site (the latest readiness)."""
    failed = region.with_failures("west:leaf3")
    by_dp = estimate_across_sites(failed, model, make_layout(**JOB)).strategies[0]
    by_outer = estimate_across_sites(failed, model, make_layout(**JOB), across="outer", outer_every=10)
    assert by_outer.strategies[0].step_time_s == by_dp.step_time_s


def test_json_has_no_private_end(tmp_path):
    """The site's own end, used to name the pacing site, is not a JSON key."""
    path = tmp_path / "two-su.toml"
    path.write_text(REGION)
    proc = run_cli("train", str(path), "--model", "llama3-8b", "--tp", "8", "--dp", "128",
                           "--global-batch", "1024", "--micro-batch", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert all("own_end_s" not in s for s in d["strategies"])
