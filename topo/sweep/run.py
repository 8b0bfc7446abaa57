"""Running a study: batches of points as Dask tasks, rows recorded as each batch finishes.

Where it runs: ``scheduler=None`` starts an embedded :class:`distributed.LocalCluster` with one single-threaded
worker process per core (or uses the address in Dask's configuration, ``scheduler-address``, when one is set); an
address (``tcp://host:8786``) runs the same tasks on an existing Dask cluster of many machines; ``"serial"`` runs
them in this process, without Dask (the reference the others must match bit for bit).

A task is a batch of points with the same spec, so a worker builds each fabric once (:mod:`.point` caches it)
and the scheduler's per-task overhead is paid once per batch. Only the points' inputs and the specs' text travel.
A worker that dies has its batch run again on another (Dask reschedules it, up to
``distributed.scheduler.allowed-failures`` times); a batch that keeps killing workers becomes error rows
(``error_kind = "worker"``) that the next run retries.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
import warnings
from typing import Callable

import pandas as pd

from .. import __version__
from ..errors import TopoError
from ..units import UnitError, parse_size_bytes
from .point import run_batch
from .scheduler import check_address, connect, scheduler_from_file, wait_for_workers
from .store import ResultStore
from .study import Study, load_study, study_from_dict

__all__ = ["sweep", "plan_batches", "local_cluster", "SweepRun", "WORKER_ENV"]

_CONNECT_TIMEOUT_S = 10.0
_WORKER_TIMEOUT_S = 60.0  # how long an existing cluster without workers is waited for
_MAX_BATCH = 32  # points per task at most: a task of cheap points (~5 ms each) still costs ~1.5 ms to schedule
_GUIDED_SHARE = 4  # a batch takes 1/(4 x workers) of the points left (guided self-scheduling)
# What the embedded cluster's worker processes start with. Dask's default pre-spawn environment sets
# MALLOC_TRIM_THRESHOLD_=65536, which switches off glibc's dynamic mmap threshold: every array over 128 KiB is then a
# fresh mmap and its pages are faulted in again, and a 100k-GPU point spends half its CPU in the kernel (measured:
# 0.35 -> 0.65 s a point of failures-100k, system time 1.9 -> 6.1 s over 18 points). topo's arrays are freed and
# reallocated at every point, so its workers keep glibc's defaults. numpy's BLAS and OpenMP get one thread per
# worker (one worker per core already uses every core).
WORKER_ENV = {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}


class SweepRun:
    """What a run did, beside its table: counts, where it ran, the output folder."""

    def __init__(self):
        self.total = 0
        self.skipped = 0
        self.computed = 0
        self.errors = 0
        self.batches = 0
        self.workers = 0
        self.where = "serial"
        self.elapsed_s = 0.0
        self.replaced = 0  # rows of another version of the study removed from the output (ResultStore.prune)
        self.notices: list[str] = []  # what the user should be told about the output folder, one line each

    def to_dict(self) -> dict:
        return dict(vars(self))


def plan_batches(points: list[dict], workers: int, batch_size: int | None = None) -> list[list[dict]]:
    """Split ``points`` into batches: points of one fabric (spec and spec fields) together, in study order.

    Parameters
    ----------
    points : list of dict
        The study's points (:meth:`topo.sweep.Study.points`).
    workers : int
        Workers that will run the batches.
    batch_size : int, optional
        Points per batch. Default: guided self-scheduling (Polychronopoulos and Kuck, 1987), as in OpenMP's
        ``schedule(guided)``: each batch of a fabric takes ``ceil(remaining / (4 x workers))`` of its points, at
        most 32 and at least 1, so the first batches amortise the per-task overhead and the last ones are single
        points: no worker waits long at the end for another's big last batch.

    Returns
    -------
    list of list of dict
        The batches, in the order they should be submitted.
    """
    if not points:
        return []
    if batch_size is not None and batch_size < 1:
        raise TopoError(f"must be 1 or more, got {batch_size}", key="batch_size")
    by_fabric: dict = {}
    for p in points:
        inputs = p["inputs"]
        key = (inputs["spec"],) + tuple((k, str(v)) for k, v in inputs.items() if "." in k or "[" in k)
        by_fabric.setdefault(key, []).append(p)
    out = []
    for group in by_fabric.values():
        i = 0
        while i < len(group):
            n = batch_size or min(_MAX_BATCH, math.ceil((len(group) - i) / (_GUIDED_SHARE * max(1, workers))))
            out.append(group[i:i + n])
            i += n
    return out


def _rows(batch: list[dict], results: list[dict]) -> list[dict]:
    out = []
    for p, r in zip(batch, results):
        row = dict(p["inputs"])
        if "size" in row:
            row["size_bytes"] = _size_bytes(row["size"])
        row.update(r)
        row.update(point=p["point"], design=p["design"], label=p["label"], topo_version=__version__)
        out.append(row)
    return out


def _size_bytes(size) -> int | None:
    """The bytes a ``size`` axis value means (None for one the estimate will refuse, at its point)."""
    try:
        return parse_size_bytes(size)
    except (UnitError, TypeError):
        return None


def _worker_rows(batch: list[dict], why: str) -> list[dict]:
    return _rows(batch, [{"error": why, "error_kind": "worker"} for _ in batch])


def _client(scheduler: str | None, workers: int | None, connect_timeout_s: float, points: int = 0,
            notify=None, worker_timeout_s: float = _WORKER_TIMEOUT_S):
    """``(client, cluster or None, description)``; a scheduler that cannot be used or does not answer, or a
    cluster without workers after ``worker_timeout_s``, is a TopoError (:mod:`.scheduler`)."""
    import dask
    from distributed import Client

    address = scheduler or dask.config.get("scheduler-address", None)
    if address and address != "local":
        client = connect(address, connect_timeout_s)
        try:
            n = wait_for_workers(client, address, worker_timeout_s, notify)
        except BaseException:
            client.close()
            raise
        return client, None, f"the Dask cluster at {address} ({n} workers)"
    # no more worker processes than points (each costs ~0.1 s and ~100 MB to start) or cores, unless asked
    n = workers or max(1, min(os.cpu_count() or 1, points or (os.cpu_count() or 1)))
    # A terminal's Ctrl-C reaches the whole process group: the worker processes ignore it (they inherit an ignored
    # SIGINT, and Python then installs no KeyboardInterrupt handler in them), and this process, which alone handles
    # it, closes the cluster. Ctrl-C during the few seconds of start-up is therefore ignored.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = local_cluster(n)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    client = Client(cluster, set_as_default=False)
    return client, cluster, f"a local Dask cluster ({n} worker process{'es' if n != 1 else ''})"


def local_cluster(workers: int):
    """The embedded cluster: ``workers`` single-threaded worker processes with :data:`WORKER_ENV` (and without
    Dask's ``MALLOC_TRIM_THRESHOLD_``), no dashboard, quiet logs.

    Parameters
    ----------
    workers : int
        Worker processes.

    Returns
    -------
    distributed.LocalCluster
    """
    import logging

    import dask
    from distributed import LocalCluster

    env = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
           if k != "MALLOC_TRIM_THRESHOLD_"}
    env.update(WORKER_ENV)
    # the scheduler's HTTP server (no dashboard) takes another port when 8787 is taken, and warns: not the user's
    # concern, and a study's output stays quiet
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=logging.CRITICAL)


def sweep(study: Study | dict | str, output=None, *, scheduler: str | None = None, workers: int | None = None,
          client=None, batch_size: int | None = None, progress: Callable[[int, int, float], None] | None = None,
          connect_timeout_s: float = _CONNECT_TIMEOUT_S, run: SweepRun | None = None,
          inputs=(), scheduler_file: str | None = None, notify: Callable[[str], None] | None = None,
          worker_timeout_s: float = _WORKER_TIMEOUT_S) -> pd.DataFrame:
    """Run a study and return one row per point (see :mod:`topo.sweep`).

    Parameters
    ----------
    study : Study, dict or str
        A study (:func:`topo.sweep.load_study`), a study as a dict (the TOML's tables, see
        :func:`topo.sweep.study_from_dict`), or the path or bundled name of a study file.
    output : str or Path, optional
        The results folder (:mod:`topo.sweep.store`): rows are appended as each batch finishes, and points already
        in it are not computed again. None keeps the rows in memory only.
    scheduler : str, optional
        None: an embedded LocalCluster (or Dask's configured ``scheduler-address``); an address such as
        ``tcp://10.0.0.5:8786``: an existing Dask cluster; ``"serial"``: this process, no Dask.
    workers : int, optional
        Worker processes of the embedded cluster (default: one per core, and no more than the points to compute).
    client : distributed.Client, optional
        Run on this client instead (it is not closed).
    batch_size : int, optional
        Points per task (default: see :func:`plan_batches`).
    progress : callable, optional
        Called as ``progress(points_done, points_total, elapsed_s)`` after each batch.
    connect_timeout_s : float
        How long to wait for a scheduler address to answer.
    run : SweepRun, optional
        Filled with counts (points skipped, computed, errors) and where the study ran.
    inputs : sequence of path, optional
        Files the output must not be (the study file as the user named it).
    scheduler_file : str, optional
        A Dask scheduler file (``dask scheduler --scheduler-file FILE``): its address is the scheduler.
    notify : callable, optional
        Called with a line the user should see while the study runs (``waiting for workers at ...``).
    worker_timeout_s : float
        How long a cluster without workers is waited for before giving up.

    Returns
    -------
    pandas.DataFrame
        One row per point of the study, in the study's order: its inputs, its figures, ``error`` (None when it
        went well), ``point`` and ``design`` hashes, ``label``, ``compute_s``, ``topo_version``.

    Raises
    ------
    TopoError
        A bad study, output or scheduler (one line). A point that fails is an error row, not an exception.
    KeyboardInterrupt
        Interrupted: the batches finished so far are in ``output``, complete, and a rerun resumes from them.
    """
    start = time.perf_counter()
    scheduler = _scheduler(scheduler, scheduler_file)
    study = _as_study(study)
    run = run if run is not None else SweepRun()
    if client is None:
        _check_scheduler(scheduler, connect_timeout_s)  # before the output folder is created or pruned
    store = ResultStore(output, study, inputs=list(inputs) + [p for p, _ in study.specs.values()])
    points = study.points()
    todo = _open_store(store, study, points, output, run)
    if todo:
        _execute(study, todo, store, run, scheduler, workers, client, batch_size, progress,
                 (connect_timeout_s, worker_timeout_s, notify), start)
    else:
        run.where = "nothing to compute: every point is in the output"
    frame = _frame(store, points)
    _tally(run, store, frame, output, start)
    return frame


def _tally(run: SweepRun, store: ResultStore, frame: pd.DataFrame, output, start: float) -> None:
    """Fill ``run`` at the end: the store's notices (and one for stray files in the output), errors, time."""
    run.notices += store.notices
    strays = store.strays()
    if strays:
        run.notices.append(f"{output} holds files that are not its parts ({', '.join(strays[:3])}"
                           f"{', ...' if len(strays) > 3 else ''}): pandas.read_parquet on the folder fails on "
                           "them; topo.sweep.read_results reads the parts only")
    run.errors = int(frame["error"].notna().sum()) if len(frame) else 0
    run.elapsed_s = time.perf_counter() - start


def _scheduler(scheduler: str | None, scheduler_file: str | None) -> str | None:
    """The scheduler address given, or read from ``scheduler_file`` (not both)."""
    if scheduler_file is None:
        return scheduler
    if scheduler is not None:
        raise TopoError("give a scheduler address or a scheduler file, not both", key="scheduler_file")
    return scheduler_from_file(scheduler_file)


def _check_scheduler(scheduler: str | None, connect_timeout_s: float) -> None:
    """Refuse a scheduler address (given, or Dask's configured ``scheduler-address``) that is malformed or where
    nothing answers, so that a run that cannot start leaves no output folder behind (:func:`.scheduler.check_address`)."""
    if scheduler == "serial":
        return
    import dask

    address = scheduler or dask.config.get("scheduler-address", None)
    if address and address != "local":
        check_address(address, connect_timeout_s)


def _as_study(study: Study | dict | str) -> Study:
    """A study given as one, as a dict of the TOML's tables, or as the path or bundled name of its file."""
    if isinstance(study, dict):
        return study_from_dict(study)
    if not isinstance(study, Study):
        return load_study(study)
    return study


def _open_store(store: ResultStore, study: Study, points: list, output, run: SweepRun) -> list:
    """Open ``store`` for the study's current version, its rows of an earlier version removed (said in
    ``run.notices``), and return the points not yet in it (``run.total`` and ``run.skipped`` counted)."""
    version = study.version()
    run.replaced = store.prune(study.kept_points() if study.file_seeds else points, version)
    if run.replaced:
        run.notices.append(f"removed {run.replaced:,} rows of an earlier version of {study.name} from {output} "
                           "(the study, a spec or a file it reads, or topo changed since they were computed)")
    done = store.done()
    todo = [p for p in points if p["point"] not in done]
    run.total, run.skipped = len(points), len(points) - len(todo)
    store.open(version)
    return todo


def _execute(study, todo, store, run, scheduler, workers, client, batch_size, progress, waits, start):
    total = run.total
    done_count = run.skipped
    compute, specs = list(study.compute), study.specs
    if scheduler == "serial":
        batches = plan_batches(todo, 1, batch_size)
        run.batches, run.workers, run.where = len(batches), 1, "this process (serial)"
        for b in batches:
            store.append(_rows(b, run_batch([p["inputs"] for p in b], compute, specs)))
            run.computed += len(b)
            done_count += len(b)
            if progress:
                progress(done_count, total, time.perf_counter() - start)
        return
    from distributed import as_completed

    own = client is None
    cluster = None
    if own:
        connect_timeout_s, worker_timeout_s, notify = waits
        client, cluster, run.where = _client(scheduler, workers, connect_timeout_s, len(todo), notify,
                                             worker_timeout_s)
    else:
        run.where = "the given Dask client"
    futures = []
    try:
        n = len(client.scheduler_info(n_workers=-1).get("workers", {})) or 1
        batches = plan_batches(todo, n, batch_size)
        run.batches, run.workers = len(batches), n
        owner = {}
        for b in batches:
            key = f"topo-sweep-{b[0]['point']}-{len(b)}"
            f = client.submit(run_batch, [p["inputs"] for p in b], compute, specs, key=key, pure=False)
            owner[f.key] = b
            futures.append(f)
        for f in as_completed(futures, loop=client.loop):
            b = owner[f.key]
            try:
                rows = _rows(b, f.result())
            except Exception as exc:  # KilledWorker: the batch killed every worker it was given
                rows = _worker_rows(b, f"the batch was lost: {type(exc).__name__}: {exc}")
            store.append(rows)
            run.computed += len(b)
            done_count += len(b)
            if progress:
                progress(done_count, total, time.perf_counter() - start)
            f.release()
    finally:
        for f in futures:
            if not f.done():
                f.cancel()
        if own:
            client.close()
            if cluster is not None:
                cluster.close()


def _frame(store: ResultStore, points: list[dict]) -> pd.DataFrame:
    table = store.read()  # each point once
    df = table.to_pandas()
    order = {p["point"]: i for i, p in enumerate(points)}
    df = df[df["point"].isin(order)]
    df = df.iloc[sorted(range(len(df)), key=lambda i: order[df["point"].iat[i]])].reset_index(drop=True)
    labels = {p["point"]: p["label"] for p in points}  # as this study names its designs (a resumed row was
    df["label"] = df["point"].map(labels)              # recorded by a study that may have had fewer axes)
    for f in table.schema:  # whole-number columns with gaps (seed: none for a design without seeds)
        if f.name in df and str(f.type) == "int64":
            df[f.name] = df[f.name].astype("Int64")
    return df
