"""The Megatron-LM GB200 DeepSeek-V3 study's optimization ladder, step by step, against topo (issue 29).

NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization@1d9edcf8 sec. 3 publishes one TFLOP/s per GPU
for each step of its optimization history (256 GB200, TP1 PP8 VPP4 EP32, MXFP8, layout ``Et|(tt|)*30L``). Its
last line is the hold-out run ``mcore_gb200_deepseekv3_mxfp8``; each earlier step is that run's layout with the
step's settings undone (sec. 1 and 2: the NCCL all-to-all dispatcher, no CUDA graphs, the unfused router,
``--recompute-modules mlp up_proj``). Every step counts the same FLOPs, so topo's TFLOP/s is the last line's
970.01 x its measured step over topo's step, and each step's measured time the same TFLOP over its
published rate (the change from one step to the next is what the step's setting bought, published and in topo). The steps topo has no field for (permute and ``torch.zeros`` fusion,
DeepEP tuning, CPU-side work, PDL, the shared expert's graph, cuDNN norm fusion) are not priced: the step before
them stands in. Also prints the DGX Cloud 25.05 DeepSeek-V3 rows (GB200 eager on Grace, H100, and a graphed
GB200 row) for the same host question (docs/calibration-findings.md sections 134 and 185).

    python benchmarks/host_ladder.py        # a few seconds; the model as committed (no fit)
"""

from __future__ import annotations

import training_accuracy as ta  # also puts the repository on sys.path
from _results import arguments

import topo  # noqa: E402
from topo.training.parallel import make_layout  # noqa: E402
from topo.training.step import estimate_step  # noqa: E402

STUDY_RUN = "mcore_gb200_deepseekv3_mxfp8"
LAST_TFLOPS = 970.01
ROWS = ("dgxc2505_gb200_deepseekv3_bf16_128", "dgxc2505_gb200_deepseekv3_bf16_256",
        "dgxc2505_gb200_deepseekv3_bf16_512", "dgxc2505_h100_deepseekv3_bf16_512", "mb2511_gb200_deepseekv3_bf16")


def ladder(kw: dict) -> list[tuple[str, float, dict]]:
    """The study's steps topo can express, each ``(label, published TFLOP/s, layout keywords)``; ``kw`` is the
    last line's layout."""
    eager = {k: v for k, v in kw.items() if k not in ("ep_comm_sms", "moe_counts_aligned")}
    base = dict(eager, ep_dispatcher="alltoall", cuda_graph_scope=(), moe_router_fusion=False,
                recompute_modules=("mlp", "mla_up_proj"))
    fused = dict(base, moe_router_fusion=True)
    deepep = dict(fused, ep_dispatcher="deepep", ep_flex_backend="deepep")
    no_up = dict(deepep, recompute_modules=("mlp", "moe_act"))
    graphed = dict(no_up, cuda_graph_scope=("attn", "moe_router", "moe_preprocess"))
    return [("baseline (eager, NCCL all-to-all)", 494.46, base), ("+ router fusion", 540.00, fused),
            ("+ DeepEP", 566.07, deepep), ("- up_proj recompute", 610.71, no_up),
            ("+ CUDA graphs (attn, router, preprocess)", 663.27, graphed), ("last line (HybridEP, ...)", 970.01, kw)]


def main() -> None:
    arguments(__doc__, write=False).parse_args()
    rows = {r["run_id"]: r for r, _ in ta._published_rows()}
    fabrics = {}

    def priced(row, kw=None):
        model = ta._row_model(row)
        mine = ta._recipe_layout_kw(row, model)
        ta._framework_kw(row, model, mine)
        ta._run_kw(row, model, mine)
        mine["tp_overlap_config"] = ta.tp_overlap_config(row, model)
        spec = ta.SPECS[row["system"]]
        if spec not in fabrics:
            fabrics[spec] = topo.build_fabric(topo.load_spec(spec[0], list(spec[1])))
        return mine, estimate_step(fabrics[spec], model, make_layout(**(kw or mine)), convention="6n").step_time_s

    print("| run | measured (s) | topo (s) | error |\n|---|---:|---:|---:|")
    for rid in ROWS:
        measured_s = float(rows[rid]["step_time_s"])
        step_s = priced(rows[rid])[1]
        print(f"| `{rid}` | {measured_s:.2f} | {step_s:.2f} | {100 * (step_s / measured_s - 1):+.1f}% |")
    row = rows[STUDY_RUN]
    kw, _ = priced(row)
    flops_s = LAST_TFLOPS * float(row["step_time_s"])  # TFLOP a step: every step counts the same
    print("\n| step (study sec. 3) | published TFLOP/s | topo | error | step (s): published / topo "
          "| change from the step above (s): published / topo |\n|---|---:|---:|---:|---:|---:|")
    before = None
    for label, published, step_kw in ladder(kw):
        measured_s, step_s = flops_s / published, priced(row, step_kw)[1]
        change = f"{measured_s - before[0]:+.2f} / {step_s - before[1]:+.2f}" if before else "-"
        print(f"| {label} | {published:.1f} | {flops_s / step_s:.1f} | {100 * (step_s / measured_s - 1):+.1f}% "
              f"| {measured_s:.2f} / {step_s:.2f} | {change} |")
        before = (measured_s, step_s)


if __name__ == "__main__":
    main()
