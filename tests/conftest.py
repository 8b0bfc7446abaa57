"""Shared test helpers: small specs built from dicts, and the path of the shared reference data."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from cli_runner import in_process, prints_only

# Every run draws fresh examples: no test replays failures stored in .hypothesis/ (issue 8: one failure found once
# made every later run fail). A failing example is printed with the failure and pinned as an explicit test.
settings.register_profile("topo", database=None)
settings.load_profile("topo")

ROOT = Path(__file__).resolve().parents[1]
# The public reference data travels with the project (data/reference/, copied from the team's shared folder with
# every source); TOPO_DATA_DIR points elsewhere. Missing data is a failure, never a skip.
DATA = Path(os.environ.get("TOPO_DATA_DIR", ROOT / "data" / "reference"))


def tier(name, radix=64, rate="400 Gb/s", **kw):
    return {"name": name, "radix": radix, "port_rate": rate, **kw}


def spec_dict(kind="rail_optimized", tiers=None, cluster=None, **kw):
    """A small valid spec as a dict (2-tier, QM9700-like, 8-GPU servers with 8 x 400G NICs)."""
    d = {
        "name": "test",
        "gpu": "H100",
        "server": {"gpus": 8, "nics": 8, "nic_rate": "400 Gb/s"},
        "cluster": cluster or {"num_units": 2},
        "fabric": {"kind": kind, "tiers": tiers or [tier("leaf", oversubscription=1), tier("spine")]},
    }
    for k, v in kw.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict):
            d[k] = {**d[k], **v}
        else:
            d[k] = v
    return copy.deepcopy(d)


def run_cli(*args, cwd=ROOT, check=False, fresh=False):
    """Run the real command line: in this interpreter when the call only prints (tests/cli_runner.py says which
    calls do), else, or when ``fresh``, in a ``python -m topo`` subprocess."""
    if not fresh and prints_only(args, cwd):
        proc = in_process(args, cwd)
    else:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "topo", *args], capture_output=True, text=True, cwd=cwd,
                              env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"topo {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


# The README's `topo sweep designs-405b --report` (the bundled 98,304-GPU study, about a minute of CPU): run once a
# session, in a fresh folder, as tests/test_readme.py runs every README command; tests/test_study_designs_405b.py
# checks the rows it wrote (issue 29, section 206: the study was computed twice, once by each test).
DESIGNS_405B_ARGV = ("sweep", "designs-405b", "--report")


@pytest.fixture(scope="session")
def designs_405b_run(tmp_path_factory):
    """``(folder, proc)``: the folder ``topo sweep designs-405b --report`` ran in (its ``designs-405b.parquet``
    and ``designs-405b-report.html``) and the finished subprocess."""
    folder = tmp_path_factory.mktemp("designs-405b")
    return folder, run_cli(*DESIGNS_405B_ARGV, cwd=folder)


@pytest.fixture
def reference() -> Path:
    """The folder of public reference data (``data/reference/``): missing is a failure, not a skip."""
    if not DATA.is_dir():
        pytest.fail(f"reference data not found at {DATA}: it ships with the project (data/reference/)")
    return DATA


def routed_flows(paths, sizes):
    """Routed flows made by hand: flow i crosses the resources in ``paths[i]`` with all of its ``sizes[i]``
    bytes (for contention tests with hand-derived answers)."""
    import numpy as np

    from topo.engine.route import Routed

    res = np.concatenate([np.asarray(p) for p in paths])
    flow = np.concatenate([np.full(len(p), i) for i, p in enumerate(paths)])
    weight = np.concatenate([np.full(len(p), float(s)) for p, s in zip(paths, sizes)])
    n = len(paths)
    return Routed(res=res, weight=weight, flow=flow, num_flows=n, flow_bytes=np.asarray(sizes, float),
                  latency_s=np.zeros(n), network=np.zeros(n, bool))


def every_kernel_a_call(host_s):
    """``kernels.toml [launch]`` overrides that price every kernel as a framework call of ``host_s`` (the kernels
    Transformer Engine's C++ launches in a loop too: ``operators.launch_calls``) and no per-expert module work
    (``operators.expert_host_s``): for a mechanism test that counts launches or needs a host-bound block."""
    zero = ("torch_py_op_s", "torch_cpp_op_s", "py_call_s", "pybind_call_s", "py_object_s")
    return {"host_s": host_s, "cpp_launch_s": host_s, "cpp_gemm_s": host_s, **dict.fromkeys(zero, 0.0)}
