"""Profile constants against NCCL's tuning model (src/graph/tuning.cc) as the design notes cite it.

Sources (line numbers as of this commit):
- ../shared/design/cost-model.md lines 57-63: NCCL v2.30.7, Hopper base latencies (us, LL/LL128/Simple) Ring
  6.6/14.0/8.4, Tree 6.8/14.0/8.4; NVLink hop Ring 0.6/1.9/3.4, Tree 0.6/1.25/4.0, NVLS 25 (Simple); network hop
  Ring 2.7/4.0/14.0, Tree 5.0/8.5/14, NVLS 18, NVLSTree 20.9; network overhead 1 us per step, x3 for Simple;
  efficiencies Ring LL 0.5, LL128 0.92, Tree 0.92, NVLS 0.85; H100 NVLink counted as 18 x 20.6 = 370.8 GB/s.
- data/reference/hardware.md lines 35-42 (tuning.cc v2.20.3): per-channel max bandwidth, Hopper Ring LL128
  36.7 GB/s, Tree {38.7, 41.4, 36.0}; Ampere Tree {24.0, 23.6, 17.8}; CollNetDirect network latency 31 us.
These are checked value by value (not re-derived from topo's own tables).
"""

import pytest

from topo import TopoError
from topo.engine.profiles import GENERATIONS, NETWORKS, PROTOCOLS, ideal_profile, node_index, profile_for

US = 1e-6
GB = 1e9


@pytest.fixture
def hopper_ib():
    return profile_for("hopper", "infiniband_ndr")


@pytest.mark.parametrize("fam, want", [("ring", (6.6, 14.0, 8.4)), ("tree", (6.8, 14.0, 8.4))])
def test_base_latencies(hopper_ib, fam, want):
    for proto, v in zip(PROTOCOLS, want):
        assert hopper_ib.base(fam, proto) == pytest.approx(v * US)


@pytest.mark.parametrize("fam, want", [("ring", (0.6, 1.9, 3.4)), ("tree", (0.6, 1.25, 4.0))])
def test_nvlink_hop_latencies(hopper_ib, fam, want):
    for proto, v in zip(PROTOCOLS, want):
        assert hopper_ib.nv_hop(fam, proto) == pytest.approx(v * US)
    assert hopper_ib.nv_hop("nvls", "Simple") == pytest.approx(25 * US)


@pytest.mark.parametrize("fam, want", [("ring", (2.7, 4.0, 14.0)), ("tree", (5.0, 8.5, 14.0))])
def test_network_hop_latencies_on_infiniband(hopper_ib, fam, want):
    for proto, v in zip(PROTOCOLS, want):
        assert hopper_ib.net_hop(fam, proto) == pytest.approx(v * US)


def test_other_network_latencies(hopper_ib):
    assert hopper_ib.net_hop("nvls", "Simple") == pytest.approx(18 * US)
    assert hopper_ib.net_hop("nvls_tree", "Simple") == pytest.approx(20.9 * US)
    assert hopper_ib.net_hop("collnet", "Simple") == pytest.approx(31 * US)


def test_network_overhead_triples_for_simple(hopper_ib):
    assert hopper_ib.overhead("LL") == pytest.approx(1 * US)
    assert hopper_ib.overhead("LL128") == pytest.approx(1 * US)
    assert hopper_ib.overhead("Simple") == pytest.approx(3 * US)


def test_efficiencies(hopper_ib):
    assert hopper_ib.efficiency("ring", "LL") == 0.5
    assert hopper_ib.efficiency("ring", "LL128") == 0.92
    assert hopper_ib.efficiency("tree", "Simple") == 0.92
    assert hopper_ib.efficiency("nvls", "Simple") == 0.85
    assert hopper_ib.nvlink_efficiency * 450 == pytest.approx(18 * 20.6)  # 370.8 of 450 GB/s


def test_per_channel_caps(hopper_ib):
    ch = hopper_ib.channels
    assert hopper_ib.busbw_cap("ring", "LL128") == pytest.approx(ch * 36.7 * GB)
    for domains, v in ((1, 38.7), (2, 41.4), (3, 36.0), (64, 36.0)):
        assert hopper_ib.busbw_cap("tree", "Simple", domains) == pytest.approx(ch * v * GB)
    ampere = profile_for("ampere", "infiniband_hdr")
    for domains, v in ((1, 24.0), (2, 23.6), (8, 17.8)):
        assert ampere.busbw_cap("tree", "Simple", domains) == pytest.approx(ampere.channels * v * GB)
    assert hopper_ib.busbw_cap("ring", "Simple") == float("inf")  # NCCL caps Simple ring only by the links


def test_node_index_is_nccls_scale():
    assert [node_index(d) for d in (1, 2, 3, 100)] == [0, 1, 2, 2]


def test_network_technologies_change_only_network_latencies():
    """A network file scales NCCL's network hops, or replaces them by its own per-step latency (EFA), or adds a
    per-step latency (RoCE providers); NCCL's base and NVLink latencies never change with the network."""
    from topo.engine.profile_data import bundled_files

    ib = profile_for("hopper", "infiniband_ndr")
    files = bundled_files()["network"]
    for net in NETWORKS:
        p = profile_for("hopper", net)
        params = files[net].params
        for proto in PROTOCOLS:
            assert p.base("ring", proto) == ib.base("ring", proto)
            assert p.nv_hop("ring", proto) == ib.nv_hop("ring", proto)
            if "net_step_latency_us" not in params and "net_latency_us" not in params:
                scale = params["net_hop_scale"].value / files["infiniband_ndr"].params["net_hop_scale"].value
                assert p.net_hop("ring", proto) == pytest.approx(scale * ib.net_hop("ring", proto))
        assert 0 < p.network_efficiency <= 1


