"""GPU pairs: how ``topo train`` prices one layout on two GPUs against the published runs (issue 29).

Every two runs of ``data/reference/training_runs*.csv`` with the same model, release (the run id's prefix), precision
and layout shape (:func:`layout_pairs.shape`) but different GPUs (B200 and GB200, B300 and GB300: the same Blackwell
die on an x86 HGX board or beside a Grace CPU in an NVL72 rack) give a measured step ratio and topo's. Each side's
step is split into the GPU's wait for the host (``compute_by_module_s["host"]``) and the rest, so the table shows
what separates the two GPUs in topo: the GPUs' own rates (the rest's ratio) or the host (Grace's launches, priced at
``topo/data/compute/host_cpu.toml``'s factor), and which recipe columns the pair's rows set differently (a CUDA
graph scope, a dispatcher). Uses the committed kernels.toml values (no fit); hold-out rows are marked and read only.

    python benchmarks/gpu_pairs.py
"""

from __future__ import annotations

import sys

from _results import ROOT, arguments

sys.path.insert(0, str(ROOT))

from layout_pairs import release, shape  # noqa: E402  (one notion of a layout's shape and a run's release)

PAIRS = (("B200", "GB200"), ("B300", "GB300"))
"""The GPU pairs compared: each the same die on an HGX board (x86 host) and in an NVL72 rack (Grace host)."""

RECIPE_FIELDS = ("cuda_graph_scope", "micro_batch", "overlap_ep", "ep_dispatcher", "ep_flex_backend",
                 "recompute_modules", "moe_expert_kernels", "moe_expert_rank_capacity_factor", "ep_dispatch_bytes")
"""Layout fields a recipe may set per GPU: a pair whose rows differ in one of them is not the same run twice."""


def gpu_pairs(setups: list[dict]) -> list[tuple[dict, dict]]:
    """The (x86 side, Grace side) runs of :data:`PAIRS` that share model, release, precision, FP8 recipe, shape and
    scale (data-parallel size and global batch); of several such runs on one GPU, the first.

    Parameters
    ----------
    setups : list of dict
        One per run, as ``training_accuracy._setups`` builds them (``run``, ``gpu``, ``model``, ``lay``).

    Returns
    -------
    list of tuple
        Each pair once, in run order of the x86 side.
    """
    by_key: dict[tuple, dict[str, dict]] = {}
    for s in setups:
        lay = s["lay"]
        key = (release(s["run"]), s["model"].name, lay.precision, lay.fp8_recipe, shape(lay), lay.dp, lay.global_batch)
        by_key.setdefault(key, {}).setdefault(s["gpu"], s)
    return [(group[a], group[b]) for group in by_key.values() for a, b in PAIRS if a in group and b in group]


def differing_fields(a, b) -> list[str]:
    """The :data:`RECIPE_FIELDS` that layouts ``a`` and ``b`` set differently."""
    return [f for f in RECIPE_FIELDS if getattr(a, f, None) != getattr(b, f, None)]


def _line(a: dict, b: dict, ra, rb) -> str:
    ha, hb = (r.compute_by_module_s.get("host", 0.0) for r in (ra, rb))
    rest = (rb.step_time_s - hb) / (ra.step_time_s - ha)
    diff = ", ".join(f"{f}: {getattr(a['lay'], f)} / {getattr(b['lay'], f)}" for f in differing_fields(a["lay"], b["lay"]))
    held = " (hold-out)" if a["holdout"] or b["holdout"] else ""
    return (f"| {a['run']} / {b['run']}{held} | {a['step_s']:.3g} / {b['step_s']:.3g} | {b['step_s'] / a['step_s']:.3f} "
            f"| {ra.step_time_s:.3g} / {rb.step_time_s:.3g} | {rb.step_time_s / ra.step_time_s:.3f} "
            f"| {ha:.2f} / {hb:.2f} | {rest:.3f} | {diff or '-'} |")


def main() -> None:
    arguments(__doc__, write=False).parse_args()
    import topo
    from topo.training.comm import CommEngine
    from topo.training.step import estimate_step
    from training_accuracy import _setups

    fabrics: dict = {}
    lines = ["| runs (x86 / Grace) | measured (s) | ratio | topo (s) | ratio | host wait (s) | ratio less host "
             "| recipe columns that differ |", "|---|---|---|---|---|---|---|---|"]
    for a, b in gpu_pairs(_setups()):
        results = []
        for s in (a, b):
            if s["spec"] not in fabrics:
                name, over = s["spec"]
                fab = topo.build_fabric(topo.load_spec(name, list(over)))
                fabrics[s["spec"]] = (fab, CommEngine(fab))
            fab, eng = fabrics[s["spec"]]
            results.append(estimate_step(fab, s["model"], s["lay"], engine=eng, convention="6n"))
        lines.append(_line(a, b, *results))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
