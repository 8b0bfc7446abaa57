"""Concurrent traffic: members alone and together, hand-derived sharing, traffic files and the CLI."""

import json

import numpy as np
import pytest

from topo.engine.profiles import profile_for

from conftest import run_cli
from topo import build_fabric, load_spec
from topo.errors import TopoError
from topo.engine.estimate import estimate
from topo.engine.options import EstimateOptions as O
from topo.engine.contention import finish_times, rates
from topo.engine.flow_classes import FlowClasses
from topo.engine.traffic import Member, run_mix
from topo.engine.traffic_file import traffic_from_dict


@pytest.fixture(scope="module")
def pod():
    return build_fabric(load_spec("dgx-h100-superpod"))


def _users(U, work):
    i, r = np.nonzero(U)
    return FlowClasses(np.asarray(work, float), np.ones(U.shape[0], dtype=np.int64), i, r, U[i, r])


def test_hand_derived_equal_and_maxmin_speeds():
    # Resource 0 carries only A (at 100% of it when alone); resource 1 carries A at 50% and B at 100%.
    # equal: resource 1 is asked for 150%; each of its 2 users gets half: A may run at 1/(2*0.5) = 1 (so not
    # slowed), B at 1/(2*1.0) = 0.5. max-min: both speeds rise together until resource 1 is full:
    # 0.5x + 1.0x = 1 -> x = 2/3 for both.
    U = np.array([[1.0, 0.5], [0.0, 1.0]])
    users, cap = _users(U, [1.0, 1.0]), np.ones(2)
    x, lim = rates(users, cap, "equal", max_rate=1.0)
    assert x == pytest.approx([1.0, 0.5]) and lim.tolist() == [-1, 1]
    x, lim = rates(users, cap, "maxmin", max_rate=1.0)
    assert x == pytest.approx([2 / 3, 2 / 3]) and lim.tolist() == [1, 1]
    # With 1 s of work each: equal: A ends at 1; B has done 0.5 by then and runs alone: ends at 1.5.
    # max-min: both at 2/3: both end at 1.5.
    done, _ = finish_times(users, cap, "equal", max_rate=1.0)
    assert done == pytest.approx([1.0, 1.5])
    done, _ = finish_times(users, cap, "maxmin", max_rate=1.0)
    assert done == pytest.approx([1.5, 1.5])
    # capped at speed 1, a member alone on its resources is not held back
    x, lim = rates(_users(np.array([[0.5, 0.0]]), [1.0]), cap, "maxmin", max_rate=1.0)
    assert x == pytest.approx([1.0]) and lim.tolist() == [-1]


@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
def test_a_member_speeds_up_when_another_finishes(pod, sharing):
    # The same ring on the same 256 GPUs, 1 GiB and 256 MiB (textbook profile: alone, each uses its bottleneck
    # at exactly 100%). Together each runs at half speed until the small one has moved its bytes, at 2 b
    # (b: its bandwidth time alone); then the large one runs alone at full speed: it ends at a + b, not 2 a.
    big = Member("big", "all_reduce", "1GiB", O(gpus=256, algorithm="ring"))
    small = Member("small", "all_reduce", "256MiB", O(gpus=256, algorithm="ring"))
    r = run_mix(pod, [big, small], sharing=sharing, profile="ideal")
    a = estimate(pod, "all_reduce", "1GiB", gpus=256, algorithm="ring", profile="ideal").results[0]
    b = estimate(pod, "all_reduce", "256MiB", gpus=256, algorithm="ring", profile="ideal").results[0]
    assert r.members[1].mix_s == pytest.approx(b.latency_s + 2 * b.bandwidth_s, rel=1e-9)
    assert r.members[0].mix_s == pytest.approx(a.latency_s + a.bandwidth_s + b.bandwidth_s, rel=1e-9)
    assert r.makespan_s == pytest.approx(r.members[0].mix_s)


def test_members_on_disjoint_links_do_not_slow_each_other(pod):
    # two 64-GPU all-reduces in different scalable units (32 servers each): no link in common
    r = run_mix(pod, [Member("a", "all_reduce", "1GiB", O(ranks=list(range(64)))),
                      Member("b", "all_reduce", "1GiB", O(ranks=list(range(512, 576))))])
    assert [m.slowdown for m in r.members] == [1.0, 1.0]
    assert r.contested == []
    alone = estimate(pod, "all_reduce", "1GiB", gpus=64).results[0].time_s
    assert r.members[0].alone_s == pytest.approx(alone, rel=1e-12)


