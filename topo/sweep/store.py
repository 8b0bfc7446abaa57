"""A study's results on disk: a folder of Parquet part files, one per finished batch, each written whole.

::

    results.parquet/
        _topo_sweep.json          what wrote it: topo's version, the study's name, text and columns
        part-<hash>.parquet       one per finished batch, renamed into place only when complete

Every part has the same columns and types (:func:`schema`), so ``pandas.read_parquet("results.parquet")`` reads
the folder as one table (pyarrow skips names starting with ``_`` and ``.``). A study that stops (Ctrl-C, a lost
cluster, a power cut) leaves only complete parts; running it again reads their ``point`` hashes and computes the
rest. A folder is only written into when it is empty, new, or marked as ours by ``_topo_sweep.json`` with the same
columns; a file, or a folder of someone else's, is refused.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..atomic import SIGNATURE, atomic_open
from ..errors import TopoError
from .point import FIGURES

__all__ = ["schema", "ResultStore", "META", "read_results"]

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


def schema(study) -> pa.Schema:
    """The columns of a study's rows: its inputs (typed by their values: a number axis stays numeric; a mixed one
    becomes text), the figures of what it computes, then ``point``, ``design``, ``label``, ``error``,
    ``error_kind``, ``compute_s`` (seconds the point took: the only column that differs between runs) and
    ``topo_version``."""
    cols: dict[str, str] = {}
    for k in study.input_columns:
        cols[k] = "int64" if k == "seed" else _input_type(study.axes[k])
    for c in study.compute:
        for k, (t, _) in FIGURES[c].items():
            cols.setdefault(k, t)
    for k, t in COMMON:
        cols[k] = t
    meta = {b"generator": f"{SIGNATURE} {__version__} (topo sweep)".encode(), b"study": study.name.encode()}
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

    def open(self) -> None:
        """Create the folder and its marker (once)."""
        if self.path is None:
            return
        try:
            self.path.mkdir(exist_ok=True)
        except OSError as exc:
            raise TopoError(f"cannot create the folder: {exc.strerror}", source=str(self.path), key="output") from None
        meta = {"generator": f"{SIGNATURE} {__version__} (topo sweep)", "topo_version": __version__,
                "study": self.study.name, "study_source": self.study.source, "study_text": self.study.text,
                "columns": self.schema.names}
        with atomic_open(self.path / META, "w") as fh:
            json.dump(meta, fh, indent=1)

    def parts(self) -> list[Path]:
        if self.path is None or not self.path.is_dir():
            return []
        return sorted(self.path.glob("part-*.parquet"))

    def done(self) -> set[str]:
        """Hashes of the points already recorded (a point whose worker died is not done: it is run again)."""
        out: set[str] = set()
        tables = [pq.read_table(p, columns=["point", "error_kind"]) for p in self.parts()] + \
            [t.select(["point", "error_kind"]) for t in self.memory]
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
        import hashlib

        name = "part-" + hashlib.sha256("".join(r["point"] for r in rows).encode()).hexdigest()[:16] + ".parquet"
        fd, tmp = tempfile.mkstemp(prefix=".part-", suffix=".tmp", dir=self.path)
        os.close(fd)
        try:
            pq.write_table(t, tmp)
            os.replace(tmp, self.path / name)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def read(self) -> pa.Table:
        """Every recorded row (parts and memory), a point recorded twice kept once (its latest complete row)."""
        tables = [pq.read_table(p, schema=self.schema) for p in self.parts()] + self.memory
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables(tables)


def _kind(t: pa.DataType) -> str:
    if pa.types.is_floating(t):
        return "float64"
    if pa.types.is_integer(t):
        return "int64"
    if pa.types.is_boolean(t):
        return "bool"
    return "string"


def read_results(path: str | Path):
    """The rows in a sweep's output folder as a pandas DataFrame (every part, in no particular order)."""
    p = Path(path)
    if not (p / META).is_file():
        raise TopoError(f"is not the output of topo sweep (no {META})", source=str(p))
    parts = sorted(p.glob("part-*.parquet"))
    if not parts:
        import pandas as pd

        return pd.DataFrame()
    return pa.concat_tables([pq.read_table(x) for x in parts]).to_pandas()
