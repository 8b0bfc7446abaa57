"""A study's results on disk: a folder of Parquet part files, one per finished batch, each written whole.

::

    results.parquet/
        _topo_sweep.json          what wrote it: topo's version, the study's name, text and columns
        part-<hash>.parquet       one per finished batch, renamed into place only when complete

Every part has the same columns and types (:func:`schema`), so ``pandas.read_parquet("results.parquet")`` reads
the folder as one table (pyarrow skips names starting with ``_`` and ``.``; another file put into the folder breaks
it: :func:`read_results` reads only the parts). A study that stops (Ctrl-C, a lost cluster, a power cut) leaves only
complete parts; running it again reads their ``point`` hashes and computes the rest. A folder is only written into
when it is empty, new, or marked as ours by ``_topo_sweep.json`` with the same columns; a file, or a folder of
someone else's, is refused.

A folder holds the rows of one version of its study (:meth:`topo.sweep.Study.version`: its text, its specs, the
files it reads, topo's version): a run of another version first rewrites the folder without the rows its study no
longer has (:meth:`ResultStore.prune`), so that no reader mixes two versions' rows under one label. A part that
cannot be read (truncated by a full disk) is set aside as ``.unreadable-part-*`` and its points computed again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import __version__
from ..atomic import SIGNATURE, atomic_open
from ..errors import TopoError
from .point import FIGURES

__all__ = ["schema", "ResultStore", "META", "read_results", "dedupe"]

META = "_topo_sweep.json"
COMMON = (("point", "string"), ("design", "string"), ("label", "string"), ("error", "string"),
          ("error_kind", "string"), ("compute_s", "float64"), ("topo_version", "string"))
_TYPES = {"float64": pa.float64(), "int64": pa.int64(), "string": pa.string(), "bool": pa.bool_()}


def _input_type(values: list) -> str:
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return "bool"
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "int64"
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "float64"
    return "string"


def _seed_typed(v):
    """An axis value as its rows hold it: exactly ``"{seed}"`` becomes the seed, a whole number."""
    return 0 if v == "{seed}" else v


# pandas' own schema metadata (what pandas.DataFrame.to_parquet writes for a nullable Int64 column), naming only the
# seed column: pandas.read_parquet then reads it as Int64, <NA> for a design without draws, rather than float64
# with NaN (walk18); every other column keeps pyarrow's default conversion
_PANDAS_SEED = json.dumps({"index_columns": [], "column_indexes": [], "columns": [
    {"name": "seed", "field_name": "seed", "pandas_type": "int64", "numpy_type": "Int64", "metadata": None}]}).encode()


def schema(study) -> pa.Schema:
    """The columns of a study's rows: its inputs (typed by their values: a number axis stays numeric; a mixed one
    becomes text; ``"{seed}"`` is a whole number; ``size`` is followed by ``size_bytes``), the figures of what it
    computes, then ``point``, ``design``, ``label``, ``error``,
    ``error_kind``, ``compute_s`` (seconds the point took: the only column that differs between runs) and
    ``topo_version``."""
    cols: dict[str, str] = {}
    for k in study.input_columns:
        cols[k] = "int64" if k == "seed" else _input_type([_seed_typed(v) for v in study.axes[k]])
        if k == "size":  # the label as given ("1GiB") and the bytes it means, a whole number
            cols["size_bytes"] = "int64"
    for c in study.compute:
        for k, (t, _) in FIGURES[c].items():
            cols.setdefault(k, t)
    for k, t in COMMON:
        cols[k] = t
    meta = {b"generator": f"{SIGNATURE} {__version__} (topo sweep)".encode(), b"study": study.name.encode()}
    if cols.get("seed") == "int64":
        meta[b"pandas"] = _PANDAS_SEED
    return pa.schema([(k, _TYPES[t]) for k, t in cols.items()], metadata=meta)


def _cell(v, t: str):
    if v is None:
        return None
    if t == "string":
        return str(v)
    if t == "float64":
        return float(v)
    if t == "int64":
        return int(v)
    return bool(v)


class ResultStore:
    """The output folder of one study (see the module doc). ``None`` as the path keeps rows in memory only."""

    def __init__(self, path: str | Path | None, study, *, inputs=()):
        self.path = Path(path) if path is not None else None
        self.study = study
        self.schema = schema(study)
        self._types = {f.name: _kind(f.type) for f in self.schema}
        self.memory: list[pa.Table] = []
        self.notices: list[str] = []  # what a reader should be told (a part set aside), one line each
        if self.path is not None:
            self._check(inputs)

    # --- the folder -------------------------------------------------------------------------------------------
    def _check(self, inputs) -> None:
        p = self.path
        if str(p) in ("", "-"):
            raise TopoError("a sweep writes a folder of Parquet files; give its name, e.g. results.parquet",
                            key="output")
        for src in inputs:
            try:
                if p.exists() and os.path.samefile(p, src):
                    raise TopoError(f"is an input ({src}); choose another output", source=str(p), key="output")
            except OSError:
                pass
        if p.exists() and not p.is_dir():
            raise TopoError("exists and is not a folder; a sweep writes a folder of Parquet parts: choose another "
                            "name", source=str(p), key="output")
        if not p.parent.is_dir() and str(p.parent):
            raise TopoError(f"the folder {str(p.parent)!r} does not exist", source=str(p), key="output")
        if p.is_dir():
            meta = p / META
            if not meta.is_file():
                if any(p.iterdir()):
                    raise TopoError(f"exists, is not empty and was not written by topo sweep (no {META}); "
                                    "refusing to write into it: choose another output", source=str(p), key="output")
                return
            try:
                old = json.loads(meta.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TopoError(f"cannot read {META}: {exc}", source=str(p), key="output") from None
            if old.get("columns") != self.schema.names:
                raise TopoError(f"holds the results of another study ({old.get('study')!r}) with other columns; "
                                "choose another output, or remove this folder", source=str(p), key="output")

    def open(self, version: str | None = None) -> None:
        """Create the folder and its marker (once), recording the study's ``version`` (see :meth:`prune`)."""
        if self.path is None:
            return
        try:
            self.path.mkdir(exist_ok=True)
        except OSError as exc:
            raise TopoError(f"cannot create the folder: {exc.strerror}", source=str(self.path), key="output") from None
        meta = {"generator": f"{SIGNATURE} {__version__} (topo sweep)", "topo_version": __version__,
                "study": self.study.name, "study_source": self.study.source, "study_text": self.study.text,
                "study_version": version, "columns": self.schema.names}
        with atomic_open(self.path / META, "w") as fh:
            json.dump(meta, fh, indent=1)

    def parts(self) -> list[Path]:
        if self.path is None or not self.path.is_dir():
            return []
        return sorted(self.path.glob("part-*.parquet"))

    def strays(self) -> list[str]:
        """Names in the folder that are not ours (neither a part, the marker, nor hidden): they break
        ``pandas.read_parquet(folder)`` (:func:`read_results` skips them)."""
        if self.path is None or not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir() if not p.name.startswith(("_", "."))
                      and not (p.name.startswith("part-") and p.name.endswith(".parquet")))

    def _tables(self, columns=None) -> list[pa.Table]:
        """The parts' tables then the in-memory ones; a part that cannot be read is set aside (see the module
        doc) and noted in :attr:`notices`."""
        out = []
        for p in self.parts():
            t = _read_part(p, columns, self.schema if columns is None else None)
            if t is None:
                self.notices.append(f"{p.name} could not be read (truncated?); set aside as .unreadable-{p.name}, "
                                    "its points are computed again")
                try:
                    os.replace(p, p.with_name(f".unreadable-{p.name}"))
                except OSError:
                    pass
                continue
            out.append(t)
        return out + [t.select(columns) if columns else t for t in self.memory]

    def prune(self, points: list[dict], version: str) -> int:
        """Make the folder hold the rows of this version of the study only: when the marker names another version,
        rewrite the parts keeping the rows of ``points`` (each point once) and return how many rows were dropped.

        Parameters
        ----------
        points : list of dict
            The study's points (:meth:`topo.sweep.Study.points`).
        version : str
            :meth:`topo.sweep.Study.version`.

        Returns
        -------
        int
            Rows removed (0 when the folder already holds this version, or is new).
        """
        if self.path is None or not (self.path / META).is_file():
            return 0
        try:
            old = json.loads((self.path / META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
        if old.get("study_version", "same" if (old.get("study_text"), old.get("topo_version")) ==
                   (self.study.text, __version__) else None) in (version, "same"):
            return 0  # (a folder written before versions were recorded: the same text and topo's version)
        parts = self.parts()
        tables = self._tables()
        if not tables:
            return 0
        table = pa.concat_tables(tables)
        labels = {p["point"]: p["label"] for p in points}
        keep = dedupe(table.filter(pc.is_in(table.column("point"), value_set=pa.array(list(labels)))))
        if keep.num_rows == table.num_rows:
            return 0
        if keep.num_rows:  # the kept rows as one part, labelled as this study names its designs
            keep = keep.set_column(keep.schema.get_field_index("label"), "label",
                                   pa.array([labels[p] for p in keep.column("point").to_pylist()], pa.string()))
            self._write(keep)
        new = self._name(keep.column("point").to_pylist()) if keep.num_rows else None
        for p in parts:
            if p.name != new and p.exists():
                os.unlink(p)
        return table.num_rows - keep.num_rows

    def done(self) -> set[str]:
        """Hashes of the points already recorded (a point whose worker died is not done: it is run again)."""
        out: set[str] = set()
        tables = self._tables(["point", "error_kind"])
        for t in tables:
            kinds = t.column("error_kind").to_pylist()
            out.update(pt for pt, k in zip(t.column("point").to_pylist(), kinds) if k != "worker")
        return out

    # --- rows -------------------------------------------------------------------------------------------------
    def table(self, rows: list[dict]) -> pa.Table:
        cols = {name: [_cell(r.get(name), t) for r in rows] for name, t in self._types.items()}
        return pa.Table.from_pydict(cols, schema=self.schema)

    def append(self, rows: list[dict]) -> None:
        """Record the rows of one finished batch: a new part file renamed into place when complete."""
        if not rows:
            return
        t = self.table(rows)
        if self.path is None:
            self.memory.append(t)
            return
        self._write(t)

    @staticmethod
    def _name(points: list[str]) -> str:
        import hashlib

        return "part-" + hashlib.sha256("".join(points).encode()).hexdigest()[:16] + ".parquet"

    def _write(self, t: pa.Table) -> None:
        """``t`` as a new part, renamed into place when complete."""
        # renamed into place whole, with the user's umask like every file topo writes (not mkstemp's 0600)
        with atomic_open(self.path / self._name(t.column("point").to_pylist()), "wb") as fh:
            pq.write_table(t, fh)

    def read(self) -> pa.Table:
        """Every recorded row (parts and memory), a point recorded twice kept once (see :func:`dedupe`)."""
        tables = self._tables()
        if not tables:
            return self.schema.empty_table()
        return dedupe(pa.concat_tables(tables))


def _kind(t: pa.DataType) -> str:
    if pa.types.is_floating(t):
        return "float64"
    if pa.types.is_integer(t):
        return "int64"
    if pa.types.is_boolean(t):
        return "bool"
    return "string"


def _read_part(path: Path, columns, schema) -> pa.Table | None:
    """A part's table, None when it cannot be read (truncated, not Parquet)."""
    try:
        return pq.read_table(path, columns=columns, schema=schema)
    except (OSError, pa.ArrowException):
        return None


def dedupe(table: pa.Table) -> pa.Table:
    """Each point once: a point recorded twice (its batch was lost, then run again; two runs into one folder)
    keeps a computed row over a lost batch's row (``error_kind = "worker"``), else its first row."""
    if table.num_rows == 0:
        return table
    points = table.column("point").to_pylist()
    lost = [k == "worker" for k in table.column("error_kind").to_pylist()]
    best: dict = {}
    for i, (p, bad) in enumerate(zip(points, lost)):
        j = best.get(p)
        if j is None or (lost[j] and not bad):
            best[p] = i
    if len(best) == table.num_rows:
        return table
    return table.take(pa.array(sorted(best.values()), type=pa.int64()))


def read_results(path: str | Path):
    """The rows in a sweep's output folder as a pandas DataFrame: every readable part (other files in the folder
    are skipped), each point once (:func:`dedupe`), in no particular order."""
    p = Path(path)
    if not (p / META).is_file():
        raise TopoError(f"is not the output of topo sweep (no {META})", source=str(p))
    tables = [t for t in (_read_part(x, None, None) for x in sorted(p.glob("part-*.parquet"))) if t is not None]
    if not tables:
        import pandas as pd

        return pd.DataFrame()
    return dedupe(pa.concat_tables(tables, promote_options="default")).to_pandas()
