"""The output folder of a study (issue 30, items 1 and 2): a point is keyed by the content of the files it reads,
a folder holds one version of its study, each point is read once, a truncated part is set aside and recomputed,
and a stray file does not hide the rows. Serial runs only (no Dask here)."""

import os

import pandas as pd
import pyarrow.parquet as pq
import pytest

from topo.resources import data_dir
from topo.sweep import SweepRun, read_results, study_from_dict, sweep
from topo.sweep.run import _worker_rows
from topo.sweep.store import ResultStore

SMALL = {"name": "small", "spec": "dgx-h100-superpod",
         "axes": {"collective": "alltoall", "gpus": 64, "size": ["1MiB", "4MiB"]}}


def _train_study(model_path):
    return {"name": "mh", "spec": "dgx-h100-superpod", "compute": ["train"],
            "axes": {"model": str(model_path), "layout": "tp=8,dp=8", "global_batch": 64}}


def test_an_edited_model_file_is_computed_again_and_its_old_row_removed(tmp_path):
    # the example: change `layers` in the model file and run again; the step time must follow the file
    model = tmp_path / "mymodel.toml"
    text = (data_dir("models") / "llama3-8b.toml").read_text()
    assert "layers = 32" in text
    model.write_text(text)
    out = tmp_path / "mh.parquet"
    first = sweep(study_from_dict(_train_study(model)), out, scheduler="serial")
    model.write_text(text.replace("layers = 32", "layers = 16"))
    run = SweepRun()
    second = sweep(study_from_dict(_train_study(model)), out, scheduler="serial", run=run)
    assert (run.skipped, run.computed, run.replaced) == (0, 1, 1)
    assert second["error"].isna().all()
    # half the layers: the step's compute halves, so the step is shorter (not the old row's figure)
    assert second["step_time_s"].iat[0] < 0.75 * first["step_time_s"].iat[0]
    disk = pd.read_parquet(out)  # the folder holds the new version only
    assert len(disk) == 1 and disk["step_time_s"].iat[0] == second["step_time_s"].iat[0]
    assert any("earlier version" in n for n in run.notices)


def test_bundled_names_keep_their_hash_and_a_file_is_keyed_by_content(tmp_path):
    named = study_from_dict(_train_study("llama3-8b")).points()[0]
    f = tmp_path / "m.toml"
    f.write_text((data_dir("models") / "llama3-8b.toml").read_text())
    a = study_from_dict(_train_study(f)).points()[0]["point"]
    f.write_text(f.read_text() + "\n# a comment\n")
    b = study_from_dict(_train_study(f)).points()[0]["point"]
    assert a != b and named["point"] not in (a, b)


def test_an_edited_study_replaces_rows_it_no_longer_has_and_keeps_the_rest(tmp_path):
    out = tmp_path / "small.parquet"
    sweep(study_from_dict(SMALL), out, scheduler="serial")
    edited = dict(SMALL, axes=dict(SMALL["axes"], size=["4MiB", "16MiB"]))
    run = SweepRun()
    df = sweep(study_from_dict(edited), out, scheduler="serial", run=run)
    assert (run.skipped, run.computed, run.replaced) == (1, 1, 1)  # 4MiB kept, 1MiB removed, 16MiB computed
    disk = pd.read_parquet(out)
    assert sorted(disk["size"]) == ["16MiB", "4MiB"] and len(disk) == 2
    assert sorted(disk["label"]) == sorted(df["label"]) == ["size=16MiB", "size=4MiB"]
    # the same study again: nothing removed, nothing computed
    again = SweepRun()
    sweep(study_from_dict(edited), out, scheduler="serial", run=again)
    assert (again.replaced, again.computed, again.notices) == (0, 0, [])


