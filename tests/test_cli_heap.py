"""The command line keeps freed large arrays' memory for reuse (topo.cli.heap, calibration-findings section 169):
fewer page faults, the same results."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

# Frees 1 MiB (glibc's dynamic mmap threshold rises to it, its trim threshold to 2 MiB), then 50 times holds eight
# 512 KiB arrays (4 MiB, from the heap) and frees them: the 4 MiB then free at the top of the heap is over the trim
# threshold, returned to the system and faulted in again next time (1,024 pages a time) unless the thresholds are
# raised (mallopt(3)).
_LOOP = """
import resource, sys
import numpy as np
from topo.cli.heap import keep_freed_memory
print(keep_freed_memory() if sys.argv[1] == "keep" else False)
a = np.ones(1 << 17)
del a
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    held = [np.ones(1 << 16) for _ in range(8)]
    del held
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""
_PAGES = 50 * (4 << 20) // 4096  # what the loop would fault in if every round's memory came back fresh


def _faults(mode: str, env: dict | None = None) -> tuple[bool, int]:
    proc = subprocess.run([sys.executable, "-c", _LOOP, mode], capture_output=True, text=True, cwd=ROOT, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    kept, faults = proc.stdout.split()
    return kept == "True", int(faults)


def test_kept_memory_is_not_faulted_in_again():
    kept, faults = _faults("keep")
    if not kept:
        pytest.skip("no glibc mallopt here")
    assert faults < _PAGES // 10
    assert _faults("default")[1] > _PAGES // 2  # glibc's own thresholds: the loop's pages come back fresh


def test_a_user_s_malloc_setting_wins():
    assert _faults("keep", {"MALLOC_TRIM_THRESHOLD_": "131072"})[0] is False


def test_only_the_process_s_own_command_line_sets_it(monkeypatch, capsys):
    import topo.cli.main as cli

    calls = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append(1))
    assert cli.main(["list", "--json"]) == 0
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["topo", "list", "--json"])
    assert cli.main() == 0
    assert calls == [1]
