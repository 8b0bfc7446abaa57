"""Write a fitted profile as a user profile TOML (``kind = "user"``) that :func:`topo.engine.profiles.resolve_profile`
loads: the bundled ``base`` it started from, every fitted parameter with ``fitted = true`` and what it was fitted
on, and a ``[profile.provenance]`` table (the logs' sha256, the fitted values, the error before and after, and
``not_fitted``: the parameters the logs could not determine, with why; they keep the base's values and are not
written)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from ..atomic import open_output
from ..engine.profiles import US, Profile
from .compare import CALIBRATED_SOURCE
from .fit import FitResult

__all__ = ["profile_toml", "write_profile"]


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(str(v))  # a TOML basic string is a JSON string


def _table_us(table: dict) -> dict:
    return {f: {p: (list(x / US for x in v) if isinstance(v, tuple) else float(v) / US) for p, v in d.items()}
            for f, d in table.items()}


def _fitted_values(start: Profile, fitted: Profile, names: set[str]) -> dict:
    """Fitted parameters in the data files' units, for the parameters that were fitted."""
    out = {}
    if any(n.startswith("base_latency_") for n in names):
        out["base_latency_us"] = _table_us(fitted.base_latency_s)
    if "nvlink_hop" in names:
        out["nvlink_hop_us"] = _table_us(fitted.nvlink_hop_s)
    if "net_hop" in names:
        ref = start.net_hop_s.get("ring", {}).get("Simple") or 1.0
        scale0 = start.sources.get("net_hop_scale", {}).get("value", 1.0)
        out["net_hop_scale"] = float(scale0 * fitted.net_hop_s["ring"]["Simple"] / ref)
    for n in ("nvlink_efficiency", "network_efficiency"):
        if n in names:
            out[n] = float(getattr(fitted, n))
    if "nvls_efficiency" in names:
        out["nvls_efficiency"] = float(fitted.proto_efficiency["nvls"]["Simple"])
        if "nvls_tree" in fitted.proto_efficiency:
            out["nvls_tree_efficiency"] = float(fitted.proto_efficiency["nvls_tree"]["Simple"])
    if "mnnvl_latency" in names:
        out["mnnvl_hop_extra_us"] = float(fitted.mnnvl_hop_extra_s / US)
        out["mnnvl_extra_us"] = float(fitted.mnnvl_extra_s / US)
    if "peer_overhead" in names:
        out["peer_overhead_us"] = float(fitted.peer_overhead_s / US)
    if "pipeline_window_MiB" in names:
        out["pipeline_window_bytes"] = float(fitted.pipeline_window_bytes)
    return out


def profile_toml(name: str, base: str, start: Profile, fit: FitResult, logs: list[dict]) -> str:
    """The TOML text of a calibrated profile."""
    names = {p.name for p in fit.params}
    values = _fitted_values(start, fit.profiles[0], names)
    on = "; ".join(f"{Path(x['path']).name} (sha256 {x['sha256'][:16]}, {x['collective']}, {x['ranks']} ranks)"
                   for x in logs)
    lines = ["# written by topo calibrate: a bundled base profile and the parameters fitted to nccl-tests logs.",
             "# Load it with 'topo estimate --profile FILE', 'topo compare LOG --profile FILE', or",
             "# topo.engine.profiles.resolve_profile(FILE).", "",
             "[profile]", 'kind = "user"', f"name = {_toml_value(name)}", f"base = {_toml_value(base)}",
             f"description = {_toml_value('calibrated on ' + ', '.join(Path(x['path']).name for x in logs))}", "",
             "[profile.provenance]",
             f"created_utc = {_toml_value(dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'))}",
             "method = \"scipy.optimize.least_squares on log(model time / measured time), cauchy loss, bounded\"",
             f"mdape_before_pct = {_toml_value(round(fit.mdape_before_pct, 3))}",
             f"mdape_after_pct = {_toml_value(round(fit.mdape_after_pct, 3))}",
             f"evaluations = {fit.nfev}",
             f"fitted = {_toml_value({k: round(float(v), 6) for k, v in fit.values.items()})}",
             f"sizes = {fit.sizes}",
             "# parameters the logs do not determine keep the base profile's values (topo.calibrate.fit.identified)",
             f"not_fitted = {_toml_value(dict(fit.not_identified))}",
             "logs = [" + ", ".join(_toml_value({"path": x["path"], "sha256": x["sha256"],
                                                  "collective": x["collective"], "ranks": x["ranks"],
                                                  "sizes": x["sizes"]}) for x in logs) + "]", ""]
    src = (f"{CALIBRATED_SOURCE} to {len(logs)} nccl-tests log(s), starting from {base}; "
           f"median error {fit.mdape_before_pct:.1f}% -> {fit.mdape_after_pct:.1f}%")
    for k, v in values.items():
        lines += [f"[{k}]", f"source = {_toml_value(src)}", "fitted = true", f"fitted_on = {_toml_value(on)}"]
        if isinstance(v, dict):
            lines += [f"value.{fam} = {_toml_value(d)}" for fam, d in v.items()]
        else:
            lines.append(f"value = {_toml_value(v)}")
        lines.append("")
    return "\n".join(lines)


def write_profile(path, name: str, base: str, start: Profile, fit: FitResult, logs: list[dict], *,
                  force: bool = False, key: str = "output", force_option: str = "force", inputs=()) -> None:
    """Write the profile whole or not at all, never over a log it was fitted to or another file it read
    (``inputs``: the spec), nor, unless ``force``, over a file topo did not write (:func:`topo.atomic.open_output`)."""
    with open_output(path, inputs=[*(x["path"] for x in logs), *inputs], force=force, key=key,
                     force_option=force_option) as fh:
        fh.write(profile_toml(name, base, start, fit, logs))
