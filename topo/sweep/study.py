"""Study files: which specs, which axes, what to compute; expanded into points, each with a stable hash.

A study is a small TOML file::

    name = "failures-100k"                 # optional (default: the file's name)
    spec = "dgx-h100-superpod"             # or: specs = ["h100-100k", "h100-100k-4tier"], or a "spec" axis
    compute = ["estimate"]                 # estimate | train | plan | describe, one or several
    seeds = 1000                           # expands "{seed}" in any axis value to 0..999 (or a list of seeds)
    zip = [["collective", "size"]]         # optional: these axes vary together instead of as a product
    [axes]                                 # a list of values, or one value (a fixed setting)
    "fabric.tiers[0].oversubscription" = [1, 2]     # any spec field, by its --set path ("" removes the key)
    collective = ["all_reduce", "alltoall"]
    size = ["1MiB", "1GiB"]
    fail = ["", "random:spine:0.01:{seed}"]         # as --fail takes it; several parts separated by commas
    hash_seed = ["{seed}"]                          # a value that is just "{seed}" becomes the seed (a number)

Axis names are spec field paths (with a dot or a bracket) or one of :data:`topo.sweep.point.POINT_KEYS`:
``spec``, ``fail``; for ``estimate`` ``collective``, ``size``, ``traffic`` and the options of
:class:`topo.engine.options.EstimateOptions` (``gpus``, ``groups``, ``algorithm``, ``ecmp``, ``sharing``, ...); for
``train`` ``model``, ``layout`` (``"tp=8,pp=16,dp=768"``), ``efficiency``, ``shares`` (a region's split of the
replicas over its sites, as ``topo train REGION --shares``: ``by-size``, the default, or ``equal``) and the fields of
a training layout (``global_batch``, ``micro_batch``, ...); for ``plan`` ``days``, ``mfu``, ``pue``, ``plan_collectives``.

Points are the product of the axes (the first axis varies slowest); for each point whose values contain
``{seed}``, one point per seed. Each point gets ``point``, a hash of its inputs, the spec's text, the content of
every model, traffic or profile file its values name by path, and topo's version (what resumption matches), and ``design``, a hash of the same without the seed (what summaries group by).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import __version__
from ..errors import TopoError, closest
from ..inputs import is_input_file, loads_toml, read_input_text
from ..resources import data_dir
from ..spec.load import apply_overrides, bundled_dir as bundled_spec_dir, check_override_key, resolve_spec_path
from ..spec.model import Spec
from ..spec.sites import RegionSpec, is_region_data
from .check import check_failures, check_technology, check_values
from .files import FILE_AXES, file_digest
from .point import COMPUTES, ESTIMATE_KEYS, PLAN_KEYS, POINT_KEYS, TRAIN_KEYS, toml_value

__all__ = ["Study", "load_study", "study_from_dict", "bundled_studies", "SEED", "MAX_POINTS", "FILE_AXES",
           "file_digest"]

SEED = "{seed}"
MAX_POINTS = 1_000_000
"""The most points a study may have. Every point is keyed and held in memory before the first runs: about 0.55 KB
and 20-40 us each (walk10: 100,000 points took 2 s and 55 MB), so the former 10,000,000 spent minutes and over
5 GB in silence; a million is already days of CPU at 0.3 s per 100k-GPU point."""
TOP_KEYS = ("name", "description", "spec", "specs", "compute", "seeds", "zip", "axes")


def bundled_studies() -> dict[str, Path]:
    """The bundled example studies by name (``topo/data/studies/*.toml``)."""
    d = data_dir("studies")
    return {p.stem: p for p in sorted(d.glob("*.toml"))}


@dataclass(frozen=True)
class Study:
    """A validated study (see the module doc). Build one with :func:`load_study` or :func:`study_from_dict`."""

    name: str
    source: str  # the file it came from, for error messages
    text: str  # the study as given (recorded beside the results)
    compute: tuple[str, ...]
    axes: dict  # name -> list of values, in the file's order ("spec" included)
    zip: tuple[tuple[str, ...], ...] = ()
    seeds: tuple[int, ...] = ()
    specs: dict = field(default_factory=dict)  # spec reference -> (source, TOML text)
    description: str = ""
    files: tuple[str, ...] = ()  # the files it reads (specs, and models, traffic, profiles its axes name): no output
    file_seeds: tuple[int, ...] = ()  # the file's own seeds when ``seeds`` holds only its first (topo sweep --seeds)

    @property
    def seeded(self) -> tuple[str, ...]:
        """Axes with a ``{seed}`` in some value."""
        return tuple(k for k, vs in self.axes.items() if any(isinstance(v, str) and SEED in v for v in vs))

    @property
    def input_columns(self) -> list[str]:
        """The input columns of a row: the axes, then ``seed`` when the study has seeds."""
        return list(self.axes) + (["seed"] if self.seeds else [])

    def points(self) -> list[dict]:
        """Every point, in order: dicts with the inputs (``seed`` when seeded), ``point``, ``design`` and
        ``label`` (the design as text, ``{seed}`` unexpanded)."""
        zipped = {k: list(g) for g in self.zip for k in g}
        groups: list[list[str]] = []
        for k in self.axes:  # an axis alone, or its zip group at the place of the group's first axis
            g = zipped.get(k, [k])
            if g not in groups:
                groups.append(g)
        choices = [[dict(zip(g, vals)) for vals in zip(*(self.axes[k] for k in g))] for g in groups]
        out: list = []
        memo: dict = {}  # axis value -> digest of the file it names: a file is read once per call
        for combo in itertools.product(*choices):
            design = {k: v for part in combo for k, v in part.items()}
            design = {k: design[k] for k in self.axes}
            dhash = _hash({"design": design, "compute": self.compute, "specs": self._spec_digest(design)})
            label = " ".join(f"{k}={v if v != '' else chr(34) * 2}" for k, v in design.items()
                             if len(self.axes[k]) > 1 or SEED in str(v))
            if any(isinstance(v, str) and SEED in v for v in design.values()):
                for s in self.seeds:
                    p = {k: _expand(v, s) for k, v in design.items()}
                    p["seed"] = s
                    out.append(self._finish(p, dhash, label, memo))
            else:
                out.append(self._finish(dict(design, **({"seed": None} if self.seeds else {})), dhash, label,
                                        memo))
        return out

    def kept_points(self) -> list[dict]:
        """The points whose rows an output folder keeps when the study changed (:meth:`.ResultStore.prune`): every
        point of the file's seeds, also when this run computes only the first (``--seeds``), so that a look at a few
        draws after an edit does not remove the later draws' rows the whole study still has."""
        return replace(self, seeds=self.file_seeds).points() if self.file_seeds else self.points()

    def _spec_digest(self, inputs: dict) -> str:
        return hashlib.sha256(self.specs[inputs["spec"]][1].encode()).hexdigest()

    def _finish(self, inputs: dict, dhash: str, label: str, memo: dict) -> dict:
        inputs = dict(inputs)
        key = {k: v for k, v in inputs.items() if not (k == "seed" and v is None)}  # the same with or without seeds
        keyed = {"inputs": key, "compute": self.compute, "spec": self._spec_digest(inputs), "topo": __version__}
        for v in (key[k] for k in FILE_AXES if k in key and key[k] not in memo):
            memo[v] = file_digest(v)
        files = {k: memo[key[k]] for k in FILE_AXES if k in key and memo[key[k]] is not None}
        if files:  # only when a value names a file, so that a study of bundled names keeps its hashes
            keyed["files"] = files
        return {"inputs": inputs, "point": _hash(keyed), "design": dhash, "label": label or self.name}

    def version(self) -> str:
        """What the rows of this study depend on beside their inputs: the study's text, its specs' text, the
        content of the files its axes name (:data:`FILE_AXES`) and topo's version. An output folder holds the rows
        of one version (:meth:`topo.sweep.store.ResultStore.prune`)."""
        files = sorted({(k, str(v), file_digest(v)) for k, vs in self.axes.items() if k in FILE_AXES for v in vs},
                       key=str)
        return _hash({"text": self.text, "specs": {r: t for r, (_, t) in self.specs.items()}, "files": files,
                      "topo": __version__})


def _expand(v, seed: int):
    """An axis value with ``{seed}`` replaced by ``seed``: the seed itself (a whole number) where the value is
    exactly ``"{seed}"`` (``hash_seed = ["{seed}"]``), else the text with the seed in it."""
    if v == SEED:
        return seed
    return v.replace(SEED, str(seed)) if isinstance(v, str) else v


def _hash(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def load_study(path_or_name: str | Path) -> Study:
    """Read and check a study file (or a bundled study by name, see :func:`bundled_studies`).

    Raises
    ------
    TopoError
        The file cannot be read, or a key, an axis or a value is not allowed: one line naming the file, the key,
        the value and what is allowed.
    """
    p = Path(path_or_name)
    if not is_input_file(p):  # not there at all (a device or pipe is the user's file, refused when read)
        bundled = bundled_studies()
        stem = p.name[:-5] if p.name.endswith(".toml") else p.name
        if p.parent == Path(".") and stem in bundled:
            p = bundled[stem]
        else:
            close = closest(stem, list(bundled))
            hint = f"; did you mean {close[0]!r}?" if close else ""
            what = "is a directory" if p.is_dir() else "no such study file or bundled study"
            raise TopoError(f"{what}; bundled: {', '.join(bundled)}{hint}", source=str(path_or_name))
    try:
        text = read_input_text(p, "study file (.toml)").removeprefix("\ufeff")  # a byte-order mark, as read_toml
    except TopoError as exc:
        raise TopoError(exc.message, source=str(path_or_name)) from None
    try:
        data = loads_toml(text, str(path_or_name))
    except tomllib.TOMLDecodeError as exc:
        raise TopoError(f"invalid TOML: {exc}", source=str(path_or_name)) from None
    return study_from_dict(data, source=str(path_or_name), text=text, folder=p.parent, default_name=p.stem)


def study_from_dict(data: dict, source: str = "<study>", text: str | None = None, folder: Path | None = None,
                    default_name: str = "study") -> Study:
    """Check a study given as a dict (the parsed TOML; see the module doc) and read its specs.

    Spec files named relative to the study are looked up beside it first (``folder``), then as given.
    """
    def bad(key, msg):
        raise TopoError(msg, source=source, key=key)

    name, compute = _name_and_compute(data, default_name, bad)
    axes, spec_key = _axes(data, compute, bad)
    seeds = _seeds(data, axes, bad)
    zip_val = _zip(data, axes, spec_key, bad)
    if "train" in compute and "model" not in axes:
        bad("axes.model", "compute = train needs a model (e.g. model = \"llama3-405b\") and a layout")
    specs = _read_specs(axes["spec"], folder, source)
    regions = [ref for ref, (_, text) in specs.items() if is_region_data(tomllib.loads(text))]
    fabric_only = [c for c in compute if c in ("plan", "describe")]
    if regions and fabric_only:  # known before any point runs: one line, not an error row at every point
        bad("compute", f"{fabric_only[0]} is not computed over a region ({regions[0]}); a sweep over a region "
                       f"computes estimate and train (topo {fabric_only[0]} {regions[0]} gives its {fabric_only[0]})")
    _check_paths(axes, specs, source)
    try:
        check_values(axes, source, SEED)
        check_failures(axes, specs, source, SEED, seeds)
        check_technology(axes, specs, zip_val, source)
    except TopoError as exc:
        raise _beside_the_study(exc, axes, folder, source) from None
    study = Study(name=name.strip(), source=source, text=text if text is not None else json.dumps(data),
                  compute=tuple(compute), axes=axes, zip=tuple(tuple(g) for g in zip_val), seeds=seeds,
                  specs=specs, description=str(data.get("description", "")), files=_files(axes, folder))
    n = 1
    for k, vs in axes.items():
        n *= len(vs) if not any(k in g[1:] for g in study.zip) else 1
    if n * max(1, len(seeds)) > MAX_POINTS:
        bad("axes", f"{n * max(1, len(seeds)):,} points; a study is limited to {MAX_POINTS:,} (each is keyed in "
                    "memory before the first runs): split it")
    return study


def _name_and_compute(data: dict, default_name: str, bad) -> tuple[str, list[str]]:
    """The study's name and its computations, once its top-level keys are known ones."""
    if not data:
        bad(None, "is empty; a study names its spec (spec = \"...\"), what to compute and its [axes] (see the "
            "bundled ones: topo sweep failures-100k)")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        close = closest(unknown[0], TOP_KEYS)
        bad(unknown[0], f"unknown key; allowed: {', '.join(TOP_KEYS)}" + (f"; did you mean {close[0]!r}?" if close else ""))
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        bad("name", f"must be a non-empty string, got {name!r}")
    compute = data.get("compute", ["estimate"])
    if isinstance(compute, str):
        compute = [compute]
    if not isinstance(compute, list) or not compute:
        bad("compute", f"must be a non-empty list of {', '.join(COMPUTES)}, got {compute!r}")
    for c in compute:
        if c not in COMPUTES:
            bad("compute", f"unknown computation {c!r}; allowed: {', '.join(COMPUTES)}")
    if len(set(compute)) != len(compute):
        bad("compute", f"names a computation twice: {compute!r}")
    return name, compute


def _axes(data: dict, compute: list[str], bad) -> tuple[dict, str]:
    """The axes, the specs first (``spec``, ``specs`` or ``axes.spec``, given once), and the key that named them."""
    axes_in = data.get("axes", {})
    if not isinstance(axes_in, dict):
        bad("axes", f"must be a table ([axes]) of name = [values], got {axes_in!r}")
    axes: dict = {}
    given = [k for k in ("spec", "specs") if k in data] + (["axes.spec"] if "spec" in axes_in else [])
    if len(given) > 1:
        bad(given[1], f"give the specs once: {' and '.join(given)} both name them")
    spec_key = given[0] if given else "spec"
    axes["spec"] = _values(data.get("spec", data.get("specs", axes_in.get("spec", "h100-100k"))), spec_key, bad)
    for k, v in axes_in.items():
        if k == "spec":
            continue
        _check_axis_name(k, compute, bad)
        axes[k] = _values(v, f"axes.{k}", bad)
    return axes, spec_key


def _seeds(data: dict, axes: dict, bad) -> tuple[int, ...]:
    """The seeds (``seeds = N``: 0..N-1, or a list), given exactly when an axis value holds ``{seed}``."""
    seeds_val = data.get("seeds")
    seeds: tuple[int, ...] = ()
    if seeds_val is not None:
        if isinstance(seeds_val, bool) or not isinstance(seeds_val, (int, list)):
            bad("seeds", f"must be a number of seeds (0..N-1) or a list of seeds, got {seeds_val!r}")
        if isinstance(seeds_val, int):
            if not 1 <= seeds_val <= MAX_POINTS:
                bad("seeds", f"must be 1 to {MAX_POINTS:,}, got {seeds_val}")
            seeds = tuple(range(seeds_val))
        else:
            if not seeds_val or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds_val):
                bad("seeds", f"must be a non-empty list of whole numbers >= 0, got {seeds_val!r}")
            if len(set(seeds_val)) != len(seeds_val):
                bad("seeds", f"lists a seed twice: {seeds_val!r}")
            seeds = tuple(seeds_val)
    uses_seed = [k for k, vs in axes.items() if any(isinstance(x, str) and SEED in x for x in vs)]
    if seeds and not uses_seed:
        bad("seeds", f"{len(seeds)} seeds, but no axis value contains {SEED}; write e.g. "
            "fail = [\"random:spine:0.01:{seed}\"]")
    if uses_seed and not seeds:
        bad(f"axes.{uses_seed[0]}", f"a value contains {SEED} but the study gives no seeds; add e.g. seeds = 100")
    return seeds


def _zip(data: dict, axes: dict, spec_key: str, bad) -> list[list[str]]:
    """The groups of axes zipped together (each axis in one group at most, as many values each), once no axis
    and no group repeats a value."""
    zip_val = data.get("zip", [])
    if not isinstance(zip_val, list) or not all(isinstance(g, list) for g in zip_val):
        bad("zip", f"must be a list of lists of axis names, e.g. [[\"collective\", \"size\"]], got {zip_val!r}")
    seen: set = set()
    for g in zip_val:
        if len(g) < 2:
            bad("zip", f"a group needs two or more axes, got {g!r}")
        for k in g:
            if k not in axes:
                close = closest(str(k), list(axes))
                bad("zip", f"no axis {k!r}; axes: {', '.join(axes)}" + (f"; did you mean {close[0]!r}?" if close else ""))
            if k in seen:
                bad("zip", f"axis {k!r} is in two groups")
            seen.add(k)
        lengths = {k: len(axes[k]) for k in g}
        if len(set(lengths.values())) > 1:
            bad("zip", "axes zipped together need as many values each, got "
                + ", ".join(f"{k}: {n}" for k, n in lengths.items()))
    zipped = {k for g in zip_val for k in g}
    for k, vs in axes.items():
        if k not in zipped and _twice([[v] for v in vs]):
            bad(spec_key if k == "spec" else f"axes.{k}", f"lists a value twice: {vs!r}")
    for g in zip_val:
        if _twice([list(t) for t in zip(*(axes[k] for k in g))]):
            bad("zip", f"axes {', '.join(g)} zipped together give the same combination twice")
    return zip_val


def _values(v, key: str, bad) -> list:
    vals = v if isinstance(v, list) else [v]
    if not vals:
        bad(key, "is empty; give at least one value (a list, or one value for a fixed setting)")
    for x in vals:
        if isinstance(x, (dict, list)):
            bad(key, f"values must be numbers, strings or booleans, got {x!r}")
    return list(vals)


def _twice(rows: list) -> bool:
    return len({json.dumps(x, sort_keys=True) + repr([type(v).__name__ for v in x]) for x in rows}) != len(rows)


_ALL_KEYS = tuple(dict.fromkeys(POINT_KEYS))


def _check_axis_name(k: str, compute, bad) -> None:
    if "." in k or "[" in k:
        return  # a spec field path: checked against the spec model in _check_paths
    if k == "seed":
        bad("axes.seed", "seeds are given with seeds = N at the top, and used as {seed} in values")
    if k not in _ALL_KEYS:
        close = closest(k, _ALL_KEYS)
        bad(f"axes.{k}", "unknown axis; give a spec field path (e.g. fabric.tiers[1].oversubscription) or one of "
            f"{', '.join(_ALL_KEYS)}" + (f"; did you mean {close[0]!r}?" if close else ""))
    owners = [c for c, keys in (("estimate", ESTIMATE_KEYS), ("train", TRAIN_KEYS), ("plan", PLAN_KEYS)) if k in keys]
    if owners and not set(owners) & set(compute) and not (k == "mfu" and "plan" in compute):
        bad(f"axes.{k}", f"is an input of {' and '.join(owners)}, which the study does not compute (compute = "
            f"{list(compute)})")


def _read_specs(refs: list, folder: Path | None, source: str) -> dict:
    out = {}
    for ref in refs:
        if not isinstance(ref, str) or not ref.strip():
            raise TopoError(f"a spec is a bundled name or a file, got {ref!r}", source=source, key="spec")
        try:
            path = _spec_file(ref, folder)
            text = read_input_text(path, "spec file (.toml)").removeprefix("\ufeff")
        except TopoError as exc:
            raise TopoError(exc.message, source=source, key=f"spec: {ref}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise TopoError(f"cannot read spec {ref!r}: {exc}", source=source, key="spec") from None
        try:  # read here, once: the checks below parse it again, and a point must not meet it first
            loads_toml(text, f"{source}: spec: {ref}")
        except tomllib.TOMLDecodeError as exc:
            raise TopoError(f"invalid TOML in spec {ref!r}: {exc}", source=source, key=f"spec: {ref}") from None
        # as the study names it, never this machine's path: rows travel (a bundled spec by its name)
        bundled = (Path(path).resolve().parent == bundled_spec_dir().resolve()
                   and not (folder and (folder / ref).is_file()))
        out[ref] = (f"bundled spec {Path(path).stem}" if bundled else ref, text)
    return out


def _spec_file(ref: str, folder: Path | None) -> Path:
    """The file a study's spec reference names: beside the study (in ``folder``) first, then as given or bundled."""
    if folder is not None and (folder / ref).is_file():
        return folder / ref
    return resolve_spec_path(ref)


def _beside_the_study(exc: TopoError, axes: dict, folder: Path | None, source: str) -> TopoError:
    """``exc``, or when a file axis (:data:`FILE_AXES`) names a relative path that is missing from the working folder
    but found beside the study, an error that says so: a spec is looked up beside the study, a model, traffic or
    profile file is read where the points run (the working folder, or a worker's), as the value is given."""
    for k in (k for k in FILE_AXES if k in axes and folder is not None):
        for v in axes[k]:
            if (isinstance(v, str) and v and not Path(v).is_absolute() and not is_input_file(v)
                    and (folder / v).is_file()):
                return TopoError(f"{v!r}: no such file in the working folder, but there is one beside the study: a "
                                 f"{k} file is read where topo sweep runs (specs alone are looked up beside the "
                                 f"study); give its path from here, {str(folder / v)!r}, or run in {str(folder)!r}",
                                 source=source, key=f"axes.{k}")
    return exc


def _files(axes: dict, folder: Path | None) -> tuple[str, ...]:
    """The files a study reads: its specs' and those its file axes (:data:`FILE_AXES`) name."""
    specs = [str(_spec_file(ref, folder)) for ref in axes["spec"]]
    named = [v for k, vs in axes.items() if k in FILE_AXES for v in vs if isinstance(v, str) and is_input_file(v)]
    return tuple(dict.fromkeys(specs + named))


def _check_paths(axes: dict, specs: dict, source: str) -> None:
    """An unknown spec field or list item in an axis name is bad input for the whole study (not one error row per
    point): each path is checked against the spec model, and applied with its first value to each base spec (a
    missing list item or a value where a table is fails there). A value the spec rejects is an error row."""
    paths = [k for k in axes if "." in k or "[" in k]
    regions = [is_region_data(tomllib.loads(text)) for _, text in specs.values()]
    root = RegionSpec if regions and all(regions) else Spec  # the keys of a region file, or of a fabric's
    for k in paths:
        try:
            check_override_key(k, root)
        except TopoError as exc:
            raise TopoError(exc.message, source=source, key=f"axes.{k}") from None
    for ref, (_, text) in specs.items():
        if not paths:
            break
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TopoError(f"spec {ref!r} is not valid TOML: {exc}", source=source, key="spec") from None
        for k in paths:
            v = axes[k][0]
            try:
                apply_overrides(data, [f"{k}={toml_value(v)}"], source=ref)
            except TopoError as exc:
                raise TopoError(f"{exc.message} (in spec {ref})", source=source, key=f"axes.{k}") from None
