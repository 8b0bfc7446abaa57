"""tidy75: walk32's and rev73's leftovers (docs/calibration-findings.md, sections 339 and 340), each through the
command line where the user meets it."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from conftest import ROOT, run_cli
from nccl_text import render
from topo.calibrate.parse import parse_file
from topo.calibrate.setup import setup_from_run
from topo.engine.estimate import estimate

SIZES = [2**i for i in range(10, 31)]  # 1 KiB .. 1 GiB
LOGS = ROOT / "tests" / "data" / "nccl_logs"


def _log(tmp_path, collective="all_reduce", name="run.log", text=None):
    """A 2 x 8 H100 log as nccl-tests prints it (tests/nccl_text.py): hosts and GPU named, so --spec leaves
    nothing to assume."""
    log = tmp_path / name
    log.write_text(text if text is not None else render(collective, ["a", "b"], 8, "NVIDIA H100 80GB HBM3", SIZES,
                                                        [1e-4 * (1 + s / 2**24) for s in SIZES]))
    return log


@pytest.mark.parametrize("text, said", [("", "no bytes"), ("  \n\n", "only blank lines")])
@pytest.mark.parametrize("command", ["compare", "calibrate"])
def test_an_empty_log_is_called_empty(tmp_path, command, text, said):
    """walk32 Left 6: an empty file was refused as "not an nccl-tests log: no result table ..."."""
    log = tmp_path / "empty.log"
    log.write_text(text)
    proc = run_cli(command, str(log))
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {log}: the log is empty ({said}): paste the output of an nccl-tests *_perf "
                           "binary\n")


@pytest.mark.parametrize("flags, assumed", [(("--spec", "dgx-h100-superpod"), False), ((), True)])
def test_calibrate_points_at_assumptions_only_when_it_printed_some(tmp_path, flags, assumed):
    """walk32 Left 5: with --spec nothing is assumed, yet the last line said "under the assumptions above"."""
    out = tmp_path / "fit.toml"
    proc = run_cli("calibrate", str(_log(tmp_path)), *flags, "-o", str(out), check=True)
    assert ("assumption (" in proc.stderr) == assumed
    assert ("under the assumptions above" in proc.stderr) == assumed
    spec = "dgx-h100-superpod" if flags else "H100-2x8-infiniband_ndr, under the assumptions above"
    assert f"it describes the cluster it was fitted on ({spec}): use it" in proc.stderr


SMALL = ("--set", "cluster.num_units=1")  # one 32-server unit of the DGX H100 SuperPOD


def _exported(tmp_path, fmt, *argv):
    """The graph ``topo export`` wrote, read back with networkx (GraphML or node-link JSON)."""
    out = tmp_path / f"g.{'graphml' if fmt == 'graphml' else 'json'}"
    run_cli("export", *argv, "--format", fmt, "-o", str(out), check=True)
    if fmt == "graphml":
        return nx.read_graphml(out)
    return nx.node_link_graph(json.loads(out.read_text()), edges="edges")


@pytest.mark.parametrize("fmt", ["graphml", "json"])
def test_export_marks_a_failed_switch_nic_and_gpu_themselves(tmp_path, fmt):
    """walk32 Left 4: ``export --fail spine0`` marked the switch's cables (num_failed) but not the switch node; a
    cable or a pod's uplinks fail no node."""
    g = _exported(tmp_path, fmt, "dgx-h100-superpod", *SMALL, "--fail", "spine0", "--fail", "nic3.2", "--fail",
                  "gpu5", "--fail", "nvswitch2", "--fail", "leaf1-spine1")
    assert sorted(n for n, a in g.nodes(data=True) if a["failed"] is True) == ["gpu5", "nic3.2", "nvswitch2",
                                                                              "spine0"]
    assert all(a["failed"] is False for n, a in g.nodes(data=True) if n not in ("gpu5", "nic3.2", "nvswitch2",
                                                                                 "spine0"))
    if fmt == "graphml":  # XML Schema's boolean literals, as GraphML declares them
        text = (tmp_path / "g.graphml").read_text()
        assert 'attr.name="failed" attr.type="boolean"' in text and ">True<" not in text


def test_export_marks_a_rail_a_plane_and_random_switches(tmp_path):
    g = _exported(tmp_path, "json", "dgx-h100-superpod", *SMALL, "--fail", "rail:3", "--fail", "plane:1",
                  "--fail", "random:spine:0.25:7")
    down = {n for n, a in g.nodes(data=True) if a["failed"]}
    # one unit: 8 rail leaves and 4 spines; rail 3's leaf, plane 1's spine, and 0.25 x 4 = 1 spine drawn (seed 7:
    # spine3, not spine1, so three nodes)
    assert {"leaf3", "spine1"} < down and len(down) == 3
    assert [g.nodes[n]["tier"] for n in down - {"leaf3", "spine1"}] == ["spine"]
    # every link of a failed node is failed, as num_failed counts
    assert all(a["num_failed"] == a["num_links"] for u, v, a in g.edges(data=True) if u in down or v in down)


def test_a_region_export_marks_a_failed_site_switch(tmp_path):
    g = _exported(tmp_path, "json", "two-site-h100", "--fail", "east:spine0")
    assert [n for n, a in g.nodes(data=True) if a["failed"]] == ["east:spine0"]
    assert g.nodes["east:dci"]["failed"] is False


