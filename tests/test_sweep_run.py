"""Running studies: a real (small) LocalCluster gives the serial path's figures bit for bit, a killed worker loses
nothing, a rerun resumes, a scheduler that does not answer is one clear error."""

import os
import signal
import time

import pandas as pd
import pytest

from topo.errors import TopoError
from topo.sweep import SweepRun, read_results, study_from_dict, sweep
from topo.sweep.run import local_cluster, plan_batches

distributed = pytest.importorskip("distributed")

FAST = {"spec": "dgx-h100-superpod", "seeds": 6,
        "axes": {"fabric.tiers[0].oversubscription": 2, "collective": "alltoall", "gpus": 64,
                 "placement": "one_per_server", "size": ["64MiB", "256MiB"],
                 "fail": ["", "random:leaf-spine:0.2:{seed}"]}}
# points of about 0.2 s each, so that a worker is busy when it is killed
SLOW = {"spec": "dgx-h100-superpod", "seeds": 10,
        "axes": {"collective": "all_reduce", "gpus": 512, "size": "1GiB", "fail": "random:leaf-spine:0.1:{seed}"}}


def _figures(df):
    return df.drop(columns=["compute_s"])


@pytest.fixture(scope="module")
def client():
    cluster = local_cluster(2)  # the cluster topo sweep starts
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def serial_fast():
    return sweep(study_from_dict(FAST), scheduler="serial")


def test_local_cluster_equals_serial_bit_for_bit(client, serial_fast, tmp_path):
    run = SweepRun()
    df = sweep(study_from_dict(FAST), tmp_path / "out.parquet", client=client, batch_size=2, run=run)
    assert run.batches == 7 and run.workers == 2 and run.computed == 14
    assert df["error"].isna().all()
    pd.testing.assert_frame_equal(_figures(df), _figures(serial_fast), check_exact=True)
    # what is on disk is the same table, readable by pandas alone
    disk = pd.read_parquet(tmp_path / "out.parquet").sort_values("point").reset_index(drop=True)
    assert sorted(disk["point"]) == sorted(df["point"])
    assert disk.set_index("point")["time_s"].sort_index().equals(df.set_index("point")["time_s"].sort_index())