def test_efa_network_steps_are_aws_published_tuner_latency_plus_the_family_term():
    """aws/aws-ofi-nccl src/tuner/nccl_ofi_model.cpp: net_lat 20 us (P5/P5e), 18 us (P5en), for every algorithm and
    protocol, + OFI_NCCL_TUNER_NET_COMP_OVERHEAD 3 us for Simple (include/nccl_ofi_param.h). topo's fitted EFA
    family term (net_latency_us 12.68 us, NCCL's latencyInter form: twice for Simple) is added to what the model
    times; NCCL's own view (the tuner's, Profile.nccl_model) is AWS's constants alone."""
    for net, lat in (("efa", 20.0), ("efa_v3", 18.0)):
        p = profile_for("hopper", net)
        nccl = p.nccl_model()
        for fam in ("ring", "tree", "nvls_tree"):
            for proto in p.protocols(fam):
                simple = proto == "Simple"
                want = lat + (3.0 if simple else 0.0)
                assert nccl.net_hop(fam, proto) == pytest.approx(want * US), (net, fam, proto)
                assert p.net_hop(fam, proto) == pytest.approx((want + 12.68 * (2 if simple else 1)) * US)
        assert p.sources["net_step_latency_us"]["fitted"] is False
        assert p.sources["net_latency_us"]["fitted"] is True


def test_roce_adds_the_family_latency_to_nccls_network_steps():
    """NCCL's latencyInter: hwLat[NET] + L per network step, + L again for Simple (NVIDIA/nccl tuning.cc).
    hwLat[NET] Tree 5.0/8.5/14, Ring 2.7/4.0/14 us (tuning.cc v2.30.7); L = 6.40 us, topo's one fitted value for
    every RoCE fabric (roce, oci_roce, gcp_roce). NCCL's own view (Profile.nccl_model) is its constants alone."""
    for net in ("roce", "oci_roce", "gcp_roce"):
        p = profile_for("ampere", net)
        for fam, ll, simple in (("tree", 5.0, 14.0), ("ring", 2.7, 14.0)):
            assert p.net_hop(fam, "LL") == pytest.approx((ll + 6.40) * US)
            assert p.net_hop(fam, "Simple") == pytest.approx((simple + 2 * 6.40) * US)
            assert p.nccl_model().net_hop(fam, "LL") == pytest.approx(ll * US)
            assert p.nccl_model().net_hop(fam, "Simple") == pytest.approx(simple * US)
        assert p.sources["net_latency_us"]["fitted"] is True


def test_every_generation_has_a_profile_and_unknown_ones_are_errors():
    for g in GENERATIONS:
        p = profile_for(g, "infiniband_ndr")
        assert 0 < p.nvlink_efficiency <= 1 and p.source
    with pytest.raises(TopoError) as e:
        profile_for("volta", "infiniband_ndr")
    assert e.value.key == "gpu"
    with pytest.raises(TopoError) as e:
        profile_for("hopper", "token-ring")
    assert e.value.key == "fabric.technology"


def test_ideal_profile_is_the_textbook_machine():
    p = ideal_profile()
    assert p.nvlink_efficiency == p.network_efficiency == 1.0
    for fam in ("ring", "tree", "p2p"):
        assert p.protocols(fam) == ("Simple",)
        assert p.base(fam, "Simple") == p.nv_hop(fam, "Simple") == p.net_hop(fam, "Simple") == 0.0


def test_a_profile_file_is_named_by_its_path(tmp_path, monkeypatch):
    # Review finding: `topo profile show my.toml` headed the profile "(/my.toml; gpu/hopper.toml; ...)": a file in
    # the working folder read as one at the root. Bundled parts keep their kind/name; a user file its path as given.
    from topo.engine.profiles import resolve_profile

    monkeypatch.chdir(tmp_path)
    (tmp_path / "u.toml").write_text('[profile]\nkind = "user"\nname = "mine"\nbase = "hopper+roce"\n'
                                     'description = "a test"\n[network_efficiency]\nvalue = 0.5\nsource = "test"\n')
    assert resolve_profile("u.toml").source.split("; ") == ["gpu/hopper.toml", "model/topo.toml", "nccl/2.30.7.toml",
                                                            "network/roce.toml", "u.toml"]
    assert str(tmp_path / "u.toml") in resolve_profile(str(tmp_path / "u.toml")).source


def test_a_profile_of_an_older_generation_skips_what_it_does_not_price():
    """An Ampere profile on a Hopper fabric has no NVLS protocols (A100 has no NVLink SHARP): auto runs what the
    profile prices, an NVLS asked for by name is one clear error (it was an internal TypeError)."""
    from conftest import run_cli

    ok = run_cli("estimate", "dgx-h100-superpod", "-g", "16", "--size", "1G", "--profile", "ampere+roce", check=True)
    assert "nvls_tree not considered: profile ampere+roce has no nvls_tree protocols" in ok.stdout
    bad = run_cli("estimate", "dgx-h100-superpod", "-g", "8", "--size", "1G", "--profile", "ampere+roce",
                  "-a", "nvls")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "profile ampere+roce has no nvls protocols" in bad.stderr