def _unnamed(tmp_path, collective, name):
    """A log whose header lost the binary's name (the '# Collective test starting: ..._perf' line nccl-tests prints,
    NVIDIA/nccl-tests src/util.cu:624 at a0b82b22): its table alone cannot tell all-gather from all-to-all."""
    text = _log(tmp_path, collective, name).read_text()
    return _log(tmp_path, name=name, text="\n".join(line for line in text.splitlines()
                                                    if "test starting" not in line) + "\n")


def test_calibrate_takes_a_logs_own_collective_and_c_for_the_logs_that_name_none(tmp_path):
    """walk32 Left 2: with several logs, one -c applied to every log, and was refused for a log naming another."""
    named, unnamed = _log(tmp_path, "all_reduce", "ar.log"), _unnamed(tmp_path, "all_gather", "ag.log")
    proc = run_cli("calibrate", str(named), str(unnamed), "--spec", "dgx-h100-superpod", "-c", "all_gather",
                   "--json", check=True)
    assert [log["collective"] for log in json.loads(proc.stdout)["logs"]] == ["all_reduce", "all_gather"]
    assert proc.stderr.count(f"note ({named}): the log names its collective, all_reduce (its binary, "
                             "all_reduce_perf): read as all_reduce; -c all_gather is for the logs that name none\n") == 1
    assert "ag.log): the log names" not in proc.stderr
    assert parse_file(unnamed)[0].binary is None and parse_file(named)[0].binary == "all_reduce_perf"


def test_one_log_contradicting_c_is_still_one_line(tmp_path):
    named = _log(tmp_path, "all_reduce", "ar.log")
    for command in ("calibrate", "compare"):
        proc = run_cli(command, str(named), "--spec", "dgx-h100-superpod", "-c", "all_gather")
        assert proc.returncode == 2 and proc.stderr == (
            f"error: {named}: -c: the log ran all_reduce (its binary, all_reduce_perf), not all_gather; name a "
            "collective only for a log that does not say\n"), proc.stderr


def test_export_gives_a_top_switch_every_plane_it_hosts(tmp_path):
    """rev73 Left 1: a super-spine hosting plane switches of two planes exported only the first one's plane.

    GB200 NVL72 at 520 racks (tier73's packing, tests/test_tier73.py): 65 pods of 18 spines, so 18 planes; the
    super-spine tier has 3,744 plane switches, 208 a plane, in plane order, and one 64-port switch hosts 6
    consecutive ones (624 switches of 60 ports). Switch i hosts 6i .. 6i + 5: it spans planes p - 1 and p where a
    plane boundary 208p falls inside, i.e. 208p is not a multiple of 6 (p not a multiple of 3): 12 switches."""
    g = _exported(tmp_path, "json", "gb200-nvl72-superpod", "--set", "cluster.num_units=520")
    top = {n: a for n, a in g.nodes(data=True) if a["tier"] == "super-spine"}
    assert len(top) == 624
    expected = {f"super-spine{208 * p // 6}": f"{p - 1},{p}" for p in range(1, 18) if 208 * p % 6}
    assert len(expected) == 12
    assert {n: a["planes"] for n, a in top.items() if "," in a["planes"]} == expected
    assert all(a["planes"] == str(a["plane"]) for n, a in top.items() if n not in expected)
    assert all(a["plane"] == int(a["planes"].split(",")[0]) for a in top.values())  # plane: the first, as before
    assert g.nodes["gpu0"]["planes"] == "" and g.nodes["spine19"]["planes"] == "1"


def test_compare_says_what_nccls_tuner_would_pick_with_choose_nccl():
    """walk32 Left 1: compare's 'model algorithm' column was always the routed fastest; `--choose nccl` gives the
    pick of NCCL's tuner (topo.engine.tuner), as `topo estimate --choose nccl` does, and --json says which."""
    log = str(LOGS / "dstack_nebius_h100_allreduce_2n.txt")
    picks = {}
    for choose in ("fastest", "nccl"):
        proc = run_cli("compare", log, "--spec", "dgx-h100-superpod", "--choose", choose, "--json", check=True)
        doc = json.loads(proc.stdout)
        assert doc["choose"] == choose
        picks[choose] = [(r["size_bytes"], r["algorithm"], r["protocol"]) for r in doc["sizes"]]
    run = parse_file(log)[0]
    setup = setup_from_run(run, spec="dgx-h100-superpod")
    sizes = [size for size, _, _ in picks["nccl"]]
    tuner = estimate(setup.fabric, "all_reduce", sizes, **setup.placement_options(), choose="nccl").results
    assert picks["nccl"] == [(s, e.algorithm, e.protocol) for s, e in zip(sizes, tuner)]
    assert picks["nccl"] != picks["fastest"]  # on this 2 x 8 H100 run they part at one size at least
    text = run_cli("compare", log, "--spec", "dgx-h100-superpod", "--choose", "nccl", check=True).stdout
    assert ("# model algorithm: as NCCL's tuner rates them (--choose nccl); NCCL's (INFO): the log's "
            "NCCL_DEBUG=INFO tuning lines\n") in text
    bad = run_cli("compare", log, "--choose", "best")
    assert bad.returncode == 2 and bad.stderr.count("\n") <= 2 and "--choose" in bad.stderr
