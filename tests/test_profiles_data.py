"""Profiles as data: every bundled file validates and cites its sources; the composed profiles carry NCCL's
published constants (NVIDIA/nccl src/graph/tuning.cc, as summarised in ../shared/design/cost-model.md); bad files
are one clean error naming the file and the key; user files override a bundled base."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, spec_dict
from topo import build_fabric, spec_from_dict
from topo.errors import TopoError
from topo.engine.estimate import estimate
from topo.engine.profile_data import PARAMETERS, bundled_files, load_profile_file
from topo.engine.profiles import NCCL_VERSIONS, bundled_profile_names, ideal_profile, profile_for, resolve_profile

US = 1e-6


def test_every_bundled_file_validates_and_cites_a_source_for_each_value():
    files = bundled_files()
    assert set(files["gpu"]) == {"ampere", "hopper", "blackwell"}
    assert {"infiniband_hdr", "infiniband_ndr", "infiniband_xdr", "roce", "oci_roce", "gcp_roce", "efa", "efa_v3",
            "gcp_tcpx", "gcp_tcpxo"} <= set(files["network"])
    assert {"2.30.7", "2.7"} <= set(files["nccl"])
    for kind, by_name in files.items():
        for name, f in by_name.items():
            for key, p in f.params.items():
                assert len(p.source) > 20, (kind, name, key)
                assert not p.fitted or p.fitted_on, (kind, name, key)


def test_hopper_constants_are_nccls_published_ones():
    # cost-model.md: Hopper base LL/LL128/Simple Ring 6.6/14.0/8.4; NVLink hop Ring 0.6/1.9/3.4; network hop
    # Tree 5.0/8.5/14; NVLink 18 x 20.6 = 370.8 of 450 GB/s; Ring LL x0.5, LL128 x0.92.
    p = profile_for("hopper", "infiniband_ndr")
    assert p.base("ring", "LL128") == pytest.approx(14.0 * US)
    assert p.base("tree", "LL") == pytest.approx(6.8 * US)
    assert p.nv_hop("ring", "Simple") == pytest.approx(3.4 * US)
    assert p.net_hop("tree", "LL128") == pytest.approx(8.5 * US)
    assert p.nvlink_efficiency == pytest.approx(370.8 / 450)
    assert p.efficiency("ring", "LL") == 0.5 and p.efficiency("ring", "LL128") == 0.92
    assert p.overhead("Simple") == pytest.approx(3 * US)
    # NCCL's tree LL128 efficiency: 0.92 x 7/9 in one node, x 120/128 across
    assert p.efficiency("tree", "LL128", 1) == pytest.approx(0.92 * 7 / 9)
    assert p.efficiency("tree", "LL128", 4) == pytest.approx(0.92 * 120 / 128)
    # per-channel caps x 16 channels: Hopper ring LL128 36.7 GB/s per channel
    assert p.busbw_cap("ring", "LL128") == pytest.approx(16 * 36.7e9)
    assert p.pipeline_window_bytes == 19136512  # 18.25 MiB, model/topo.toml (fitted)


def test_network_files_scale_the_network_latency_only():
    ib, roce = profile_for("hopper", "infiniband_ndr"), profile_for("hopper", "roce")
    # gcp_tcpxo adds its fitted 8.30 us per network step (twice for Simple, NCCL's latencyInter), NVLink unchanged
    tcpxo = profile_for("hopper", "gcp_tcpxo")
    assert tcpxo.net_hop("ring", "Simple") == pytest.approx(ib.net_hop("ring", "Simple") + 2 * 8.30e-6)
    assert tcpxo.net_hop("tree", "LL128") == pytest.approx(ib.net_hop("tree", "LL128") + 8.30e-6)
    assert tcpxo.nv_hop("ring", "Simple") == ib.nv_hop("ring", "Simple")
    # NCCL prices RoCE as InfiniBand; topo adds its fitted RoCE family term, 6.40 us per step (x2 Simple)
    assert roce.net_hop("ring", "Simple") == pytest.approx(ib.net_hop("ring", "Simple") + 2 * 6.40e-6)
    assert roce.nccl_model().net_hop("ring", "Simple") == ib.net_hop("ring", "Simple")
    assert roce.nv_hop("ring", "Simple") == ib.nv_hop("ring", "Simple")
    assert roce.network_efficiency == 0.872 and ib.network_efficiency == 0.94


def test_older_nccl_constants_are_selectable():
    # NVIDIA/nccl src/graph/tuning.cc @01afd20a: hwLat[NET] Ring Simple 9.6 us, Tree Simple 50 us; baseLat Ring LL 3.6
    old = profile_for("ampere", "infiniband_hdr", nccl="2.7")
    assert old.net_hop("ring", "Simple") == pytest.approx(9.6 * US)
    assert old.net_hop("tree", "Simple") == pytest.approx(50 * US)
    assert old.base("ring", "LL") == pytest.approx(3.6 * US)
    assert resolve_profile("ampere+infiniband_hdr@2.7").net_hop("ring", "Simple") == pytest.approx(9.6 * US)
    # NCCL 2.7 had no NVLS: Hopper (which runs NVLS) on its constants is refused, not modelled without latency
    with pytest.raises(TopoError, match="predates NVLS"):
        profile_for("hopper", "infiniband_ndr", nccl="2.7")
    assert NCCL_VERSIONS[-1] == "2.30.7"


def test_every_value_of_a_profile_has_its_source_and_file():
    p = profile_for("blackwell", "roce")
    required = {n for n, spec in PARAMETERS.items() if not spec.optional}
    assert required <= set(p.sources) <= set(PARAMETERS)
    assert set(profile_for("hopper", "efa").sources) >= {"net_step_latency_us", "net_simple_extra_us"}
    assert p.sources["nvlink_efficiency"]["fitted"] is True
    assert p.sources["nvlink_efficiency"]["file"].endswith("gpu/blackwell.toml")
    assert p.sources["base_latency_us"]["fitted"] is False


def _write(tmp_path, text, name="p.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


GOOD_NET = """[profile]
kind = "network"
name = "x"
[network_efficiency]
value = 0.9
source = "a source long enough to count"
[net_hop_scale]
value = 1.0
source = "a source long enough to count"
[peer_overhead_us]
value = 1.0
source = "a source long enough to count"
[in_network_reduction]
value = 0
source = "a source long enough to count"
"""


@pytest.mark.parametrize("change, key, words", [
    (("value = 0.9", "value = 1.7"), "network_efficiency.value", "outside the physical range"),
    (("[net_hop_scale]", "[net_hop_scael]"), "net_hop_scael", "unknown parameter"),
    (('value = 1.0\nsource = "a source long enough to count"\n[peer', 'value = 1.0\n[peer'), "net_hop_scale.source",
     "Field required"),
    (("value = 0.9", "value = [0.9, 0.9]"), "network_efficiency.value", "must be one number"),
    (("value = 0.9", "value = 0.9\nfitted = true"), "network_efficiency.fitted_on", "must say what it was fitted"),
    (('kind = "network"', 'kind = "gpu"'), "network_efficiency", "belongs in a network file"),
    (("[peer_overhead_us]\nvalue = 1.0\nsource = \"a source long enough to count\"\n", ""), "peer_overhead_us",
     "missing"),
    (("[peer_overhead_us]", "[net_simple_extra_us]\nvalue = 3.0\nsource = \"a source long enough\"\n[peer_overhead_us]"),
     "net_simple_extra_us", "adds to net_step_latency_us"),
    (("[peer_overhead_us]", "[net_latency_us]\nvalue = 300.0\nsource = \"a source long enough\"\n[peer_overhead_us]"),
     "net_latency_us.value", "outside the physical range"),
    (("[peer_overhead_us]", "[protocols]\nvalue = [\"LL\", \"LL256\"]\nsource = \"a source long enough\"\n[peer_overhead_us]"),
     "protocols.value", "unknown or repeated protocol"),
    (("[peer_overhead_us]", "[protocols]\nvalue = [\"LL128\"]\nsource = \"a source long enough\"\n[peer_overhead_us]"),
     "protocols.value", "must include Simple"),
    (('kind = "network"', 'kind = "network"\nreplaces = "efa"'), "profile.replaces", "go together"),
])
def test_a_bad_profile_file_is_one_error_with_file_and_key(tmp_path, change, key, words):
    f = _write(tmp_path, GOOD_NET.replace(*change))
    with pytest.raises(TopoError) as exc:
        load_profile_file(f)
    assert exc.value.key == key and words in exc.value.message and exc.value.source == str(f)


def test_good_file_loads_and_invalid_toml_is_clean(tmp_path):
    assert load_profile_file(_write(tmp_path, GOOD_NET)).params["network_efficiency"].value == 0.9
    with pytest.raises(TopoError, match="invalid TOML"):
        load_profile_file(_write(tmp_path, "[profile\n"))


def test_a_user_file_overrides_its_base(tmp_path):
    f = _write(tmp_path, """[profile]
