import pytest

from conftest import spec_dict, tier
from topo import TopoError, build_fabric, load_spec, spec_from_dict
from topo.spec import apply_overrides, bundled_specs


def test_valid_spec_resolves_gpu_defaults():
    spec = spec_from_dict(spec_dict())
    # H100 defaults from the catalog (NVLink4: 900 GB/s bidirectional = 450 GB/s per direction; NVLS)
    assert spec.nvlink_Bps == 450e9
    assert spec.nvls is True
    assert spec.gpus_per_domain == 8
    assert spec.server.nic_rate_Bps == 50e9


def test_gb200_defaults_to_nvl72_domain_and_4_gpu_hosts():
    spec = spec_from_dict(spec_dict(gpu="GB200", server={"gpus": 4, "nics": 4}))
    assert spec.gpus_per_domain == 72
    assert spec.nvlink_Bps == 900e9


# (dict edit, expected key, expected message fragment)
BAD = [
    (lambda d: d["fabric"].update(kind="torus"), "fabric.kind",
     "must be one of fat_tree, rail_optimized, rail_only, got 'torus'"),
    (lambda d: d["fabric"]["tiers"][0].update(oversubscription=0.5), "fabric.tiers[0].oversubscription",
     "must be >= 1.0, got 0.5"),
    (lambda d: d["fabric"]["tiers"][0].update(radixx=64), "fabric.tiers[0].radixx",
     "unknown key 'radixx'; allowed: name, model, radix"),
    (lambda d: d["fabric"]["tiers"][0].update(port_rate="400"), "fabric.tiers[0].port_rate",
     "expected a bandwidth with its unit, such as '400 Gb/s'"),
    (lambda d: d["fabric"]["tiers"][0].update(port_rate=400), "fabric.tiers[0].port_rate", "give a unit"),
    (lambda d: d["server"].update(nics=0), "server.nics", "must be >= 1, got 0"),
    (lambda d: d["server"].update(gpus=2.5), "server.gpus", "must be a whole number, got 2.5"),
    (lambda d: d.update(gpu="H1000"), "gpu", "unknown GPU model 'H1000'; allowed: A100, H100"),
    (lambda d: d.update(fabrik={}), "fabrik", "did you mean 'fabric'?"),
    (lambda d: d["cluster"].update(num_gpus=16), "cluster", "give exactly one of num_gpus, num_servers"),
    (lambda d: d["fabric"]["tiers"][1].update(name="leaf"), "fabric", "tier names must be unique"),
    (lambda d: d["cluster"].update(num_units=-1), "cluster.num_units", "must be >= 1, got -1"),
    (lambda d: d["scale_up"].update(latency="fast") if "scale_up" in d else d.update(scale_up={"latency": "fast"}),
     "scale_up.latency", "expected a time with its unit"),
    # a boolean is echoed as the TOML file writes it, not as Python's True
    (lambda d: d["fabric"]["tiers"][0].update(radix=True), "fabric.tiers[0].radix", "must be a whole number, got true"),
    # no tier at all: said as such, not as too many tiers to raise the radix for
    (lambda d: d["fabric"].update(tiers=[]), "fabric.tiers", "got none: add a [[fabric.tiers]] entry per switch tier"),
]


@pytest.mark.parametrize("edit, key, fragment", BAD)
def test_bad_specs_name_key_value_and_allowed(edit, key, fragment):
    d = spec_dict()
    edit(d)
    with pytest.raises(TopoError) as info:
        spec_from_dict(d, source="bad.toml")
    err = info.value
    assert err.source == "bad.toml"
    assert err.key == key
    assert fragment in err.message
    assert "\n" not in err.line()


