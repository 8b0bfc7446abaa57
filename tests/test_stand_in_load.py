"""A failed NIC off the bottleneck says why (walk18, fab53 left item 5b): in NCCL's double binary tree the first
and last NVLink domains of a communicator are roots with one child and leaves of the other tree, so their NICs
carry half the bytes; a failover to the next NIC of the server brings that NIC only up to the others."""

import json

import numpy as np
import pytest

from conftest import run_cli
from topo import build_fabric, load_spec
from topo.engine.estimate import estimate
from topo.engine.stand_in_load import tree_edges


def test_tree_edges_of_the_double_binary_tree():
    # Sanders, Speck, Traff 2009 (NCCL 2.4's trees): every node is interior in at most one tree, so at most
    # 3 + 1 edges; the two roots have one child each and are leaves of the other tree: 2 edges
    edges = tree_edges(128)
    assert edges.max() == 4 and edges[0] == edges[127] == 2
    assert np.flatnonzero(edges == 2).tolist() == [0, 127]
    assert edges.sum() == 2 * 2 * 127  # two trees of 127 edges, each counted at both ends


@pytest.fixture(scope="module")
def superpod():
    return build_fabric(load_spec("dgx-h100-superpod"))


def tree(fabric):
    r = estimate(fabric, "all_reduce", "1GiB", algorithm="tree")
    return r.results[0].time_s, [n for n in r.notes if "bottleneck" in n]


def test_a_failed_nic_of_a_root_server_is_off_the_bottleneck_and_says_why(superpod):
    intact, _ = tree(superpod)
    for server in (0, 127):
        t, notes = tree(superpod.with_failures(f"nic{server}.3"))
        assert t == pytest.approx(intact, rel=1e-9)
        assert len(notes) == 1 and notes[0].startswith(f"nic{server}.3 is off tree's bottleneck: its stand-in "
                                                       f"nic{server}.4 carries its bytes")
        assert f"server {server} holds NVLink domain {server} of the 128" in notes[0]
        assert "2 tree edges where others have 4" in notes[0]


def test_a_failed_nic_on_the_bottleneck_gets_no_such_note(superpod):
    intact, _ = tree(superpod)
    t, notes = tree(superpod.with_failures("nic5.0"))
    assert t > 1.9 * intact and notes == []


def test_each_failed_nic_off_the_bottleneck_gets_its_own_line_in_text_and_json(superpod):
    """rep53 (section 197) left the note naming only the first failed NIC ("nic0.3 (and 1 more)"): each now has its
    line, its stand-in and its server's reason (both roots: domains 0 and 127 of 128, 2 tree edges of 4)."""
    intact, _ = tree(superpod)
    t, notes = tree(superpod.with_failures("nic0.3", "nic127.3"))
    assert t == pytest.approx(intact, rel=1e-9)
    assert len(notes) == 2 and not any("more" in n for n in notes)
    for server, note in zip((0, 127), notes):
        assert note.startswith(f"nic{server}.3 is off tree's bottleneck: its stand-in nic{server}.4 carries")
        assert f"server {server} holds NVLink domain {server} of the 128" in note
    args = ("estimate", "dgx-h100-superpod", "--size", "1G", "-a", "tree", "--fail", "nic0.3", "--fail", "nic127.3")
    doc = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert [n for n in doc["notes"] if "bottleneck" in n] == notes
    text = run_cli(*args, check=True).stdout
    assert all(f"# note: {n}\n" in text for n in notes)
