"""An accumulating weight-gradient epilogue, hidden behind the MMAs or after them (``kernels.epilogue_extra_s``,
``kernels.toml`` ``[gemm] epilogue_overlap``).

Megatron-Core's ``gradient_accumulation_fusion`` has Transformer Engine run the weight-gradient GEMM with
``accumulate=True`` into ``main_grad`` (``general_gemm`` / ``general_grouped_gemm``, ``out=main_grad``): each output
element is read and written, 8 bytes in FP32 against the 2 of a BF16 write, which the tile's fitted fixed cost
(``tile_overhead_k``, fitted on DeepGEMM kernels that write BF16) already holds. A kernel that runs its epilogue
behind the next tile's MMAs (CUTLASS's Hopper ping-pong kernel; its SM100 kernels with two or more accumulator stages
in tensor memory) costs the longer of its tiles and its bytes; one that runs it after them (CUTLASS's Hopper
cooperative kernel: the warp groups that issue the MMAs run the epilogue) adds the extra bytes to its tiles. The
published times of the kernels training runs on say the latter on both generations measured: DeepGEMM's accumulating
FP8 wgrad on H800 (its PR #95) and Transformer Engine's cuBLAS expert module on B200 (Megatron-LM's benchmark).
"""

import csv
import math
from dataclasses import replace

import pytest

from conftest import ROOT
from topo.training.gpus import gpu_compute
from topo.training.kernels import _epilogue_overlap, epilogue_extra_s, gemm_s, kernel_model, tile_set

GPUS = ("A100", "H100", "H200", "H800", "B200", "B300", "GB200", "GB300")

# Megatron-LM's B200 expert-module benchmark (NVIDIA/Megatron-LM@222c2217 docs/user-guide/features/moe_frost_bf16.md,
# tests/performance_tests/frost_bf16_experts.py): 48 experts, hidden 5,120, expert FFN 2 x 2,304 (SwiGLU), 512 rows
# an expert; fc1's weight gradient is 5,120 x 4,608 over K = 512 rows, FP32 main_grad
M, N, K, G = 5120, 4608, 512, 48


@pytest.mark.parametrize("name", GPUS)
def test_the_extra_bytes_are_the_fp32_read_and_write_over_a_bf16_write(name):
    km = gpu_compute(name).kernels
    bw = km.hbm_Bps * km.gemm_memory_efficiency
    # closed form: (8 - 2) bytes an element of 48 outputs of 5,120 x 4,608 at the GEMM's share of HBM
    assert epilogue_extra_s(km, M, N, 8.0, G) == pytest.approx(6 * M * N * G / bw, rel=1e-12)
    assert epilogue_extra_s(km, M, N, 4.0, G) == pytest.approx(2 * M * N * G / bw, rel=1e-12)  # bf16 main_grad
    assert epilogue_extra_s(km, M, N, 2.0, G) == 0.0  # a BF16 write: in the tile's fitted fixed cost
    assert epilogue_extra_s(km, M, N, 1.0, G) == 0.0


@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("overlap", (0.0, 0.5, 1.0))
def test_an_accumulating_gemm_is_its_tiles_plus_the_unhidden_bytes_or_its_bytes(name, overlap):
    km = replace(gpu_compute(name).kernels, epilogue_overlap=overlap)
    bw = km.hbm_Bps * km.gemm_memory_efficiency
    tiles = gemm_s(km, M, N, K, "bf16", G, out_bytes=2.0)  # tile-bound when written in BF16 (checked below)
    assert tiles > (2 * (M * K + K * N) + 2 * M * N) * G / bw
    hbm = (2 * (M * K + K * N) + 8 * M * N) * G / bw
    expected = max(tiles + (1 - overlap) * 6 * M * N * G / bw, hbm)
    assert gemm_s(km, M, N, K, "bf16", G, out_bytes=8.0) == pytest.approx(expected, rel=1e-12)
    # a BF16 output (fprop, dgrad, FSDP2's new gradient) costs the same whatever the overlap
    assert gemm_s(km, K, N, M, "bf16", G) == gemm_s(replace(km, epilogue_overlap=1.0), K, N, M, "bf16", G)


def test_no_overlap_costs_more_than_full_overlap_by_at_most_the_extra_bytes():
    km = gpu_compute("H100").kernels
    full, none = replace(km, epilogue_overlap=1.0), replace(km, epilogue_overlap=0.0)
    t1, t0 = gemm_s(full, M, N, K, "bf16", G, out_bytes=8.0), gemm_s(none, M, N, K, "bf16", G, out_bytes=8.0)
    assert t1 < t0 <= t1 + epilogue_extra_s(km, M, N, 8.0, G) * (1 + 1e-12)


