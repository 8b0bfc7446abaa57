"""The caches that make a training step cheap to evaluate again (the accuracy fit, ``topo train --search``) give the
numbers of an uncached evaluation, and each is keyed on everything its value depends on: every test here changes one
part of a key and checks that the answer changes with it (a key that dropped that part would return the first)."""

import numpy as np
import pytest

import topo
from topo.engine.profiles import _profile_on_cpu, compose_profile, fabric_profile, profile_for, profile_parts
from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import (_stage_row, bf16_layers, block_time, pipeline_units, rank_computes)
from topo.training.parallel import make_layout


def test_the_cached_profile_is_the_composed_one_and_keyed_on_the_host_cpu():
    """NCCL's network overhead per step is 2 us on AMD hosts and 1 us on Intel (NVIDIA/nccl src/graph/tuning.cc
    getNetOverhead, the profile's ``net_overhead_amd_us``): asking for Intel first must not answer AMD with it."""
    composed = compose_profile(profile_parts("hopper", "infiniband_ndr"), "hopper+infiniband_ndr")
    assert profile_for("hopper", "infiniband_ndr") == composed
    intel = _profile_on_cpu("hopper", "infiniband_ndr", "intel")
    amd = _profile_on_cpu("hopper", "infiniband_ndr", "amd")
    assert intel.net_overhead_s == pytest.approx(1e-6) and amd.net_overhead_s == pytest.approx(2e-6)
    assert _profile_on_cpu("ampere", "infiniband_hdr", "intel").name == "ampere+infiniband_hdr"  # generation, network
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    assert fabric_profile(f) == composed.for_cpu(f.spec.cpu_vendor)


def test_cached_collective_times_equal_a_fresh_engines_and_follow_size_collective_and_groups():
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    cached = CommEngine(f)
    M = np.arange(256).reshape(-1, 8)
    asks = [("all_reduce", M, 1e6), ("all_reduce", M, 1e9), ("all_gather", M, 1e9),
            ("all_reduce", M.T.copy(), 1e9), ("reduce_scatter", M, 1e9)]
    first = [cached.time(*a) for a in asks]
    again = [cached.time(*a) for a in asks]
    fresh = [CommEngine(f).time(*a) for a in asks]
    assert first == again == fresh
    times = [t.time_s for t in first]
    assert times[0] < times[1]  # the size is in the key
    assert times[1] != times[2]  # the collective
    assert times[1] != times[3]  # the group matrix: 32 groups in NVLink vs 8 across the rails
    assert first[4].collective == "reduce_scatter" and first[4].time_s == times[2]  # one curve, its own name


def test_cached_only_still_answers_none_for_a_curve_never_routed():
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    eng = CommEngine(f)
    M = np.arange(64).reshape(-1, 8)
    assert eng.time("all_reduce", M, 1e6, cached_only=True) is None
    t = eng.time("all_reduce", M, 1e6)
    assert eng.time("all_reduce", M, 1e6, cached_only=True) == t


def test_stages_alike_share_one_row_and_stages_that_differ_in_bf16_layers_do_not():
    """Llama 3 8B (32 layers) on pp 4, FP8 with its first 9 layers in BF16: stages 1 and 2 hold the same units
    (8 dense layers each), stage 1's first in BF16 (layer 8), stage 2's none; each rank's compute equals its stage
    computed alone (no memo), so a row keyed on the units without their BF16 flags would give stage 2 stage 1's."""
    model, gpu = load_model("llama3-8b"), gpu_compute("H100")
    lay = make_layout(tp=1, pp=4, dp=1, micro_batch=1, global_batch=8, seq_len=8192, precision="fp8",
                      flash_attention=True, recompute="none", num_layers_at_start_in_bf16=9)
    units, flags = pipeline_units(model, lay), bf16_layers(model, lay)
    assert units[1] == units[2] and flags[1] != flags[2]
    lay_bf16 = lay.model_copy(update={"precision": "bf16"})

    def bt(kind, bf16=False):
        return block_time(model, lay_bf16 if bf16 else lay, gpu, kind)

    alone = [_stage_row(lay, u, fl, bt, 0.0) for u, fl in zip(units, flags)]
    by_stage = {sc.busiest: sc for sc in rank_computes(model, lay, gpu)}
    assert [by_stage[i].forward_s for i in range(4)] == [r[0] for r in alone]
    assert [by_stage[i].backward_s for i in range(4)] == [r[1] for r in alone]
    assert [by_stage[i].by_module_s for i in range(4)] == [r[5] for r in alone]
    assert by_stage[1].forward_s > by_stage[2].forward_s  # its BF16 layer is slower than FP8
    plain = make_layout(tp=1, pp=4, dp=1, micro_batch=1, global_batch=8, seq_len=8192, precision="fp8",
                        flash_attention=True, recompute="none")
    same = {sc.busiest: sc for sc in rank_computes(model, plain, gpu)}
    assert same[1].forward_s == same[2].forward_s and same[1].by_module_s is not same[2].by_module_s