def test_two_identical_members_take_twice_the_bandwidth_time(pod):
    # The same ring twice on the same GPUs: every link carries both; equal sharing halves each one's speed,
    # so each bandwidth part doubles and the latency part stays (textbook profile: a ring alone uses its
    # bottleneck at exactly 100%).
    m = Member("x", "all_reduce", "1GiB", O(gpus=256, algorithm="ring"))
    r = run_mix(pod, [m, Member("y", m.collective, m.size, m.options)], profile="ideal")
    alone = estimate(pod, "all_reduce", "1GiB", gpus=256, algorithm="ring", profile="ideal").results[0]
    for x in r.members:
        assert x.mix_s == pytest.approx(alone.latency_s + 2 * alone.bandwidth_s, rel=1e-9)
    top = r.contested[0]
    assert top.demand == pytest.approx(2.0) and list(top.members.values()) == pytest.approx([1.0, 1.0])
    # With NCCL's profile a ring leaves its bottleneck idle while its pipeline fills (the first W bytes at half
    # speed, topo.profiles), so alone it uses u = S/(S + W) of it; two of them share it at 1/(2u) each.
    nccl = run_mix(pod, [m, Member("y", m.collective, m.size, m.options)])
    alone = estimate(pod, "all_reduce", "1GiB", gpus=256, algorithm="ring").results[0]
    W = profile_for(pod.spec.gpu_model.generation, pod.spec.fabric.technology).pipeline_window_bytes
    u = 2**30 / (2**30 + W)
    assert list(nccl.contested[0].members.values()) == pytest.approx([u, u], rel=1e-9)
    assert nccl.members[0].mix_s == pytest.approx(alone.latency_s + alone.bandwidth_s * 2 * u, rel=1e-9)


def test_oversubscribed_tier_is_where_the_default_mix_fights():
    # meta-llama3-24k: 1:7 above the pods. Data parallelism across pods and pipeline sends between neighbouring
    # pods share the aggregation tier; tensor parallelism stays in the NVLink domains.
    from topo.engine.traffic_file import load_traffic

    f = build_fabric(load_spec("meta-llama3-24k"))
    settings, members = load_traffic("3d-parallel")
    r = run_mix(f, members, name=settings["name"])
    by = {m.name: m for m in r.members}
    assert by["tp"].slowdown == 1.0
    assert by["dp"].slowdown > 1.0 and by["pp"].slowdown > 1.0
    assert by["pp"].bottleneck_mix_level == "ctsw-atsw"
    assert all(c.level == "ctsw-atsw" for c in r.contested)


def test_traffic_file_errors():
    base = {"member": [{"name": "a", "collective": "all_reduce", "size": "1M"}]}
    traffic_from_dict(base, "t.toml")
    cases = [
        ({"member": [{"name": "a", "collective": "all_reduce", "size": "1M", "grups": 2}]}, "member[0].grups",
         "did you mean 'groups'"),
        ({"member": [{"name": "a", "collective": "all_reduce"}]}, "member[0].size", "missing"),
        ({"member": [{"name": "a", "collective": "all_reduce", "size": "1M", "groups": "per_rack"}]},
         "member[0].groups", "per_domain"),
        ({"member": [{"name": "a", "collective": "all_reduce", "size": "1M", "chunks": 0}]}, "member[0].chunks",
         "got 0"),
        ({"sharing": "fair", **base}, "sharing", "allowed: equal, maxmin"),
        ({"members": []}, "members", "allowed:"),
    ]
    for data, key, fragment in cases:
        with pytest.raises(TopoError) as e:
            traffic_from_dict(data, "t.toml")
        assert e.value.source == "t.toml" and e.value.key == key and fragment in e.value.message, e.value.line()


def test_cli_mix_json_equals_the_library(tmp_path):
    p = run_cli("estimate", "meta-llama3-24k", "--traffic", "3d-parallel", "--json", check=True)
    doc = json.loads(p.stdout)
    from topo.engine.traffic_file import load_traffic

    settings, members = load_traffic("3d-parallel")
    lib = run_mix(build_fabric(load_spec("meta-llama3-24k")), members, name=settings["name"]).to_dict()
    assert doc == json.loads(json.dumps(lib))
    text = run_cli("estimate", "meta-llama3-24k", "--traffic", "3d-parallel", check=True).stdout
    assert "slowdown" in text and "links they fight over" in text and "more alike" in text
    bad = tmp_path / "bad.toml"
    bad.write_text('[[member]]\nname = "a"\ncollective = "all_reduce"\nsize = "-1"\n')
    p = run_cli("estimate", "meta-llama3-24k", "--traffic", str(bad))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "member[a].size" in p.stderr, p.stderr