def test_overrides_by_index_and_name():
    d = spec_dict(tiers=[tier("leaf", oversubscription=1), tier("spine")])
    out, paths = apply_overrides(d, ["fabric.tiers[leaf].oversubscription=3", "cluster.num_units=4",
                                     "server.nic_rate=800 Gb/s", "fabric.tiers[1].latency=\"1 us\""])
    assert out["fabric"]["tiers"][0]["oversubscription"] == 3
    assert out["cluster"]["num_units"] == 4
    assert out["server"]["nic_rate"] == "800 Gb/s"
    assert out["fabric"]["tiers"][1]["latency"] == "1 us"
    assert d["cluster"]["num_units"] == 2  # the original is untouched
    assert "fabric.tiers[0].oversubscription" in paths


def test_override_errors_name_the_set():
    d = spec_dict()
    with pytest.raises(TopoError) as info:
        spec_from_dict(d, source="x.toml", overrides=["fabric.tiers[0].oversubscription=0.5"])
    assert info.value.source == "x.toml (--set fabric.tiers[0].oversubscription=0.5)"
    with pytest.raises(TopoError, match="index 5 is out of range"):
        apply_overrides(d, ["fabric.tiers[5].radix=2"])
    with pytest.raises(TopoError, match="no item named 'core'"):
        apply_overrides(d, ["fabric.tiers[core].radix=2"])
    with pytest.raises(TopoError, match="expected KEY=VALUE"):
        apply_overrides(d, ["cluster.num_units"])


def test_build_errors_carry_the_file_and_the_set():
    spec = load_spec("dgx-h100-superpod", ["cluster.num_units=9"])
    with pytest.raises(TopoError) as info:
        build_fabric(spec)
    assert info.value.source.endswith("dgx-h100-superpod.toml")
    assert info.value.key == "fabric.tiers[1].radix"
    assert "72 leaf switches" in info.value.message


def test_unknown_spec_name_lists_bundled():
    with pytest.raises(TopoError) as info:
        load_spec("dgx-h100-superpd")
    assert "did you mean 'dgx-h100-superpod'" in info.value.message
    assert set(bundled_specs()) >= {"h100-100k", "dgx-h100-superpod", "meta-llama3-24k"}


def test_invalid_toml_is_one_line(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("name = \n")
    with pytest.raises(TopoError) as info:
        load_spec(p)
    assert "invalid TOML" in info.value.message and "line 1" in info.value.message


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from topo import TopoError as _TopoError  # noqa: E402

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True),
                    st.text(max_size=12), st.just("400 Gb/s"), st.just("1 us"), st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
_PATHS = ["name", "gpu", "server.gpus", "server.nics", "server.nic_rate", "server.pcie_bandwidth",
          "scale_up.gpus_per_domain", "scale_up.bandwidth_per_gpu", "scale_up.latency", "cluster.num_units",
          "fabric.kind", "fabric.servers_per_unit", "fabric.units_per_pod", "fabric.tiers", "fabric.grow_tiers",
          "fabric.tiers[0].radix", "fabric.tiers[0].port_rate", "fabric.tiers[0].oversubscription",
          "fabric.tiers[0].up_ports", "fabric.tiers[1].down_ports", "fabric.tiers[1].latency", "fabric.extra",
          "cluster"]


# database=None: every run draws fresh examples and none is replayed from .hypothesis/ (a failure found once made
# every later run fail; issue 8). The case it found, a key "\n", is pinned below.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(path=st.sampled_from(_PATHS), value=_VALUES)
def test_any_bad_value_is_one_clean_error(path, value):
    d = spec_dict()
    node = d
    parts = path.replace("[", ".").replace("]", "").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    node[int(last) if last.isdigit() else last] = value
    try:
        build_fabric(spec_from_dict(d, source="fuzz.toml"))
    except _TopoError as exc:
        line = exc.line()
        assert line.startswith("fuzz.toml") and "\n" not in line


