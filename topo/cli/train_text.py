"""Lines ``topo train`` prints for one step and a region's job alike: the memory per GPU (fits or not) and the
step's uncertainty interval, from a step's dicts (:meth:`topo.training.result.StepResult.to_dict`'s ``memory``,
``layout`` and ``uncertainty``), so the one-site and the several-site outputs say them the same way."""

from __future__ import annotations

import shlex

from ..training.memory import ACTIVATION_PARTS, fragmentation_margin_bytes, state_convention
from ..training.parallel import DEFAULT_ORDER
from .output import table
from ..units import format_gpu_hours, format_in, format_time

__all__ = ["gb", "gpu_hours_text", "memory_line", "activation_table", "tight_memory_note", "not_fit_line", "interval_head", "uncertainty_line", "span_line", "runs_on", "bias_text", "dispatcher_searched",
           "dispatcher_cell", "row_flags", "command_options", "given_flags", "model_flag"]


def gb(x: float) -> str:
    """Bytes in GB, one decimal."""
    return format_in(x, "GB", ".1f")


def memory_line(m: dict, layout: dict) -> str:
    """The memory per GPU line: each part, the total against the GPU's capacity, ``fits`` or ``DOES NOT FIT by``."""
    return (f"memory per GPU  weights {gb(m['weights_bytes'])}  gradients {gb(m['gradients_bytes'])}  "
            f"optimizer {gb(m['optimizer_bytes'])}  activations {gb(m['activations_bytes'])}  "
            + (f"buffers {gb(m['buffers_bytes'])}  " if m.get("buffers_bytes") else "")
            + (f"runtime {gb(m['reserved_bytes'])}  " if m.get("reserved_bytes") else "")
            + (f"NCCL {gb(m['nccl_bytes'])}  " if m.get("nccl_bytes") else "")
            + (f"EP buffers {gb(m['ep_buffers_bytes'])}  " if m.get("ep_buffers_bytes") else "")
            + (f"NVLS {gb(m['nvls_bytes'])}  " if m.get("nvls_bytes") else "")
            + f"total {gb(m['total_bytes'])} of {gb(m['capacity_bytes'])}: "
            + ("fits" if m["fits"] else f"DOES NOT FIT by {gb(m['short_bytes'])}") + f" ({state_convention(layout)})")


def activation_table(m: dict) -> str:
    """``--memory``: the activations of the memory line's stage by what holds them (``m``: a step's ``memory``
    dict, its ``activations_by_kind_bytes``), each in GB and as a share, and their sum, the line's figure."""
    parts = m.get("activations_by_kind_bytes") or {}
    total = m["activations_bytes"]
    rows = [[ACTIVATION_PARTS[k], gb(v), f"{v / total:.1%}" if total else "-"] for k, v in parts.items()]
    rows.append(["activations (the memory line's)", gb(total), "100.0%" if total else "-"])
    return (f"activations per GPU on pipeline rank {m['stage']} by what holds them (one micro-batch's layers, then "
            "what the schedule's further micro-batches in flight add)\n"
            + table(rows, ["part", "memory", "share"], right=[False, True, True]))


