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
