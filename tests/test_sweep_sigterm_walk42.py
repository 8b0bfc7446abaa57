"""walk42: SIGTERM (``kill``, a batch system's stop) ends a study as Ctrl-C does.

Before, SIGTERM killed ``topo sweep`` at once: the parts already renamed into place were whole, but the command said
nothing of what was kept and Python's resource tracker printed "There appear to be 12 leaked semaphore objects".
Now the local cluster is closed, one line says how many points are in the folder, and the exit status is 128 + 15
(the shell's convention for a process ended by signal 15).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import ROOT
from topo.sweep import read_results


def test_sigterm_stops_the_study_with_whole_parts(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "topo", "sweep", "failures-100k", "--seeds", "200", "--workers",
                             "1", "-o", "f.parquet"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    folder = tmp_path / "f.parquet"
    deadline = time.monotonic() + 300
    while not list(folder.glob("part-*.parquet")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, "the study ended before its first part: give it more points"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-500:]
    assert "Traceback" not in err and "leaked semaphore" not in err, err[-800:]
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("terminated (SIGTERM): ") and "of 402 points are in f.parquet (whole batches)" in last
    kept = int(last.split(": ", 1)[1].split(" of ")[0].replace(",", ""))
    names = {p.name for p in folder.iterdir()}
    assert names == {"_topo_sweep.json"} | {n for n in names if n.startswith("part-") and n.endswith(".parquet")}
    assert len(read_results(folder)) == kept > 0  # every part whole, as many points as the line says


STUDY = 'spec = "dgx-h100-superpod"\n[axes]\ncollective = "all_reduce"\ngpus = 16\nsize = ["1MiB", "1GiB"]\n'


def _sweep_in_process(tmp_path, monkeypatch, capsys):
    """``topo sweep`` through the CLI's own entry (``topo.cli.main.main``) in this process, a tiny serial study,
    with a handler of the caller's on SIGTERM; returns the exit status, the handler SIGTERM has after it, and the
    caller's handler."""
    from topo.cli.main import main

    (tmp_path / "study.toml").write_text(STUDY)
    monkeypatch.chdir(tmp_path)

    def callers(signum, frame):  # a caller's own SIGTERM handler (an embedding application's, a test runner's)
        raise AssertionError("the caller's handler ran: the sweep's was not in place")

    before = signal.signal(signal.SIGTERM, callers)
    try:
        status = main(["sweep", "study.toml", "--scheduler", "serial", "-o", "s.parquet"])
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before)
    capsys.readouterr()
    return status, after, callers


def test_an_in_process_sweep_gives_back_the_sigterm_handler_it_replaced(tmp_path, monkeypatch, capsys):
    """rev104's Left 2 (findings section 439): ``_run`` installs its own SIGTERM handler (one raising
    KeyboardInterrupt) and its ``finally`` puts the caller's back. The subprocess test above cannot see the restore
    (the process ends); here a sweep run in this process leaves the caller's handler in place."""
    status, after, callers = _sweep_in_process(tmp_path, monkeypatch, capsys)
    assert status == 0 and after is callers


def test_an_in_process_sweep_stopped_by_sigterm_gives_it_back_too(tmp_path, monkeypatch, capsys):
    """The stopped path: SIGTERM during the sweep runs the sweep's handler (the caller's is not called), the
    command returns 128 + 15, and the caller's handler is back (the ``finally`` after the ``except`` that
    returns)."""
    import topo.sweep

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises KeyboardInterrupt at once (PEP 475: no retry after a raising handler)
        raise AssertionError("SIGTERM did not stop the sweep")

    monkeypatch.setattr(topo.sweep, "sweep", terminated)
    status, after, callers = _sweep_in_process(tmp_path, monkeypatch, capsys)
    assert status == 128 + signal.SIGTERM and after is callers