def test_workers_keep_glibc_malloc_defaults_and_one_blas_thread(client):
    # Dask's default MALLOC_TRIM_THRESHOLD_=65536 made a 100k-GPU point ~1.8x slower (every large array a fresh
    # mmap); topo's workers must not inherit it, and run one BLAS/OpenMP thread each
    env = client.run(lambda: {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS",
                                                               "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    assert len(env) == 2
    for e in env.values():
        assert e == {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                     "MKL_NUM_THREADS": "1"}


def test_guided_batches_shrink_to_single_points_and_keep_fabrics_apart():
    points = [{"inputs": {"spec": "a", "fail": str(i)}, "point": str(i)} for i in range(100)]
    points += [{"inputs": {"spec": "b", "fail": str(i)}, "point": f"b{i}"} for i in range(3)]
    batches = plan_batches(points, 2)
    sizes = [len(b) for b in batches]
    # spec a: ceil(remaining / 8) each time: 13, 11, 10, 9, 7, 7, 6, ... down to single points
    expect, left = [], 100
    while left:
        expect.append(min(32, -(-left // 8)))
        left -= expect[-1]
    assert sizes[:len(expect)] == expect and expect[0] == 13 and expect[-4:] == [1, 1, 1, 1]
    assert sizes[len(expect):] == [1, 1, 1]  # spec b on its own: 3 points, ceil(3 / 8) = 1 each
    assert [p["point"] for b in batches for p in b] == [p["point"] for p in points]
    assert {p["inputs"]["spec"] for p in batches[len(expect)]} == {"b"}
    assert [len(b) for b in plan_batches(points[:100], 2, batch_size=40)] == [40, 40, 20]
    assert max(len(b) for b in plan_batches(points * 10, 1)) == 32


def test_rerun_resumes_and_skips_what_is_there(client, serial_fast, tmp_path):
    out = tmp_path / "out.parquet"
    half = dict(FAST, axes=dict(FAST["axes"], size="64MiB"))
    first = SweepRun()
    sweep(study_from_dict(half), out, scheduler="serial", run=first)
    assert first.computed == 7
    parts = sorted(p.name for p in out.glob("part-*"))
    run = SweepRun()
    df = sweep(study_from_dict(FAST), out, client=client, run=run)
    assert (run.skipped, run.computed) == (7, 7)  # only the 256MiB points were computed
    assert set(parts) <= {p.name for p in out.glob("part-*")}  # the first run's parts are kept
    pd.testing.assert_frame_equal(_figures(df), _figures(serial_fast), check_exact=True)
    again = SweepRun()
    sweep(study_from_dict(FAST), out, client=client, run=again)
    assert (again.skipped, again.computed) == (14, 0)
    assert len(read_results(out)) == 14


def test_killed_worker_loses_nothing(client, tmp_path):
    study = study_from_dict(SLOW)
    expected = sweep(study, scheduler="serial")
    killed = []

    def kill_one(done, total, elapsed):
        if not killed:  # after the first batch: a worker that is running a batch right now
            busy = [w for w, tasks in client.processing().items() if tasks]
            assert busy, "no worker is running a batch: nothing would be lost"
            victim = busy[0]
            pid = client.run(os.getpid, workers=[victim])[victim]
            os.kill(pid, signal.SIGKILL)  # a worker process that dies mid-batch
            killed.append(pid)

    run = SweepRun()
    df = sweep(study, tmp_path / "out.parquet", client=client, batch_size=1, progress=kill_one, run=run)
    assert killed
    assert df["error"].isna().all(), df["error"].dropna().tolist()
    pd.testing.assert_frame_equal(_figures(df), _figures(expected), check_exact=True)
    assert len(read_results(tmp_path / "out.parquet")) == 10
    deadline = time.time() + 20  # the nanny restarts the killed worker for the next tests
    while len(client.scheduler_info(n_workers=-1)["workers"]) < 2 and time.time() < deadline:
        time.sleep(0.2)


def test_scheduler_that_does_not_answer_is_a_clear_error_quickly():
    start = time.perf_counter()
    with pytest.raises(TopoError) as err:
        sweep(study_from_dict(FAST), scheduler="tcp://127.0.0.1:9", connect_timeout_s=1)
    assert time.perf_counter() - start < 10
    assert err.value.key == "scheduler"
    assert err.value.message.startswith("no Dask scheduler answers at tcp://127.0.0.1:9 within 1 s")


def test_an_output_that_is_not_ours_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(TopoError) as err:
        sweep(study_from_dict(FAST), tmp_path, scheduler="serial")
    assert err.value.key == "output" and "was not written by topo sweep" in err.value.message
    assert (tmp_path / "notes.txt").read_text() == "mine"
    f = tmp_path / "file.parquet"
    f.write_text("x")
    with pytest.raises(TopoError, match="not a folder"):
        sweep(study_from_dict(FAST), f, scheduler="serial")
    assert f.read_text() == "x"


def test_rows_of_a_lost_batch_are_run_again_and_replaced(tmp_path, serial_fast):
    from topo.sweep.run import _worker_rows
    from topo.sweep.store import ResultStore

    study = study_from_dict(FAST)
    out = tmp_path / "out.parquet"
    store = ResultStore(out, study)
    store.open()
    lost = study.points()[:3]
    store.append(_worker_rows(lost, "the batch was lost: KilledWorker"))  # as a batch that killed every worker
    run = SweepRun()
    df = sweep(study, out, scheduler="serial", run=run)
    assert (run.skipped, run.computed) == (0, 14)
    assert df["error"].isna().all() and len(df) == 14
    pd.testing.assert_frame_equal(_figures(df), _figures(serial_fast), check_exact=True)
