"""benchmarks/accuracy.py's network latency over NCCL's constants (issue 33): one term every Ethernet family shares
plus each family's departure from it, so that a family no fit saw (leave-one-network-family-out) is priced with
what the others share instead of NCCL's InfiniBand constants alone."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import accuracy  # noqa: E402

from topo.engine.profiles import NETWORKS  # noqa: E402


def test_every_network_but_infiniband_is_ethernet():
    got = {tech: accuracy.network_class(tech) for tech in NETWORKS}
    assert {t for t, c in got.items() if c == "infiniband"} == {t for t in NETWORKS if t.startswith("infiniband")}
    assert got["roce"] == got["oci_roce"] == got["efa_v1"] == got["gcp_tcpxo"] == "ethernet"


@pytest.fixture(scope="module")
def roce_group():
    (g,) = [g for g in accuracy.load_groups(accuracy.DATA, accuracy.SETUPS) if g.setup == "oci_a100_2n_full"]
    return g


def test_a_family_left_out_keeps_the_ethernet_term(roce_group):
    # NCCL's Tree/LL network step is 5.0 us (tuning.cc hwLat[NET][TREE][LL]); the Ethernet term adds to it (twice
    # for Simple, NCCL's latencyInter form), the RoCE family's departure on top of that when RoCE was fitted
    params = [p for p in accuracy.shared_params() if p.name == "net_latency_us"]
    tags = [p.tag for p in params]
    assert "netclass:ethernet" in tags and set(accuracy.ETHERNET_FAMILIES) <= set(tags)
    x = [{"netclass:ethernet": 9.0, "netfamily:roce": -2.5}.get(p.tag, 0.0) for p in params]
    fitted = accuracy.fitted_profile(roce_group, params, x)
    assert fitted.net_hop("tree", "LL") == pytest.approx((5.0 + 9.0 - 2.5) * 1e-6)
    assert fitted.net_hop("tree", "Simple") == pytest.approx((14.0 + 2 * (9.0 - 2.5)) * 1e-6)
    # RoCE left out of the fit (leave-one-network-family-out): its departure is not a parameter of that fit
    kept = [(p, xi) for p, xi in zip(params, x) if p.tag != "netfamily:roce"]
    out = accuracy.fitted_profile(roce_group, [p for p, _ in kept], [xi for _, xi in kept])
    assert out.net_hop("tree", "LL") == pytest.approx((5.0 + 9.0) * 1e-6)


def test_the_files_carry_the_ethernet_term_plus_the_familys_departure():
    v = {"net_latency_us[netclass:ethernet]": 9.0, "net_latency_us[netfamily:roce]": -2.5,
         "net_latency_us[netfamily:efa]": 3.0}
    assert accuracy.net_latency_totals(v) == {"netfamily:roce": 6.5, "netfamily:efa": 12.0,
                                              "network:gcp_tcpxo": 9.0}


def test_the_nvl72_rack_has_no_nvlink_step_term_of_its_own():
    """Every NVLink step in an NVL72 rack crosses one NVSwitch, in a tray or across trays (gpu/blackwell.toml), so
    the only per-step extra is Blackwell's (nvlink_hop_extra_us, any domain); a second per-step term for multi-tray
    domains is not fitted (the RoCE NVL72 runs cannot tell the two apart: with Lambda's B200 left out it took the
    whole step) and stays at its assumed 0. The fixed NVL72 term (mnnvl_extra_us) is still fitted."""
    from topo.engine.profiles import profile_for

    fitted = {(p.name, p.tag) for p in accuracy.shared_params()}
    assert ("nvlink_hop_extra_us", "gpu:blackwell") in fitted and ("mnnvl_extra_us", "gpu:blackwell") in fitted
    assert not any(name == "mnnvl_hop_extra_us" for name, _ in fitted)
    p = profile_for("blackwell", "gcp_roce")
    assert p.mnnvl_hop_extra_s == 0.0 and p.sources["mnnvl_hop_extra_us"]["assumed"]
    assert not p.sources["mnnvl_hop_extra_us"]["fitted"]


def test_the_fitted_term_on_efa_v4_is_scaled_as_its_file_scales_it():
    """On Blackwell ``efa`` is ``efa_v4`` (p6-b200), whose whole network step, AWS's 20 us and the fitted term alike,
    is scaled by the latency aws-ofi-nccl reports to NCCL there against p5: 35 / 75 (src/platform-aws.cpp
    platform_data_map). The fit's term must be scaled the same way, or a fold would price p6-b200 with p5's
    step (the bundled file and the leave-one-setup-out figure would disagree)."""
    (g,) = [g for g in accuracy.load_groups(accuracy.EXTRA, accuracy.EXTRA_SETUPS) if g.setup == "dstack3961_p6b200_2n"]
    assert g.case.profile.name == "blackwell+efa_v4"
    params = [p for p in accuracy.shared_params() if p.name == "net_latency_us"]
    x = [{"netclass:ethernet": 9.0, "netfamily:efa": 3.0}.get(p.tag, 0.0) for p in params]
    fitted = accuracy.fitted_profile(g, params, x)
    assert fitted.net_hop("tree", "LL") == pytest.approx((20.0 + 9.0 + 3.0) * 35 / 75 * 1e-6, rel=1e-3)
    assert fitted.net_hop("tree", "Simple") == pytest.approx((23.0 + 2 * 12.0) * 35 / 75 * 1e-6, rel=1e-3)
    # the bundled file, with its own fitted 12.68 us: the same form
    assert g.case.profile.net_hop("tree", "LL") == pytest.approx((20.0 + 12.68) * 35 / 75 * 1e-6, rel=1e-3)


def test_a3_mega_simple_run_is_modelled_without_nvls():
    """Every release of Google's TCPXO NCCL profile that set NCCL_PROTO=Simple alone (Apr 2024 - Feb 2025; the run
    is modelled with Simple) also set NCCL_ALGO=Ring,Tree and NCCL_NVLS_ENABLE=0 (GoogleCloudPlatform/
    container-engine-accelerators gpudirect-tcpxo/README.md; NVLSTree joined the default profile in Aug 2025), so
    the run never took NVLSTree, which NCCL's own choice (auto) picks for it at every size <= 64 KiB."""
    (g,) = [g for g in accuracy.load_groups(accuracy.EXTRA, accuracy.EXTRA_SETUPS) if g.setup == "a3mega_tcpxo_2n"]
    small = [s for s in g.case.sizes if s <= accuracy.LAT_MAX]
    got = accuracy.score(g, g.case.profile)
    assert set(got.algorithms) <= {"ring", "tree"}
    from topo.calibrate.compare import modelled_times
    auto = modelled_times(replace(g.case.setup, algorithm="auto"), g.collective, small, g.case.profile)
    assert {r.algorithm for r in auto} == {"nvls_tree"}  # what the setup would be priced as without the profile


def test_a_familys_fitted_values_are_one_value_in_every_file_of_it():
    """The fit has one value per network family (``netfamily:efa``, ``netfamily:roce``: network_efficiency and the
    per-step latency; EFA's peer overhead), which each file of the family carries as a copy (efa, efa_v1, efa_v3,
    efa_v4; roce, oci_roce, gcp_roce). A refit written to one file and not the others (rev38: efa_v4 copies efa's
    12.68 us) would price that generation with a stale value the fit never had."""
    from topo.engine.profile_data import bundled_files

    files = bundled_files()["network"]
    for fam in ("efa", "roce"):
        members = [t for t in NETWORKS if accuracy.network_family(t) == fam]
        assert len(members) >= 3, members
        for key in ("network_efficiency", "net_latency_us") + (("peer_overhead_us",) if fam == "efa" else ()):
            values = {t: files[t].params[key].value for t in members}
            assert len(set(values.values())) == 1, (key, values)
