"""The host line's EP cover follows the combined 1F1B's pairing (epov65's Left 1; walk24's hybrid was 13 ms slower
with ``--overlap ep=on`` than without, where nothing paired).

Between a dropless MoE layer's tokens-per-expert syncs the host launches behind the dispatch and combine on the GPU
(``step._ep_cover_s``). Under ``overlap_ep`` a pass runs its exchange beside another micro-batch's compute only
where it pairs; a warm-up or cool-down pass with no partner (NVIDIA/Megatron-LM@00611e6e ``schedules.py``
``get_pp_rank_microbatches``: ``(p - 1) x 2 + (v - 1) x p`` warm-up chunks on stage 0, one more under the overlap)
runs the dispatch alone while the compute stream waits, as without the overlap. So the cover is the full one times
the unpaired share (``ep_overlap.unpaired_share``), the same share ``step._paired_ep_exposed`` exposes whole.
"""

import pytest

import topo
from topo.training.ep_overlap import unpaired_share
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")  # dropless: every MoE layer syncs on its tokens per expert


@pytest.fixture(scope="module")
def h100():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))


def _layout(global_batch: int, overlap_ep: bool):
    return make_layout(tp=2, pp=2, vpp=4, dp=64, ep=8, etp=2, global_batch=global_batch, seq_len=4096,
                       ep_dispatcher="alltoall", overlap_ep=overlap_ep)


def test_nothing_paired_gives_the_step_without_the_overlap(qwen, h100):
    """2 micro-batches x vpp 4 = 8 forwards, stage 0's warm-up (2 - 1) x 2 + (4 - 1) x 2 + 1 = 9 holds them all:
    no pass pairs, so the host sees the whole cover and the step is the one without the overlap, to the last bit
    (main gave the overlap a cover of 0: 573.4 ms against 539.4 ms)."""
    on, off = _layout(128, True), _layout(128, False)
    assert unpaired_share(on) == 1.0
    r_on = estimate_step(h100, qwen, on, contention=False)
    r_off = estimate_step(h100, qwen, off, contention=False)
    assert r_off.ep_cover_s > 0
    assert r_on.ep_cover_s == r_off.ep_cover_s
    assert r_on.compute_by_module_s["host"] == pytest.approx(r_off.compute_by_module_s["host"], rel=1e-12)
    assert r_on.step_time_s == pytest.approx(r_off.step_time_s, rel=1e-12)


def test_a_partly_paired_step_covers_with_its_unpaired_share(qwen, h100):
    """32 micro-batches: 9 of stage 0's 128 forwards have no partner; the cover is 9/128 of the full one."""
    on = _layout(2048, True)
    assert unpaired_share(on) == pytest.approx(9 / 128, rel=1e-12)
    full = estimate_step(h100, qwen, _layout(2048, False), contention=False).ep_cover_s
    assert estimate_step(h100, qwen, on, contention=False).ep_cover_s == pytest.approx(9 / 128 * full, rel=1e-12)