def test_an_overlap_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"gemm\.epilogue_overlap\.hopper: 1\.5 is not a share in \[0, 1\]"):
        kernel_model("H100", "hopper", 132, {"bf16": 989.4e12, "fp8": 1978.9e12}, 3.35e12,
                     overrides={"gemm": {"epilogue_overlap": 1.5}})


PUBLISHED_BALANCED_MS = 241.846 / 32  # moe_frost_bf16.md: TE GroupedTensor, balanced counts, 32 micro-batches
PUBLISHED_FROST_MS = 210.911 / 32  # cuDNN's CuTe DSL grouped kernels (Frost), same module and counts


def test_the_published_b200_module_needs_the_accumulation_after_the_tiles(tmp_path):
    from test_training_expert_counts import _experts_s
    km = gpu_compute("B200").kernels
    assert km.epilogue_overlap == 0.0  # kernels.toml [gemm] epilogue_overlap.blackwell
    ours_ms = _experts_s(tmp_path, 0.0) * 1e3
    # topo 7.02 ms against the published 7.56 (0.93; 7.24 ms, 0.96, before the session of 2026-12-06's refit moved the
    # dense-fitted blackwell_bf16 0.870 -> 0.879, which scales these GEMMs): with the accumulation hidden (overlap 1)
    # it was 5.83 (0.77), below even cuDNN's CuTe DSL kernels (6.59 ms); the fit sits on its bound, so the figure
    # stays above the model. The lower bound leaves room for the fitted fraction's movement, not for overlap 1.
    assert 0.90 < ours_ms / PUBLISHED_BALANCED_MS < 1.0, ours_ms
    assert ours_ms > PUBLISHED_FROST_MS


def _deepgemm_errors(overlap):
    """log(model / published) of DeepGEMM PR #95's FP32-accumulating FP8 wgrad rows on H800, on DeepGEMM's tiles with
    the bundled prologue and operand stream (fitted on its BF16-output rows: kernels.toml [gemm]) at DeepGEMM's own
    best efficiency on those rows (0.79, as tests/test_training_kernels.py test_deepgemm_table finds it)."""
    with open(ROOT / "data" / "reference" / "kernels_wgrad_accumulate.csv") as f:
        rows = list(csv.DictReader(f))
    with open(ROOT / "data" / "reference" / "kernels_gemm.csv") as f:
        dense = [r for r in csv.DictReader(f) if r["kernel"] == "dense"]
    km = gpu_compute("H800").kernels
    km = replace(km, tile_shapes={**km.tile_shapes, "fp8": tile_set("hopper", "fp8", "deepgemm_sm90")},
                 epilogue_overlap=overlap)

    def errs(table, e, out_key=None):
        return [math.log(2 * float(r["m"]) * float(r["n"]) * float(r["k"]) * float(r.get("groups", 1))
                         / gemm_s(km, float(r["m"]), float(r["n"]), float(r["k"]), "fp8", float(r.get("groups", 1)),
                                  efficiency=e, out_bytes=float(r[out_key]) if out_key else 2.0)
                         / 1e12 / float(r["tflops"])) for r in table]

    e = min((sum(abs(x) for x in errs(dense, e)) / len(dense), e) for e in [0.70 + 0.01 * i for i in range(25)])[1]
    assert e == pytest.approx(0.79)
    return errs(rows, e, "out_bytes")


def test_deepgemm_accumulating_wgrad_runs_its_epilogue_after_its_tiles():
    # H800 FP8, k 4,096 and 8,192, FP32 output accumulated (data/reference/kernels_wgrad_accumulate.csv): at the
    # bundled overlap (0) within 6% mean |log error| (signed +4.6%, worst +15.3% at 512 x 32,768 x 8,192); hidden
    # behind the MMAs (1) every row is 27-40% too fast
    assert gpu_compute("H800").kernels.epilogue_overlap == 0.0
    ours = _deepgemm_errors(0.0)
    assert sum(abs(x) for x in ours) / len(ours) < 0.06
    assert max(abs(x) for x in ours) < 0.16
    hidden = _deepgemm_errors(1.0)
    assert min(hidden) > 0.25
    half = _deepgemm_errors(0.5)  # and every share between is worse than none
    assert sum(abs(x) for x in half) > sum(abs(x) for x in ours)


def test_a_generation_the_overlap_table_does_not_list_is_a_data_error():
    # once a silent 1 (fully hidden) while every measured generation is 0
    with pytest.raises(ValueError, match=r"kernels\.toml: gemm\.epilogue_overlap: no value for generation 'hopper' "
                       r"\(listed: ampere, blackwell\)"):
        _epilogue_overlap({"epilogue_overlap": {"ampere": 0.0, "blackwell": 0.0}}, "hopper")
    assert _epilogue_overlap({"epilogue_overlap": {"hopper": 0.25}}, "hopper") == 0.25
    assert _epilogue_overlap({"epilogue_overlap": 0.5}, "hopper") == 0.5  # one value for every generation