def tight_memory_note(rows: list[tuple[str, float, float]]) -> str:
    """A note on layouts that fit with less free than the caching allocator's fragmentation took in published runs
    (:func:`~topo.training.memory.fragmentation_margin_bytes`, not in the total): ``rows`` of (what, total bytes,
    capacity bytes); "" when none is that tight (walk28: #1 held 85.4 of 85.5 GB)."""
    margin = fragmentation_margin_bytes()
    tight = [(what, cap - total) for what, total, cap in rows if 0 <= cap - total < margin]
    if not tight:
        return ""
    said = ", ".join(f"{what} {gb(free)}" for what, free in tight)
    return (f"free memory per GPU under {gb(margin)} ({said}): the total does not count the PyTorch caching "
            f"allocator's fragmentation, which took {gb(margin)} on average in GMLake's LLM runs (arXiv 2401.08156; "
            "topo/data/compute/memory_headroom.toml), so such a layout may run out of memory; "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces it, or take a layout with more free")


def not_fit_line(m: dict, gpu: str) -> str:
    """The line a layout that does not fit leads with (walk20: its step time came first and was quoted); "" when
    it fits. ``m``: a step's ``memory`` dict."""
    if m["fits"]:
        return ""
    return (f"DOES NOT FIT: {gb(m['total_bytes'])} per GPU (stage {m['stage']}), {gb(m['short_bytes'])} more than "
            f"the {gpu}'s {gb(m['capacity_bytes'])}; this run cannot start, the step time and MFU below are what it "
            "would take if it could")


def interval_head(low_s: float, high_s: float, of: str = "") -> str:
    """How an interval's line begins (one site's step and a region's step across the sites alike):
    ``uncertainty low - high{of}: ``."""
    return f"uncertainty {format_time(low_s)} - {format_time(high_s)}{of}: "


def uncertainty_line(u: dict, of: str = "") -> str:
    """The step's out-of-family interval (``low_s - high_s``) and the runs it rests on; ``of`` names the step it
    bounds when that is not the line above's (a region's: one site's share); "" when there is no interval."""
    if not u.get("runs"):
        return ""
    return (f"{interval_head(u['low_s'], u['high_s'], of)}on {runs_on(u)} "
            f"of {u['label']} models whose family the fit never saw, half were within "
            f"{u['p50']:.0%} of the measured step, nine in ten within {u['p90']:.0%}{bias_text(u)}"
            + (f"\n{span_line(u)}" if u.get("span") else ""))


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


OUTSIDE_WORDS = {"gpus": lambda v: _count(v, "GPU", "GPUs"), "pp": lambda v: f"pp {v}", "cp": lambda v: f"cp {v}",
                 "ep": lambda v: f"ep {v}", "ep_domains": lambda v: f"EP across {v} NVLink domains",
                 "generation": lambda v: f"{v.capitalize()} (no run)",
                 "recipe": lambda v: f"{v.upper()} GEMMs (no scored run: every published {v.upper()} run is held out)"}
"""How the span line words each figure of ``outside`` (:func:`topo.training.uncertainty.outside_span`)."""


def span_line(u: dict) -> str:
    """What an interval's runs span (``u['span']``: families, generations, GPUs, pp, cp, EP and the NVLink domains
    an expert group crossed) and, where ``u['outside']`` says so, where the job lies outside every one of them
    (walk35: a 1,024-GPU pp 2 job's interval rested on 7 runs of 8-16 GPUs without a pipeline, unsaid); "" when
    the interval has no span (a step_uncertainty.toml from before it was written)."""
    sp = u.get("span")
    if not sp:
        return ""
    gens = ", ".join(f"{n} {g.capitalize()}" for g, n in zip(sp["generations"], sp["generation_runs"]))
    gpus = f"{sp['gpus_min']:,}" + (f"-{sp['gpus_max']:,}" if sp["gpus_max"] != sp["gpus_min"] else "") + " GPUs"
    parts = [_count(len(sp["families"]), "family", "families") + f" ({', '.join(sp['families'])})", gens, gpus,
             "no pipeline" if sp["pp_max"] == 1 else f"pp up to {sp['pp_max']}",
             "no context parallelism" if sp["cp_max"] == 1 else f"cp up to {sp['cp_max']}"]
    if sp["ep_max"] > 1:
        parts.append(f"ep up to {sp['ep_max']} " + ("inside an NVLink domain" if sp["ep_domains_max"] == 1 else
                                                    f"across up to {sp['ep_domains_max']} NVLink domains"))
    out = u.get("outside")
    where = "" if out is None else ("; this job lies inside them" if not out else
                                    "; this job is outside them: " + ", ".join(OUTSIDE_WORDS[k](v)
                                                                               for k, v in out.items()))
    return f"interval from {u['runs']} {u['label']} runs ({'; '.join(parts)}){where}"


def runs_on(u: dict) -> str:
    """Which runs an interval rests on: its GPU generation's, or its group's on every generation (too few on its own,
    step_uncertainty.toml's ``generation_min_runs``)."""
    if u.get("generation", "all") != "all":
        return f"{u['runs']} published {u['generation'].capitalize()} runs"
    return f"{u['runs']} published runs (all GPU generations)"


def bias_text(u: dict) -> str:
    """The runs' signed median error, shown and not applied: which way the model leans there."""
    med = u.get("median", float("nan"))
    if med != med:
        return ""
    return f"; median error {med:+.1%} (predicted {'faster' if med < 0 else 'slower'} than measured; not applied)"


def dispatcher_searched(layouts: list[dict], held: dict, moe: bool) -> bool:
    """Whether a search chose the expert dispatcher of its ranked ``layouts`` (an MoE model's, ``moe``, with an
    expert group of more than one GPU, and ``held``, the fields ``--layout`` fixes, holds neither
    ``ep_dispatcher = "alltoall"`` nor the flex dispatcher with its backend): its table then says which (place61;
    walk24: a region's table too, whose rows otherwise looked alike while their steps differed; rev65: a dense
    model's TP 2 rows are no expert group)."""
    chosen = held.get("ep_dispatcher") == "alltoall" or {"ep_dispatcher", "ep_flex_backend"} <= held.keys()
    return moe and not chosen and any(L["ep"] * (L["etp"] or L["tp"]) > 1 for L in layouts)


def dispatcher_cell(L: dict) -> str:
    """A layout's expert dispatcher as a search table names it: ``alltoall``, or ``deepep/BACKEND`` (the flex
    dispatcher on HybridEP's or DeepEP's kernels; ``-`` with no expert group to dispatch over)."""
    if L["ep"] * (L["etp"] or L["tp"]) == 1:
        return "-"
    return L["ep_dispatcher"] if L["ep_dispatcher"] != "deepep" else f"deepep/{L['ep_flex_backend']}"


def toml_value(v) -> str:
    """A layout field's value as the layout's TOML spells it (true, "all_gather", ["attn"]).

    >>> toml_value(("linear_qkv=bf16", "mtp=bf16"))
    '["linear_qkv=bf16", "mtp=bf16"]'
    """
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return f'"{v}"' if isinstance(v, str) else f"{v:g}" if isinstance(v, float) else str(v)


def row_flags(L: dict, dispatcher: bool, held: dict | None = None) -> str:
    """A search row's layout as the ``topo train`` flags that step it again: the sizes, and every field the
    search chose that differs from the flags' default (sharding, recomputation, rank order and, where the table
    has a ``dispatcher`` column, the flex dispatcher as ``--layout``), with the fields ``--layout`` ``held`` in
    every layout tried, all in one ``--layout`` of pairs quoted for a shell. walk26: "a row's sizes" rerun without
    the row's ``deepep/hybridep`` dispatcher stepped DeepSeek-V3 in 3.630 s where the row said 2.716 s; walk39: a
    search holding ``fp8_recipe = "nvfp4"`` printed a command that stepped per-tensor FP8."""
    out = [f"--tp {L['tp']}", f"--cp {L['cp']}", f"--pp {L['pp']}"] + [f"--vpp {L['vpp']}"] * (L["vpp"] > 1)
    out += [f"--dp {L['dp']}", f"--ep {L['ep']}"] + [f"--etp {L['etp']}"] * (L.get("etp") not in (None, L["tp"]))
    out += [f"--micro-batch {L['micro_batch']}"] * (L["micro_batch"] != 1)
    out += [f"--recompute {L['recompute']}"] * (L["recompute"] != "none")
    out += [f"--recompute-modules {','.join(L['recompute_modules'])}"] * bool(L.get("recompute_modules"))
    out += [f"--remat-policy {L['remat_policy']}"] * bool(L.get("remat_policy"))
    out += [f"--dp-sharding {L['dp_sharding']}"] * (L["dp_sharding"] != "zero1")
    out += [f"--rank-order {L['rank_order']}"] * (L["rank_order"] != DEFAULT_ORDER)
    pairs = [f"{k}={toml_value(v)}" for k, v in (held or {}).items()]
    if dispatcher and L["ep"] * (L["etp"] or L["tp"]) > 1 and L["ep_dispatcher"] == "deepep":
        pairs += [f"ep_dispatcher=deepep,ep_flex_backend={L['ep_flex_backend']}"]
    if pairs:
        out.append(f"--layout {shlex.quote(','.join(pairs))}")
    return " ".join(out)


# What a search row sets itself (row_flags) or what only a search reads: not repeated from the command's own options.
_ROW_SET = frozenset({"help", "model", "global_batch", "tp", "cp", "pp", "dp", "ep", "vpp", "etp", "micro_batch",
                      "recompute", "recompute_modules", "remat_policy", "dp_sharding", "rank_order", "layout",
                      "search", "top", "rank_orders", "across", "outer_every", "json", "tokens"})


def command_options(parser) -> tuple:
    """The options of ``parser`` a search row does not set, as ``(dest, flag, is_switch, default)``, one a dest
    (``--set`` and ``--unset`` share one: ``--unset K`` is ``--set K=``): what :func:`given_flags` repeats."""
    out, seen = [], set()
    for a in parser._actions:
        if a.option_strings and a.dest not in _ROW_SET | seen:
            seen.add(a.dest)
            out.append((a.dest, max(a.option_strings, key=len), a.nargs == 0, a.default))
    return tuple(out)


def given_flags(args) -> list[str]:
    """The spec and every option the command was given that a search row does not set (``args.command_options``,
    from :func:`command_options`), quoted for a shell: walk28, a search's "#1's breakdown" line printed ``SPEC``
    and dropped ``--seq`` and ``--precision``, so it stepped another job than the row."""
    out = [shlex.quote(args.spec)] if getattr(args, "spec", None) else []
    for dest, flag, switch, default in getattr(args, "command_options", ()):
        value = getattr(args, dest, None)
        if value is None or value == default:
            continue
        for item in ([None] if switch else value if isinstance(value, list) else [value]):
            out += [flag] + ([] if switch else [shlex.quote(str(item))])
    return out


def recompute_cell(L: dict) -> str:
    """A layout's recomputation as a search table's column names it (one site's and a region's alike, plan65):
    the remat policy, the recomputed modules (``selective+core_attn,mlp`` where the s x s scores are recomputed
    too), or ``recompute``."""
    mods = ",".join(L.get("recompute_modules") or ())
    if L.get("remat_policy"):
        return f"remat {L['remat_policy']}"
    if L["recompute"] == "full" or not mods:  # full recomputes every module
        return L["recompute"]
    return f"selective+{mods}" if L["recompute"] == "selective" else mods


def model_flag(args) -> str:
    """``--model`` as the command was given it, quoted for a shell: a model file's path, not the name inside it
    (walk30: a search of ``--model moe200.toml`` printed ``--model moe200``, which no bundled model is, so its
    "#1's breakdown" line run as printed was an error)."""
    return f"--model {shlex.quote(str(args.model))}"


gpu_hours_text = format_gpu_hours  # one formula, in topo.units (topo plan --tokens prints it too)
