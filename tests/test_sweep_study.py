"""Study files: axes, seeds, zip, hashes, and bad input as one clear line (no Dask here)."""

import pytest

from topo.errors import TopoError
from topo.sweep import load_study, study_from_dict, summarize, sweep
from topo.sweep.study import bundled_studies

BASE = {"spec": "dgx-h100-superpod", "axes": {"collective": "alltoall", "gpus": 64, "size": "64MiB"}}


def _study(**axes):
    d = {"spec": "dgx-h100-superpod", "axes": dict(BASE["axes"], **axes)}
    return d


def test_issue_example_expands_as_product_with_seeds(tmp_path):
    f = tmp_path / "study.toml"
    f.write_text('''spec = "dgx-h100-superpod"
compute = ["estimate"]
seeds = 1000
[axes]
"fabric.tiers[0].oversubscription" = [1, 2]
collective = ["all_reduce", "alltoall"]
size = ["1MiB", "1GiB"]
fail = ["", "random:spine:0.01:{seed}"]
''')
    pts = load_study(f).points()
    assert len(pts) == 2 * 2 * 2 * (1 + 1000)
    seeded = [p for p in pts if p["inputs"]["seed"] is not None]
    assert seeded[0]["inputs"]["fail"] == "random:spine:0.01:0"
    assert seeded[999]["inputs"]["fail"] == "random:spine:0.01:999"
    assert len({p["point"] for p in pts}) == len(pts)  # every point its own hash
    # the draws of one design share its design hash; the design without seeds has its own
    assert len({p["design"] for p in pts}) == 16
    assert pts[0]["inputs"]["fabric.tiers[0].oversubscription"] == 1  # first axis varies slowest


def test_hash_is_stable_and_depends_on_inputs_and_spec_text(tmp_path):
    a = study_from_dict(_study(size=["1MiB", "2MiB"])).points()
    b = study_from_dict(_study(size=["2MiB", "1MiB"])).points()
    assert a[0]["point"] == b[1]["point"] and a[1]["point"] == b[0]["point"]
    spec = tmp_path / "s.toml"
    from topo.spec.load import resolve_spec_path

    text = resolve_spec_path("dgx-h100-superpod").read_text()
    spec.write_text(text)
    c = study_from_dict(dict(_study(size="1MiB"), spec=str(spec))).points()
    spec.write_text(text.replace('name = "dgx-h100-superpod"', 'name = "edited"'))
    d = study_from_dict(dict(_study(size="1MiB"), spec=str(spec))).points()
    assert c[0]["point"] != d[0]["point"]  # an edited spec is a new point


def test_zip_varies_axes_together():
    s = study_from_dict(_study(collective=["all_reduce", "alltoall"], size=["1MiB", "1GiB"]) |
                        {"zip": [["collective", "size"]]})
    got = [(p["inputs"]["collective"], p["inputs"]["size"]) for p in s.points()]
    assert got == [("all_reduce", "1MiB"), ("alltoall", "1GiB")]


@pytest.mark.parametrize("data, key, words", [
    (_study(**{"fabric.tiers[0].oversubscripton": [1, 2]}), "axes.fabric.tiers[0].oversubscripton",
     "did you mean 'oversubscription'"),
    (_study(**{"fabric.tiers[7].oversubscription": [1, 2]}), "axes.fabric.tiers[7].oversubscription",
     "out of range"),
    (_study(**{"fabric.tiers[nosuch].radix": [64]}), "axes.fabric.tiers[nosuch].radix", "no item named"),
    (_study(collective=[]), "axes.collective", "is empty"),
    (_study(colective=["alltoall"]), "axes.colective", "did you mean 'collective'"),
    (_study(fail="random:spine:0.1:{seed}"), "axes.fail", "no seeds"),
    (dict(_study(), seeds=4), "seeds", "no axis value contains {seed}"),
    (dict(_study(collective=["all_reduce", "alltoall"]), zip=[["collective", "size"]]), "zip", "as many values"),
    (dict(_study(), compute=["estimate", "simulate"]), "compute", "unknown computation 'simulate'"),
    (dict(_study(), specs=["dgx-h100-superpod"]), "specs", "give the specs once"),
    (dict(_study(model="llama3-8b")), "axes.model", "does not compute"),
    (dict(_study(), spec="no-such-spec"), "spec: no-such-spec", "no such spec"),
])
def test_bad_study_is_one_clear_error(data, key, words):
    with pytest.raises(TopoError) as err:
        study_from_dict(data, source="study.toml")
    assert err.value.key == key
    assert err.value.source == "study.toml"
    assert words in err.value.message
    assert "\n" not in err.value.line()