@pytest.mark.parametrize("key", ["\n", "a\nb", "\r", "\x1b[2J", "\u2028", "\t"])
def test_control_characters_in_keys_and_values_keep_the_error_one_line(key):
    # issue 8: hypothesis found the key "\n" (in a table such as cluster), which made a two-line error
    edits = [lambda d: d["cluster"].update({key: 1}), lambda d: d.update(gpu=key),
             lambda d: d["fabric"]["tiers"].append(dict(d["fabric"]["tiers"][0], name=key, radix=10**9))]
    for edit in edits:
        d = spec_dict()
        edit(d)
        with pytest.raises(TopoError) as info:
            build_fabric(spec_from_dict(d, source="fuzz.toml"))
        line = info.value.line()
        assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line, line
        assert line.startswith("fuzz.toml")


def test_override_with_a_newline_in_its_key_is_one_line():
    with pytest.raises(TopoError) as info:
        load_spec("dgx-h100-superpod", ["cluster.\nnum_units=1"])
    assert "\n" not in info.value.line() and "\\n" in info.value.line()


def test_an_empty_value_or_unset_removes_a_key():
    # issue 8: switching from num_units to num_gpus was impossible ("give exactly one of ...")
    spec = load_spec("dgx-h100-superpod", ["cluster.num_units=", "cluster.num_gpus=512"])
    assert spec.cluster.num_units is None and spec.cluster.num_gpus == 512
    assert build_fabric(spec).num_gpus == 512
    three = load_spec("h100-100k", ["fabric.tiers[core]=", "cluster.num_pods=", "cluster.num_units=1",
                                    "fabric.units_per_pod=", "fabric.tiers[spine].oversubscription="])
    assert [t.name for t in three.fabric.tiers] == ["leaf", "spine"]
    with pytest.raises(TopoError) as info:
        load_spec("dgx-h100-superpod", ["cluster.num_unit="])
    assert "cannot remove cluster.num_unit: the spec does not set it (cluster sets num_units)" in info.value.line()


def test_cli_unset_is_set_with_an_empty_value():
    from conftest import run_cli
    import json

    a = json.loads(run_cli("describe", "dgx-h100-superpod", "--unset", "cluster.num_units", "--set",
                           "cluster.num_gpus=512", "--json", check=True).stdout)
    b = json.loads(run_cli("describe", "dgx-h100-superpod", "--set", "cluster.num_units=", "--set",
                           "cluster.num_gpus=512", "--json", check=True).stdout)
    assert a == b and a["num_gpus"] == 512


def test_an_unknown_key_a_set_created_names_that_set():
    # walk17: `topo describe --set foo.bar=1` said "bundled spec h100-100k: foo: unknown key 'foo'" without the
    # override that wrote it, where a bad value under --set says "(--set cluster.num_units=-1)"
    with pytest.raises(TopoError) as info:
        spec_from_dict(spec_dict(), source="x.toml", overrides=["foo.bar=1"])
    assert info.value.key == "foo" and info.value.source == "x.toml (--set foo.bar=1)"
    with pytest.raises(TopoError) as info:
        spec_from_dict(spec_dict(), source="x.toml", overrides=["fabric.tiers[0].radixx=64"])
    assert info.value.source == "x.toml (--set fabric.tiers[0].radixx=64)"


def test_the_other_errors_of_a_spec_say_what_is_wrong_with_each():
    # walk17: a spec with an unknown key and no [cluster] or [fabric] said "foo: unknown key 'foo'; allowed: ...,
    # cluster, fabric, plan (also: cluster, fabric)", which reads as more allowed keys: each other key says its fault
    d = spec_dict()
    del d["cluster"], d["fabric"]
    d["foo"] = 3
    with pytest.raises(TopoError) as info:
        spec_from_dict(d, source="bad.toml")
    assert info.value.key == "foo"
    assert info.value.message.endswith("(also: cluster: is required but missing; fabric: is required but missing)")
    d = spec_dict()
    d["cluster"]["num_units"] = -1
    d["server"]["nics"] = 0
    with pytest.raises(TopoError) as info:
        spec_from_dict(d, source="bad.toml")
    assert "(also: " in info.value.message and ": must be >= 1, got " in info.value.message.split("(also: ")[1]
