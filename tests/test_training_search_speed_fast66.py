"""The search's NVLS check builds only the traffic items whose collective may run NVLS (``step_traffic``'s
``only``): the same items, in the same order, as the whole list filtered afterwards (fast66)."""

import pytest

from topo.training.fp8_amax import AMAX_PHASE
from topo.training.model import load_model
from topo.training.nvls_buffers import may_run_nvls
from topo.training.parallel import make_layout
from topo.training.search import expert_dispatchers
from topo.training.step import comm_dim, nvls_communicators, pace_stages, step_traffic

LAYOUTS = [dict(tp=2, pp=4, dp=64, ep=32, global_batch=1024), dict(tp=8, pp=2, dp=32, ep=64, global_batch=512),
           dict(tp=1, pp=8, dp=128, ep=16, global_batch=2048, recompute="full", recompute_num_layers=2)]


def _layouts(m):
    for kw in LAYOUTS:
        base = make_layout(**kw).model_copy(update={"gpus_per_domain_used": 8})
        for fields in expert_dispatchers(m, {}):
            yield base.model_copy(update=fields)


@pytest.mark.parametrize("algorithm", ["auto", "nvls", "ring"])
def test_only_builds_the_items_the_whole_list_keeps(algorithm):
    """Every stage (and the busiest, None) of DeepSeek-V3 under three layouts and each dispatcher: the items built
    with ``only`` equal the whole list's that pass it, item by item (fails when ``add`` ignores ``only``, or tests
    something else than the collective). Under ``auto`` only NCCL's all-reduce has NVLS (the router's count
    reduction is one), under ``nvls`` every collective counts (NVLS is asked, so may run: may_run_nvls's doc)."""
    m = load_model("deepseek-v3-671b")
    may = lambda c: may_run_nvls(c, algorithm)  # noqa: E731
    seen = kept = 0
    for lay in _layouts(m):
        for stage in [None, *range(lay.pp)]:
            whole = step_traffic(m, lay, stage)
            got = step_traffic(m, lay, stage, only=may)
            assert got == [it for it in whole if may(it["collective"])], (lay.ep_dispatcher, stage)
            seen += len(whole)
            kept += len(got)
    assert seen > kept > 0 if algorithm == "auto" else seen >= kept > 0


def test_only_keeps_one_collective():
    """A test naming one collective keeps exactly the all-to-alls of the whole list (closed: the alltoall
    dispatcher's EP token and probs all-to-alls are there)."""
    m = load_model("deepseek-v3-671b")
    lay = make_layout(tp=2, pp=4, dp=64, ep=32, global_batch=1024, ep_dispatcher="alltoall")
    got = step_traffic(m, lay, 0, only=lambda c: c == "alltoall")
    assert got and {it["collective"] for it in got} == {"alltoall"}
    assert got == [it for it in step_traffic(m, lay, 0) if it["collective"] == "alltoall"]


@pytest.mark.parametrize("algorithm", ["auto", "nvls"])
def test_nvls_communicators_equal_the_filtered_whole(algorithm):
    """The NVLS check's communicators (pacing stages' items that may run NVLS, dispatcher part and the rest) equal
    those read off each pacing stage's whole list, for the three dispatchers, but for the FP8 amax group, which
    ``nvls_communicators`` adds itself."""
    m = load_model("deepseek-v3-671b")
    for lay in _layouts(m):
        for parts in ("all", "dispatcher", "dispatcher_free"):
            want = {(comm_dim(it), it["groups"]) for s in pace_stages(m, lay) for it in step_traffic(m, lay, s, parts)
                    if may_run_nvls(it["collective"], algorithm)}
            got = nvls_communicators(m, lay, algorithm, parts)
            assert want <= got and all(c[0] == AMAX_PHASE for c in got - want), (lay.ep_dispatcher, parts)
            if parts == "dispatcher":
                assert got == want
