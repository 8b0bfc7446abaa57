"""The words of a plan's job, failures and goodput: one site's plan's and a region's (:mod:`topo.cli.plan`,
:mod:`topo.cli.region_plan`) say them alike."""

from __future__ import annotations

import math

from ..plan import LOST_PART_LABELS
from ..units import (count_noun, format_bandwidth, format_count, format_gpu_hours, format_in, format_suffixed_count,
                     format_time, format_usd, in_unit)


def _every(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "none expected"
    return "one per " + format_in(seconds, "h" if in_unit(seconds, "h") >= 1 else "min", ",.1f")


def time_to_first(seconds: float) -> str:
    """The expected time to a first failure: minutes, or hours from 2 h on (walk16: a SuperPOD's "2,053.12 min"
    beside its "one per 49.5 h"); "none" where no module is counted (the count beside it says 0)."""
    if not math.isfinite(seconds):
        return "none"
    return format_in(seconds, "min", ",.2f") if in_unit(seconds, "h") < 2 else format_in(seconds, "h", ",.1f")


def _scaled(rel) -> str:
    """`` x 2 (plan.reliability.rate_scale)`` where the failure table's rates are scaled (rev69: the scaled row was
    called Llama 3's); "" at 1."""
    return f" x {rel.rate_scale:g} (plan.reliability.rate_scale)" if rel.rate_scale != 1 else ""


def failure_lines(rel, num_gpus: int) -> list[str]:
    """Interruptions, optics failures, and the checkpoint and recovery times (the stall says what it is and the
    write rate the goodput model takes: the storage servers' aggregate, ms52's one rate). A job on part of the
    ``num_gpus`` GPUs has its share of the GPU links' modules; the NIC-side and any-module counts are the cluster's
    (rev69: "512 modules on GPU links, both ends; NIC-side alone: 512" read as a job with no leaf-side module)."""
    mine, all_ = (("the job's ", "the cluster's ") if rel.interruptions_of == "job" and rel.interrupting_gpus < num_gpus
                  else ("", ""))
    return [f"failures  {rel.interruptions_per_day:.3g} interruptions/day ({_every(rel.mtbf_s)}) {_scope_words(rel)}, "
            f"optics from the {'failure table' if rel.optics_in_interruptions == 'table' else 'parts'}; with optics as parts "
            f"(modules on GPU links at their MTTF): {_every(rel.mtbf_optics_as_parts_s)}",
            f"          first job-stopping optics failure: {time_to_first(rel.first_job_optics_failure_s)} "
            f"({format_count(rel.job_optical_modules)} modules on {mine}GPU links, both ends); {all_}NIC-side alone: "
            f"{time_to_first(rel.first_nic_optics_failure_s)} ({format_count(rel.nic_optical_modules)} modules); of any "
            f"module: {time_to_first(rel.first_optical_failure_s)} ({format_count(rel.optical_modules)} modules)",
            f"          optics reconciled: modules on GPU links at their MTTF fail "
            f"{rel.optics_parts_per_day:.1f}/day; Llama 3's network row{_scaled(rel)} gives "
            f"{rel.table_network_per_day:.1f}/day "
            f"here (an MTTF of {rel.table_network_mttf_years_per_gpu_link:,.0f} years per GPU link)",
            f"          checkpoint {format_in(rel.checkpoint_bytes, 'TB', '.3g')} ({rel.params:.3g} parameters"
            f"{_params_origin(rel.params_source)}; {_per_gpu_words(rel)}), "
            f"{rel.checkpoint_mode}: stalls {format_time(rel.checkpoint_stall_s)} ({_stall_words(rel)}), every "
            f"{format_time(rel.checkpoint_interval_s)}{_interval_origin(rel)}; per interruption: detection {format_time(rel.detection_s)}"
            f", restart {format_time(rel.restart_s)}, reload {format_time(rel.reload_s)}, catch-up "
            f"{format_time(rel.catch_up_s)}; {count_noun(rel.hot_spare_servers, 'hot-spare server')}{_in_domains(rel)}"]


def _in_domains(rel) -> str:
    """`` (N inside each of the job's D NVLink domains; W whole domains idle)`` where the spares are the idle servers
    inside the job's domains (spares132: a job at 64 of each NVL72 rack's 72 keeps 2 trays a rack); "" else."""
    if rel.hot_spares_of != "domains":
        return ""
    return (f" ({rel.spares_per_domain:,} inside each of the job's "
            f"{count_noun(rel.job_domains, 'NVLink domain')}; {count_noun(rel.idle_domains, 'whole domain')} idle)")


def _interval_origin(rel) -> str:
    """`` (plan.reliability.checkpoint.interval_s; the renewal optimum: every T)`` where a site's own interval is
    used (plan131: walk46 could not enter a fixed cadence); "" at the optimum."""
    if rel.checkpoint_interval_of != "policy":
        return ""
    return f" (plan.reliability.checkpoint.interval_s; the renewal optimum: every {format_time(rel.optimum_interval_s)})"


def _policy_cost(rel) -> str:
    """`` at the checkpoint interval set (T); at the renewal optimum (T*): G*, +x points`` where a site's own
    interval is used: the cost of the policy against the optimum (never negative: the optimum is the best interval
    the checkpoint mode allows), both the renewal model's; "" at the optimum."""
    if rel.checkpoint_interval_of != "policy":
        return ""
    return (f" at the checkpoint interval set ({format_time(rel.checkpoint_interval_s)}, "
            f"plan.reliability.checkpoint.interval_s); at the renewal optimum ({format_time(rel.optimum_interval_s)}): "
            f"{100 * rel.goodput_at_optimum:.1f}%, {100 * (rel.goodput_at_optimum - rel.goodput):.1f} points more")


def _scope_words(rel) -> str:
    """Whose parts interrupt: a named job's GPUs (the cluster's rate beside) or every GPU; the table's scale."""
    scale = f", the failure table's rates{_scaled(rel)}" if rel.rate_scale != 1 else ""
    if rel.interruptions_of == "cluster":
        return f"from all {format_count(rel.interrupting_gpus)} GPUs' parts (no job named){scale}"
    return (f"from the job's {format_count(rel.interrupting_gpus)} GPUs' parts (their servers, NICs, and the switches "
            f"and cables the failure table counts per GPU; the whole cluster's: {rel.cluster_interruptions_per_day:.3g}"
            f"/day){scale}")


# whose write rate the goodput model takes: the storage servers', as the storage lines report it (ms52: one rate)
_WRITE_ORIGIN = "the storage servers' aggregate write"


def _stall_words(rel) -> str:
    """What a checkpoint's stall is: the whole write to storage (sync), or the copy to host memory with the write
    in the background (async) or none (in_memory)."""
    rate = format_bandwidth(rel.checkpoint_bytes / rel.checkpoint_write_s) if rel.checkpoint_write_s > 0 else "?"
    if rel.checkpoint_mode == "sync":
        return f"the whole write at {rate}, {_WRITE_ORIGIN}"
    if rel.checkpoint_mode == "async":
        return (f"the copy to host memory; the write at {rate} ({_WRITE_ORIGIN}) takes "
                f"{format_time(rel.checkpoint_write_s)} in the background")
    return "the copy to host memory"


def _per_gpu_words(rel) -> str:
    """Each GPU's shard of the checkpoint, whose GPUs (plan131: walk46 worked out 347 MB by hand, inside Llama 3's
    1 MB - 4 GB per GPU): the checkpoint over the interrupting GPUs, each writing an equal shard."""
    size = format_in(rel.checkpoint_per_gpu_bytes, "GB" if in_unit(rel.checkpoint_per_gpu_bytes, "GB") >= 1 else "MB",
                     ",.4g")
    whose = "the job's" if rel.interruptions_of == "job" else "the"
    return f"{size} per GPU: each of {whose} {format_count(rel.interrupting_gpus)} GPUs writes an equal shard"


def _params_origin(source: str) -> str:
    """Where the checkpointed model's size came from, in a few words (walk9: 1.43e+12 parameters, unexplained)."""
    if source.startswith("derived: compute-optimal"):
        return ": compute-optimal for the compute line's FLOP, Chinchilla's tokens per parameter"
    return ": --model's" if source.startswith("--model") else ": plan.workload.params"


def goodput_lines(rel, cost_per_effective_gpu_hour_usd: float, spare: str = "", mark=lambda *k: "") -> list[str]:
    """Goodput with what is lost to each part and its sensitivity (one site's plan and a region's); ``spare``
    says whose GPUs the effective figures count, ``mark`` flags the catalog keys a user overrode."""
    lost = ", ".join(f"{LOST_PART_LABELS.get(name, name)} {100 * x:.1f}%"
                     for name, x in rel.lost_fraction_by_part.items())
    lost += mark(*(f"reliability.checkpoint.{k}" for k in ("detection_s", "restart_s", "snapshot_Bps", "repair_s",
                                                           "hot_spare_fraction", "interval_s")))
    whose = " (the job's, at its GPUs' interruptions)" if rel.interruptions_of == "job" else ""
    return [f"goodput   {100 * rel.goodput:.1f}%{whose}{_policy_cost(rel)} -> {rel.effective_flop:.3g} FLOP effective{spare}, "
            f"${cost_per_effective_gpu_hour_usd:,.2f} per effective GPU-hour"
            + (f" (lost: {lost})" if lost else "")
            + f"; renewal model, failures during recovery included (first-order at Young's "
            f"{format_time(rel.young_interval_s)}: {100 * rel.goodput_first_order:.1f}%)",
            "          sensitivity (goodput when halved / doubled): " + "; ".join(
                f"{x['input']} {100 * x['goodput_half']:.1f}% / {100 * x['goodput_double']:.1f}%"
                for x in rel.sensitivity)]


def job_lines(job, cost_per_million_tokens_usd, t: dict | None, at_step: str = "at the step",
              energy: dict | None = None, parts: str = "network and storage") -> list[str]:
    """A named job's cost per million tokens, its time to train ``--tokens`` with the goodput (one site's plan
    and a region's, :func:`topo.plan.train_time.time_to_train`) and its energy
    (:func:`~topo.plan.train_time.job_energy`); ``at_step`` names the step it runs at, ``parts`` what the power's
    share counts besides the servers."""
    if job is None:
        return []
    out = [f"          {job.model}: ${cost_per_million_tokens_usd:,.3f} per million tokens ("
           f"{format_count(job.gpus)} GPUs at the cost per effective GPU-hour, "
           f"{job.tokens_per_s:,.0f} tokens/s {at_step})"]
    if t is not None:
        out.append(f"          time to train {format_suffixed_count(t['tokens'])} tokens: {format_in(t['time_to_train_s'], 'days', ',.1f')} "
                   f"with goodput {100 * t['goodput']:.1f}% ({format_in(t['time_at_step_s'], 'days', ',.1f')} "
                   f"{at_step}, as topo train --tokens gives it), "
                   f"{format_gpu_hours(t['gpu_hours_to_train'])} GPU-hours on "
                   f"{format_count(job.gpus)} GPUs{_ends_text(t)}")
    return out + _energy_lines(job, energy, parts)


def _energy_lines(job, e: dict | None, parts: str) -> list[str]:
    """The job's energy per token and to train (:func:`topo.plan.train_time.job_energy`), what it counts."""
    if e is None:
        return []
    price = e["electricity_usd_per_kWh"]
    out = (f"          energy {e['energy_per_token_J']:.3g} J per token, {e['energy_per_million_tokens_kWh']:,.3g} kWh "
           f"per million tokens (${e['energy_cost_per_million_tokens_usd']:,.4g} at ${price:g}/kWh, inside the cost "
           f"above)")
    if "energy_to_train_kWh" in e:
        out += (f"; to train: {format_in(e['energy_to_train_kWh'] * 1e3, 'GWh', ',.1f')} "
                f"({format_usd(e['energy_cost_to_train_usd'])})")
        ends = e.get("energy_to_train_interval_kWh")
        if ends:
            out += (f", {format_in(ends[0] * 1e3, 'GWh', ',.1f')} - {format_in(ends[1] * 1e3, 'GWh', ',.1f')} at the "
                    "uncertainty's ends")
    return [out, f"          (the job's {format_count(job.gpus)} GPUs' share of the average facility power, "
                 f"{format_in(e['job_power_W'], 'MW', ',.2f')}: their servers at their average draw and that share of the "
                 f"{parts}, at the PUE, over the time with the goodput; while the job stands, "
                 f"{100 * e['standing_fraction']:.1f}% of it (checkpoint stall, detection, restart, reload), its GPUs "
                 f"at their idle draw (gpus.toml idle_W): {format_in(e['job_standing_power_W'], 'MW', ',.2f')}; "
                 f"{format_in(e['job_mean_power_W'], 'MW', ',.2f')} on average)"]


def _ends_text(t: dict) -> str:
    """``; A - B days at the uncertainty's ends`` (with the goodput), as topo train --tokens says its own; "" when
    the step has no interval."""
    ends = t.get("time_to_train_interval_s")
    if not ends:
        return ""
    return f"; {format_in(ends[0], 'days', ',.1f')} - {format_in(ends[1], 'days', ',.1f')} at the uncertainty's ends"
