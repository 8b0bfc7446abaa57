"""Calibrate a profile on nccl-tests logs: parse, model each run's cluster, fit, and write the profile file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import TopoError
from ..engine.profiles import Profile, resolve_profile
from ..spec.load import resolve_spec_path
from .compare import run_collective
from .fit import Case, FitResult, calibration_params, fit_identified
from .parse import parse_file
from .setup import setup_from_run
from .write import profile_toml, write_profile

__all__ = ["CalibrationResult", "calibrate_logs", "cases_from_logs", "spec_inputs"]


POOR_FIT_PCT = 15.0  # a calibrated profile left this far off its own logs does not describe the cluster


@dataclass
class CalibrationResult:
    base: str
    name: str
    fit: FitResult
    logs: list[dict]
    output: str | None
    text: str

    @property
    def warning(self) -> str | None:
        """What to distrust, when the fit leaves the logs more than POOR_FIT_PCT off (median)."""
        if self.fit.mdape_after_pct <= POOR_FIT_PCT:
            return None
        return (f"the fitted profile is still {self.fit.mdape_after_pct:.0f}% off its own logs (median): the "
                "modelled cluster is probably not the one that ran (check the assumptions: GPU, NICs per node, "
                "NIC rate, network), or the run itself is broken; do not use this profile for predictions")

    def to_dict(self) -> dict:
        return {"base": self.base, "name": self.name, "output": self.output, "logs": self.logs,
                **self.fit.to_dict(), "warning": self.warning, "profile_toml": self.text}


def cases_from_logs(paths, profile="nccl", collective=None, **cluster) -> tuple[list[Case], list[dict], Profile]:
    """One fitting case per run in the logs, all starting from the same bundled profile."""
    cases, logs, start = [], [], None
    seen: dict[str, str] = {}  # a log's sha256 -> the path it was first given as
    for path in paths:
        runs = parse_file(path)
        sha = runs[0].sha256 if runs else ""
        if sha in seen:  # the same sweep twice would weigh double in the fit and in the provenance
            raise TopoError(f"is the same log as {seen[sha]} (same sha256): give each log once", source=str(path),
                            key="logs")
        seen[sha] = str(path)
        for run in runs:
            coll = run_collective(run, collective, several=len(paths) > 1 or len(runs) > 1)
            setup = setup_from_run(run, **cluster)
            prof = resolve_profile(profile, setup.fabric)
            if not prof.sources or "+" not in prof.name:
                raise TopoError(f"calibration starts from a bundled profile (nccl or e.g. hopper+roce), got "
                                f"{prof.name!r}", key="profile")
            if start is not None and prof.name != start.name:
                raise TopoError(f"the logs need different base profiles ({start.name}, {prof.name}): calibrate "
                                "each cluster on its own", source=str(path), key="profile")
            start = prof
            rows = [r for r in run.rows if r.time_s > 0]
            cases.append(Case(setup, coll, [r.size_bytes for r in rows], [r.time_s for r in rows], prof,
                              label=f"{Path(path).name}:{coll}"))
            logs.append({"path": str(path), "sha256": run.sha256, "collective": coll, "ranks": setup.gpus,
                         "sizes": len(rows), "spec": setup.spec_name, "assumptions": setup.assumptions,
                         "notes": [*run.notes, *setup.notes]})
    if not cases:
        raise TopoError("no runs in the logs", key="logs")
    return cases, logs, start


def spec_inputs(spec) -> list[Path]:
    """The file a ``spec`` argument reads (a path or a bundled name), as a list; empty for none or a spec object.

    Parameters
    ----------
    spec : str, Path, ClusterSpec or None
        What ``calibrate_logs`` and ``compare`` take as ``spec``.

    Returns
    -------
    list of Path
        The spec file, so that no output is written over it.
    """
    if not isinstance(spec, (str, Path)):
        return []
    try:
        return [resolve_spec_path(spec)]
    except TopoError:
        return []  # named again, with its error, when the cluster is built


def calibrate_logs(paths, output=None, profile="nccl", name=None, collective=None, max_nfev=200, force=False,
                   output_key="output", force_option="force", **cluster) -> CalibrationResult:
    """Fit the profile's free parameters to every run in ``paths``; write the profile to ``output`` if given."""
    if not paths:
        raise TopoError("give at least one nccl-tests log", key="logs")
    if [str(p) for p in paths].count("-") > 1:
        raise TopoError("standard input (-) is one log: give it once", key="logs")
    if name is not None and (not name.strip() or not name.isprintable()):
        raise TopoError(f"a profile name is one line of printable text, got {name!r}", key="name")
    cases, logs, start = cases_from_logs(paths, profile, collective, **cluster)
    params = calibration_params(start, cases)
    fit = fit_identified(cases, params, max_nfev=max_nfev)
    stem = Path(str(output)).stem if output is not None and str(output) != "-" else ""
    name = name or (stem if stem.isprintable() and stem.strip() else "calibrated")
    text = profile_toml(name, start.name, start, fit, logs)
    if output:
        write_profile(output, name, start.name, start, fit, logs, force=force, key=output_key,
                      force_option=force_option, inputs=spec_inputs(cluster.get("spec")))
    return CalibrationResult(start.name, name, fit, logs, str(output) if output else None, text)