kind = "user"
name = "mine"
base = "hopper+roce"
[network_efficiency]
value = 0.5
source = "measured on my cluster"
fitted = true
fitted_on = "a log"
""")
    p = resolve_profile(f)
    base = profile_for("hopper", "roce")
    assert p.name == "mine" and p.network_efficiency == 0.5
    assert p.net_hop_s == base.net_hop_s and p.nvlink_efficiency == base.nvlink_efficiency
    # the estimate across two nodes is network-bound: halving the usable network rate slows the largest size
    fab = build_fabric(spec_from_dict(spec_dict(fabric={"technology": "roce"})))
    t_base = estimate(fab, "all_reduce", "4GiB", gpus=16, algorithm="ring", profile=base).results[0].time_s
    t_mine = estimate(fab, "all_reduce", "4GiB", gpus=16, algorithm="ring", profile=p).results[0].time_s
    assert t_mine > 1.5 * t_base


def test_a_user_file_overrides_a_table_entry_by_entry(tmp_path):
    """A per-algorithm table in a user file overrides the entries it gives; a protocol or family it leaves out
    keeps the base's value (a new user's finding: a deleted line used to price that step at 0 us)."""
    f = _write(tmp_path, """[profile]
kind = "user"
name = "mine"
base = "hopper+infiniband_ndr"
[nvlink_hop_us]
value.ring = { LL128 = 5.0 }
source = "hand-edited"
fitted = false
""")
    p, base = resolve_profile(f), profile_for("hopper", "infiniband_ndr")
    assert p.nv_hop("ring", "LL128") == pytest.approx(5.0e-6)
    assert p.nv_hop("ring", "LL") == base.nv_hop("ring", "LL") == pytest.approx(0.6e-6)  # NCCL tuning.cc
    assert p.nv_hop("ring", "Simple") == base.nv_hop("ring", "Simple")
    assert p.nvlink_hop_s["tree"] == base.nvlink_hop_s["tree"] and p.nvlink_hop_s["nvls"] == base.nvlink_hop_s["nvls"]


def test_resolve_profile_names():
    fab = build_fabric(spec_from_dict(spec_dict()))
    assert resolve_profile("nccl", fab).name == "hopper+infiniband_ndr"
    assert resolve_profile(None, fab) == profile_for("hopper", "infiniband_ndr")
    assert resolve_profile("ideal") == ideal_profile()
    assert resolve_profile("hopper+gcp_tcpxo").sources["network_efficiency"]["fitted"] is True
    assert resolve_profile("hopper+gcp_tcpxo").sources["peer_overhead_us"]["assumed"] is True
    for bad in ("hopper+nope", "nope", "volta+roce"):
        with pytest.raises(TopoError):
            resolve_profile(bad)
    with pytest.raises(TopoError, match="depends on the fabric"):
        resolve_profile("nccl")
    with pytest.raises(TopoError, match="no such profile file"):
        resolve_profile("missing.toml")


def test_cli_profile_show_and_list():
    doc = json.loads(run_cli("profile", "show", "hopper+efa", "--json", check=True).stdout)
    assert doc["parameters"]["net_step_latency_us"]["value"] == 20.0
    assert doc["parameters"]["net_step_latency_us"]["fitted"] is False
    assert "aws-ofi-nccl" in doc["parameters"]["net_step_latency_us"]["source"]
    assert doc["parameters"]["network_efficiency"]["fitted"] is True
    assert "tuning.cc" in doc["parameters"]["base_latency_us"]["source"]
    text = run_cli("profile", "show", "hopper+efa", check=True).stdout
    assert "network_efficiency = 0.889  [fitted]" in text
    lst = json.loads(run_cli("profile", "list", "--json", check=True).stdout)
    assert "hopper+gcp_tcpxo" in lst["profiles"]
    bad = run_cli("profile", "show", "hopper+nope")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


def test_profile_errors_name_what_is_allowed(tmp_path):
    # A new user's findings: a string efficiency gave pydantic's "valid integer" text, a missing name dumped the
    # whole [profile] table, 'hopper+warp' was blamed on fabric.technology and '' read the current folder
    f = _write(tmp_path, '[profile]\nkind = "user"\nname = "m"\nbase = "hopper+roce"\n'
                         '[nvlink_efficiency]\nvalue = "fast"\nsource = "x"\n')
    with pytest.raises(TopoError) as exc:
        load_profile_file(f)
    assert exc.value.key == "nvlink_efficiency.value"
    assert exc.value.message == "must be a number in [0.05, 1], got 'fast'"
    f = _write(tmp_path, '[profile]\nkind = "user"\nbase = "hopper+roce"\ndescription = "' + "x" * 500 + '"\n')
    with pytest.raises(TopoError) as exc:
        load_profile_file(f)
    assert exc.value.key == "profile.name" and "x" * 20 not in exc.value.message
    for name, key in (("hopper+warp", "profile"), ("", "profile")):
        with pytest.raises(TopoError) as exc:
            resolve_profile(name)
        assert exc.value.key == key
    p = run_cli("estimate", "dgx-h100-superpod", "--profile", "hopper+warp")
    assert p.returncode == 2 and p.stderr.startswith("error: --profile: 'hopper+warp': no profile for network 'warp'")
    p = run_cli("profile", "show", "")
    assert p.returncode == 2 and p.stderr.startswith("error: '': a profile is a bundled name")


@pytest.mark.parametrize("name, start", [
    ("nosuch", "error: nosuch: no such profile file or bundled profile; bundled: ampere+efa, "),
    ("hopper+nope", "error: hopper+nope: no profile for network 'nope'; known: efa, "),
    ("nccl", "error: nccl: is the profile of a fabric's GPU generation and network, and profile show has no "
             "fabric: name one, e.g. ampere+efa; bundled: ampere+efa, "),
    ("ideal", "error: ideal: has no data files: it is the textbook alpha-beta machine"),
])
def test_profile_show_names_the_profile_not_the_metavar(name, start):
    # tidy11: `topo profile show nosuch` said "error: NAME: 'nosuch': unknown profile ...": the argparse metavar
    # as the key, and 'nccl' and 'ideal' in the list of what it can show; the line now starts with the name given,
    # as `topo describe nosuch` and `topo sweep nosuch` do, and lists every bundled profile
    p = run_cli("profile", "show", name)
    assert p.returncode == 2 and p.stderr.startswith(start) and p.stderr.count("\n") == 1, p.stderr
    assert "NAME" not in p.stderr
    if name == "nosuch":
        assert all(b in p.stderr for b in bundled_profile_names()) and "hopper+infiniband_ndr" in p.stderr


def test_the_kernel_launch_is_each_generations_published_figure_and_not_in_nccls_model():
    # gpu/*.toml launch_us: the fixed cost per kernel in a queue of back-to-back small kernels, A100-80GB 2,555 ns,
    # H200 2,433 ns (te42kyfo/gpu-benches gpu-small-kernels/repeated-stream.svg @1c36d509ee71, fit annotations);
    # Blackwell takes Hopper's figure (assumed: none published)
    for gen, us in (("ampere", 2.555), ("hopper", 2.433), ("blackwell", 2.433)):
        p = profile_for(gen, "infiniband_ndr")
        assert p.launch_s == pytest.approx(us * US) and not p.sources["launch_us"]["fitted"]
        assert p.nccl_model().launch_s == 0.0  # NCCL's tuner ranks without it
    assert profile_for("blackwell", "infiniband_ndr").sources["launch_us"]["assumed"]
