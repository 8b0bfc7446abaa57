"""Issue 29's placement item: on NVL72 racks a job runs 64 of each rack's 72 GPUs by default, or the step says
loudly which TP, CP, DP (or EP) group straddles racks because all 72 are used (rev41's audit: only EP groups were
named; a DP group pushed across two racks by the 72-GPU placement went unsaid)."""

import json

import numpy as np
import pytest

from conftest import run_cli
from topo.training.mapping import map_layout
from topo.training.parallel import make_layout

# Llama 3 70B, TP8 PP2 DP8 on 128 GPUs of two NVL72 racks; rank order tp-cp-ep-dp-pp: stage 1 is ranks 64..127
JOB = ["train", "gb200-nvl72-superpod", "--model", "llama3-70b", "--tp", "8", "--pp", "2", "--dp", "8",
       "--global-batch", "64", "--json"]


def _run(*extra):
    return json.loads(run_cli(*JOB, *extra, check=True).stdout)


def test_dp_group_pushed_across_racks_by_the_72_gpu_placement_is_named():
    """At 72 per rack, stage 1's DP group (ranks 64, 72, ..., 120) has rank 64 on rack 0 (GPUs 64-71) and the rest
    on rack 1: two domains, where 64 per rack keeps every stage in one rack. The note says so, and the DP
    collectives' rows agree (2 domains per group); at 64 per rack neither."""
    full = _run("--gpus-per-domain-used", "72")
    notes = [n for n in full["notes"] if n.startswith("placement: a DP group")]
    assert notes == ["placement: a DP group (8 GPUs) spans 2 NVLink domains, where 64 of each 72-GPU domain "
                     "would keep it in 1: its collectives cross the network between domains "
                     "(gpus_per_domain_used = 64 avoids it)"]
    assert max(c["domains_per_group"] for c in full["comm"] if c["dim"] == "dp") == 2
    # TP8 groups fit 9 to a rack either way: no TP note
    assert not any(n.startswith("placement: a TP group") for n in full["notes"])
    default = _run()  # 64 of 72 by default, said in its own note
    assert default["layout"]["gpus_per_domain_used"] == 64
    assert not any(n.startswith("placement: a ") for n in default["notes"])
    assert any(n.startswith("placement: 64 of each 72-GPU") for n in default["notes"])
    assert max(c["domains_per_group"] for c in default["comm"] if c["dim"] == "dp") == 1


def test_text_prints_the_note():
    out = run_cli(*JOB[:-1], "--gpus-per-domain-used", "72", check=True).stdout
    assert "note: placement: a DP group (8 GPUs) spans 2 NVLink domains" in out


def test_straddles_closed_form():
    """Mapping.straddles by hand: 128 ranks on racks of 72 from GPU 0, DP groups of 8 at stride 8 within each
    64-rank stage; a CP group of 16 at stride 1 likewise; from a first GPU inside a rack."""
    lay = make_layout(tp=8, pp=2, dp=8, global_batch=64, gpus_per_domain_used=72)
    m = map_layout(lay, 72, 144)
    dp = m.groups("dp")
    stage1 = dp[np.isin(dp[:, 0], [64])][0]
    assert list(stage1) == [64, 72, 80, 88, 96, 104, 112, 120]
    assert m.straddles("dp", 72) == (2, 1)
    assert m.straddles("tp", 72) == (1, 1)
    # a CP group of 16 at stride 1 (cp fastest): ranks 64..79 cross rack 0's end at 72; at 64 per rack, 64..79 sit
    # on rack 1 (GPUs 72..87)
    lay = make_layout(cp=16, dp=8, global_batch=64, seq_len=65536, rank_order="cp-tp-ep-dp-pp",
                      gpus_per_domain_used=72)
    m = map_layout(lay, 72, 144)
    assert m.straddles("cp", 72) == (2, 1)
    # from GPU 8: stage 0 on GPUs 8..71 (rack 0), stage 1's ranks 64..71 on GPUs 72..79 and the rest after them
    # (rack 1), at 72 per rack and at 64 alike
    lay = make_layout(tp=8, pp=2, dp=8, global_batch=64, gpus_per_domain_used=72, first_gpu=8)
    assert map_layout(lay, 72, 216).straddles("dp", 72, first_gpu=8) == (1, 1)


@pytest.mark.parametrize("used", [64, 72])
def test_power_of_two_placement_never_notes(used):
    """At a power-of-two placement (64 per rack) the straddle note never fires; the domains the groups span there
    are the placement's own."""
    lay = make_layout(tp=8, pp=2, dp=8, global_batch=64, gpus_per_domain_used=used)
    m = map_layout(lay, 72, 144)
    placed, p2 = m.straddles("dp", used)
    assert placed == m.domains_spanned("dp")
    if used == 64:
        assert placed == p2
