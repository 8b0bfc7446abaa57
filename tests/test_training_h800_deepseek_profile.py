"""DeepSeek-V3 on H800 (``deepseekv3_h800_2048``) against DeepSeek's own published training profile (issue 29: the
fine-grained MoE rows on Hopper).

deepseek-ai/profile-data@4496024 ``train.json`` (PyTorch Profiler, device "NVIDIA H800", 132 SMs, world size 64;
README: "a pair of individual forward and backward chunks in DualPipe. Each chunk contains 4 MoE layers. The parallel
configuration aligns with DeepSeek-V3 pretraining settings: EP64, TP1 with 4K sequence length. And the PP
communication is not included", routing simulated "absolutely balanced"). Read from its ``traceEvents`` (kernels,
memcpys and memsets on the GPU):

- the pair spans 129.012 ms, first kernel start to last kernel end (union of every stream's busy time 128.515 ms);
- the compute stream (7) is busy 118.193 ms: the forward chunk of one micro-batch and the backward chunk of another,
  so one micro-batch's forward and backward through 4 MoE layers, with the expert all-to-alls beside it on stream 27
  (114.521 ms busy) and part of the weight-gradient GEMMs on stream 23 (11.355 ms);
- the all-to-alls are DeepEP V1's internode kernels (``dpsk::ep::internode::notify_dispatch``, ``dispatch``,
  ``cached_notify``, ``combine``, each on a 20-block grid: DeepSeek-V3 sec. 3.2.2's 20 SMs), with no Megatron-Core
  permutation: the row's ``moe_dispatcher`` / ``moe_flex_backend`` are ``deepep`` / ``deepep``.

topo's pacing stage under DualPipe holds the embedding, the heads and the MTP module (its layer split is topo's
assumption: DeepSeek does not publish it), so the comparison is a middle pipeline rank's, whose two stages hold 4 MoE
layers each, as the profile's chunks do.
"""

import sys

import pytest

import topo
from conftest import ROOT
from topo.training.comm import CommEngine
from topo.training.op_table import step_stage_table
from topo.training.step import estimate_step

sys.path.insert(0, str(ROOT / "benchmarks"))
import training_accuracy  # noqa: E402

PROFILE_SPAN_S = 129.012e-3  # the pair's GPU span (train.json, first kernel start to last kernel end)
PROFILE_COMPUTE_STREAM_S = 118.193e-3  # stream 7's busy time: one micro-batch through 4 MoE layers, both passes


@pytest.fixture(scope="module")
def h800():
    """The benchmark's DeepSeek-V3 H800 setup, its step and its stage table."""
    (s,) = [s for s in training_accuracy._setups() if s["run"] == "deepseekv3_h800_2048"]
    name, over = s["spec"]
    fabric = topo.build_fabric(topo.load_spec(name, list(over)))
    step = estimate_step(fabric, s["model"], s["lay"], engine=CommEngine(fabric), convention="6n")
    return s, step, step_stage_table(fabric, s["model"], s["lay"])


def _middle_rank(stages: list[dict]) -> dict:
    """A pipeline rank whose stages are all MoE layers, 4 each (DualPipe: a rank runs two mirrored stages)."""
    rank = stages[len(stages) // 4]
    assert rank["layers"] == 4 and not rank["ends"]
    return rank


def test_deepseeks_run_is_the_flex_dispatcher_with_deepep_v1(h800):
    """The row is laid out as the profile runs: DualPipe, no TP, EP 64 over 8 nodes, the flex dispatcher with DeepEP
    V1's internode kernels on 20 SMs and FP8 dispatch; so node-limited routing caps a token's copies at its 4 nodes
    (``step.ep_copies``), which Megatron-Core's all-to-all dispatcher would not."""
    s, step, _ = h800
    lay = s["lay"]
    assert (lay.pipeline_schedule, lay.tp, lay.ep, lay.pp) == ("dualpipe", 1, 64, 16)
    assert (lay.ep_dispatcher, lay.ep_flex_backend, lay.ep_comm_sms, lay.ep_dispatch_bytes) == ("deepep", "deepep",
                                                                                              20, 1.0)
    assert "deepep" in s["row"]["note"].lower() and "profile-data" in s["row"]["note"]


def test_a_middle_rank_computes_what_the_profile_measured(h800):
    """One micro-batch's forward and backward (with the recomputed norms, MLA up-projections and SwiGLU) through 4
    MoE layers: topo's middle rank within 4% of the profile's compute stream, 118.193 ms (the all-to-all
    dispatcher's two permutations made it 125.0 ms, +5.8%)."""
    _, _, stages = h800
    assert _middle_rank(stages)["microbatch_s"] == pytest.approx(PROFILE_COMPUTE_STREAM_S, rel=0.04)


def test_the_pair_with_its_exposed_all_to_alls_spans_what_the_profile_measured(h800):
    """The pair's span is its compute and what DualPipe leaves of the all-to-alls beside it: topo's middle rank
    plus the step's exposed expert communication per micro-batch (the busiest rank's, an approximation for a middle
    rank's) within 5% of 129.012 ms (with the all-to-all dispatcher: 142.9 ms, +10.7%)."""
    s, step, stages = h800
    pair_s = _middle_rank(stages)["microbatch_s"] + step.breakdown_s["ep"] / s["lay"].microbatches
    assert pair_s == pytest.approx(PROFILE_SPAN_S, rel=0.05)