def test_a_value_the_spec_rejects_is_an_error_row_not_a_bad_study():
    s = study_from_dict(_study(**{"fabric.tiers[0].oversubscription": [2, 0.5]}, size="1MiB"))
    df = sweep(s, scheduler="serial")
    assert df["error"].isna().tolist() == [True, False]
    assert df["error"].iat[1].endswith("bundled spec dgx-h100-superpod (--set fabric.tiers[0].oversubscription=0.5): "
                                       "fabric.tiers[0].oversubscription: must be >= 1.0, got 0.5")
    assert df["error_kind"].iat[1] == "input"
    assert df["time_s"].iat[0] > 0 and df["time_s"].isna().iat[1]


def test_summary_percentiles_and_worst_seed():
    s = study_from_dict({"spec": "dgx-h100-superpod", "seeds": 8,
                         "axes": {"fabric.tiers[0].oversubscription": 2, "collective": "alltoall", "gpus": 64,
                                  "placement": "one_per_server", "size": "256MiB",
                                  "fail": "random:leaf-spine:0.2:{seed}"}})
    df = sweep(s, scheduler="serial")
    t = df["time_s"].to_numpy()
    assert len(set(t)) > 2  # the draws differ (else this test guards nothing)
    row = summarize(df).set_index("figure").loc["time_s"]
    import numpy as np

    assert row["draws"] == 8 and row["errors"] == 0
    assert row["worst"] == t.max() and row["worst_seed"] == int(df["seed"].iat[int(t.argmax())])
    assert row["p50"] == np.percentile(t, 50) and row["p99"] == np.percentile(t, 99)
    assert row["mean"] == pytest.approx(t.mean(), rel=1e-15)
    bw = summarize(df).set_index("figure").loc["busbw_GBps"]  # lower is worse for a bandwidth
    assert bw["worst"] == df["busbw_GBps"].min()


def test_bundled_studies_load():
    names = bundled_studies()
    assert {"failures-100k", "designs-405b"} <= set(names)
    f = load_study("failures-100k")
    assert len(f.points()) == 2 * (1 + 1000)
    d = load_study("designs-405b")
    assert len(d.points()) == 10 * 2  # 10 networks (zipped) x 2 layouts


def test_train_and_plan_are_the_library_figures_and_plan_takes_train_mfu():
    import topo
    from topo.plan import plan
    from topo.plan.train_time import TrainingJob
    from topo.training.model import load_model
    from topo.training.parallel import make_layout
    from topo.training.step import estimate_step

    df = sweep({"spec": "dgx-h100-superpod", "compute": ["train", "plan"],
                "axes": {"model": "llama3-8b", "layout": ["tp=8,dp=128", "tp=4,pp=2,dp=128"], "global_batch": 1024}},
               scheduler="serial")
    assert df["error"].isna().all()
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    r = estimate_step(fabric, load_model("llama3-8b"), make_layout(tp=4, pp=2, dp=128, global_batch=1024))
    assert df["step_time_s"].iat[1] == r.step_time_s and df["mfu"].iat[1] == r.mfu
    # as `topo plan --model llama3-8b --layout ...` prices it: the step's MFU, precision (bf16: the catalog's default
    # is fp8) and parameters (the checkpoint, the storage it sizes); walk27: the sweep took the MFU alone and
    # applied a bf16 MFU to the fp8 peak, twice the FLOP, on storage sized for the Chinchilla-sized model; and its
    # job (goodput69): the GPUs it holds leave no hot spare here (1,024 of 1,024), as topo plan --model's job
    job = {"workload": {"mfu": r.mfu, "precision": r.precision, "params": float(load_model("llama3-8b").total_params)}}
    # and its job's GPUs (rev68: 1,024, every GPU: no hot spare left, as topo plan --model has it since plan68)
    held = TrainingJob(model="llama3-8b", gpus=r.gpus, step_time_s=r.step_time_s, tokens_per_step=r.tokens_per_step)
    assert r.gpus == fabric.num_gpus == 1024
    with_job = plan(fabric, layers=[("--model", job)], collectives=False, training=held).headline()
    assert with_job["effective_flop"] != plan(fabric, layers=[("--model", job)], collectives=False).headline()[
        "effective_flop"]  # the job's GPUs matter here: without them the sweep's row was the plan of a smaller job
    assert df["effective_flop"].iat[1] == with_job["effective_flop"]
    assert df["goodput"].iat[1] == with_job["goodput"]
    assert df["capex_usd"].iat[1] == with_job["capex_usd"]
    assert with_job["effective_flop"] != plan(fabric, mfu=r.mfu, collectives=False).headline()["effective_flop"]