def test_read_and_read_results_give_each_point_once(tmp_path):
    study = study_from_dict(SMALL)
    out = tmp_path / "small.parquet"
    store = ResultStore(out, study)
    store.open(study.version())
    pts = study.points()
    store.append(_worker_rows(pts, "the batch was lost: KilledWorker"))  # a lost batch, then its rerun
    sweep(study, out, scheduler="serial")
    assert sum(pq.read_metadata(p).num_rows for p in out.glob("part-*.parquet")) == 4  # each point twice on disk
    for df in (read_results(out), ResultStore(out, study).read().to_pandas()):
        assert len(df) == 2 and df["error"].isna().all()


def test_a_truncated_part_is_set_aside_and_its_points_computed_again(tmp_path):
    out = tmp_path / "small.parquet"
    ref = sweep(study_from_dict(SMALL), out, scheduler="serial", batch_size=1)
    part = sorted(out.glob("part-*.parquet"))[0]
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])  # a disk that filled up under another tool
    run = SweepRun()
    df = sweep(study_from_dict(SMALL), out, scheduler="serial", run=run)
    assert (run.skipped, run.computed) == (1, 1)
    assert df["error"].isna().all()
    pd.testing.assert_frame_equal(df.drop(columns="compute_s"), ref.drop(columns="compute_s"), check_exact=True)
    assert any("could not be read" in n for n in run.notices)
    assert (out / f".unreadable-{part.name}").is_file()
    assert len(pd.read_parquet(out)) == 2  # the folder reads as one table again


def test_a_stray_file_is_noted_and_read_results_skips_it(tmp_path):
    out = tmp_path / "small.parquet"
    sweep(study_from_dict(SMALL), out, scheduler="serial")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(Exception):
        pd.read_parquet(out)  # pyarrow reads every file not starting with _ or .
    assert len(read_results(out)) == 2
    run = SweepRun()
    sweep(study_from_dict(SMALL), out, scheduler="serial", run=run)
    assert any("notes.txt" in n and "read_results" in n for n in run.notices)


def test_parts_take_the_users_umask(tmp_path):
    import stat

    old = os.umask(0o027)  # a team's umask: group may read, others not
    try:
        sweep(study_from_dict(SMALL), tmp_path / "o.parquet", scheduler="serial")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "o.parquet").iterdir()}
    assert modes and set(modes.values()) == {0o640}, modes  # before: parts were mkstemp's 0600


def test_size_is_stored_as_bytes_beside_its_label_and_seeds_as_whole_numbers(tmp_path):
    study = {"spec": "dgx-h100-superpod", "seeds": 2,
             "axes": {"collective": "alltoall", "gpus": 16, "size": ["1MiB", "4MiB"], "ecmp": "hash",
                      "hash_seed": "{seed}"}}
    sweep(study_from_dict(study), tmp_path / "o.parquet", scheduler="serial")
    t = pq.read_table(tmp_path / "o.parquet")
    assert str(t.schema.field("size").type) == "string" and str(t.schema.field("size_bytes").type) == "int64"
    assert str(t.schema.field("seed").type) == "int64" and str(t.schema.field("hash_seed").type) == "int64"
    df = t.to_pandas()
    assert dict(zip(df["size"], df["size_bytes"])) == {"1MiB": 2**20, "4MiB": 4 * 2**20}
    assert (df["hash_seed"] == df["seed"]).all()


def test_pandas_reads_the_seed_as_a_nullable_whole_number(tmp_path):
    # walk18: a design without draws has no seed; pandas.read_parquet gave float64 (1.0, NaN) although every part
    # stores int64: the parts now carry pandas' metadata for an Int64 column
    study = {"spec": "dgx-h100-superpod", "seeds": 2,
             "axes": {"collective": "alltoall", "gpus": 16, "size": "1MiB",
                      "fail": ["", "random:leaf-spine:0.1:{seed}"]}}
    sweep(study_from_dict(study), tmp_path / "o.parquet", scheduler="serial")
    df = pd.read_parquet(tmp_path / "o.parquet")
    assert str(df["seed"].dtype) == "Int64"
    assert sorted(df["seed"].dropna().tolist()) == [0, 1] and df["seed"].isna().sum() == 1
    assert str(read_results(tmp_path / "o.parquet")["seed"].dtype) == "Int64"