def test_the_report_shows_the_mixes_where_the_oversubscribed_tier_bites():
    from topo.report.build import MIXES, build_spec_report

    r = build_spec_report("meta-llama3-24k", sizes=("1G", "1G", 2), extra_algorithms=())
    assert [m.name for m in r.mixes] == list(MIXES)
    for m in r.mixes:
        # the 1:7 aggregation tier is the most utilized level under both mixes (the whole-cluster all-reduce's is
        # the NIC, which is why the mixes are there)
        assert m.loads.hottest.iloc[0]["level"] == "ctsw-atsw"
    assert r.scenarios[0].loads.hottest.iloc[0]["level"] != "ctsw-atsw"
    one_pod = build_spec_report("dgx-h100-superpod", sizes=("1G", "1G", 2), extra_algorithms=())
    assert one_pod.mixes == [] and "several pods" in one_pod.mix_note
    failed = build_spec_report("meta-llama3-24k", sizes=("1G", "1G", 2), extra_algorithms=(), failures=["ctsw0"])
    assert failed.fabric.failures == ("ctsw0",)
    assert failed.scenarios[0].result.results[0].time_s >= r.scenarios[0].result.results[0].time_s


@pytest.mark.parametrize("flags, flag", [(("-c", "alltoall"), "--collective"), (("-a", "ring"), "--algorithm"),
                                         (("--placement", "spread_pods"), "--placement"), (("-f", "4"), "-f"),
                                         (("--groups", "4"), "--groups"), (("--detail",), "--detail"),
                                         (("--subflows", "4"), "--subflows")])
def test_cli_mix_refuses_flags_it_would_ignore(flags, flag):
    # Review finding: with --traffic, -c/-a/--placement/--groups/-f/--detail were silently ignored (the members'
    # own settings ran), and --subflows without --ecmp hash changed nothing; each is now one error line naming it
    p = run_cli("estimate", "meta-llama3-24k", "--traffic", "3d-parallel", *flags)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"error: {flag}: "), p.stderr


def test_per_server_groups_are_one_communicator_per_server_without_a_layout():
    # Review finding: `groups = "per_server"` without `group_layout` ran strided communicators (GPU j, j+S, ...:
    # one GPU of each of 8 servers), so a "per-server" all-to-all went over the NICs at NIC speed (3.6 ms for
    # 64 MiB on the SuperPOD instead of 0.21 ms over NVLink). per_domain / per_server now default to blocked.
    from small_fabrics import small_fabric
    from topo.engine.estimate import estimate
    from topo.engine.traffic_file import traffic_from_dict

    f = small_fabric("rail_optimized-2")
    for sym, count in (("per_server", f.layout.num_servers), ("per_domain", f.num_gpus // f.layout.gpus_per_domain)):
        _, members = traffic_from_dict({"member": [{"name": "a", "collective": "alltoall", "size": "64MiB",
                                                    "groups": sym}]})
        alone = run_mix(f, members).members[0].alone_s
        want = estimate(f, "alltoall", "64MiB", groups=count, group_layout="blocked").results[0].time_s
        assert alone == pytest.approx(want, rel=1e-12)
    _, members = traffic_from_dict({"member": [{"name": "a", "collective": "alltoall", "size": "64MiB",
                                                "groups": "per_server", "group_layout": "strided"}]})
    assert members[0].options.group_layout == "strided"  # the file's own choice stays


def test_pod_symbols_on_a_one_pod_cluster_say_why():
    # Review finding: `topo estimate dgx-h100-superpod --traffic 3d-parallel` (one pod) failed with "member[dp].
    # algorithm: no algorithm can run all_reduce here: ring: a ring needs at least 2 ranks; ..."
    from small_fabrics import small_fabric
    from topo.engine.traffic_file import load_traffic

    f = small_fabric("rail_optimized-2")  # two units, one pod
    assert f.layout.num_pods == 1
    for mix, member in (("3d-parallel", "dp"), ("moe-alltoall", "ep")):
        _, members = load_traffic(mix)
        with pytest.raises(TopoError) as e:
            run_mix(f, members)
        assert e.value.key == f"member[{member}].groups" and "needs a cluster of several pods" in e.value.message


def test_a_mix_carries_its_members_notes(monkeypatch):
    # a member's estimate may approximate (a hashed all-to-all too large to hash flow by flow takes the expected
    # loads); the mix said nothing of it. Its notes now name the member, in the table and in --json.
    import topo.engine.allpairs as route
    from small_fabrics import small_fabric
    from topo.engine.traffic_file import traffic_from_dict

    monkeypatch.setattr(route, "EXPLICIT_FLOWS", 10)
    monkeypatch.setattr(route, "MAX_HASHED_CLASS_PATHS", 0)
    monkeypatch.setattr(route, "MAX_HASHED_CHUNKED", 0)
    _, members = traffic_from_dict({"member": [{"name": "ep", "collective": "alltoall", "size": "64MiB"},
                                               {"name": "dp", "collective": "all_reduce", "size": "64MiB"}]})
    r = run_mix(small_fabric("rail_optimized-2"), members, ecmp="hash")
    assert len(r.notes) == 1 and r.notes[0].startswith("ep: ecmp=hash: the all-to-all's")
    assert r.to_dict()["notes"] == r.notes
    assert run_mix(small_fabric("rail_optimized-2"), members, ecmp="ideal").notes == []
