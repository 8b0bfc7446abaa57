"""The study page's figures (issue 30, item 9): every design's full label in a legend (labels cut at 60
characters gave 48 traces two names), the heatmap over independent dimensions (a zipped group is one: not a
diagonal), and present for a failure study (its failure axis by its unexpanded values)."""

import numpy as np
import pytest

from topo.report.sweep import _box, _heatmap, dimension_values, dimensions, render_sweep_page
from topo.sweep import study_from_dict, summarize, sweep

pytest.importorskip("plotly")


def test_box_names_are_the_full_labels_each_once():
    long = "fabric.tiers[0].oversubscription=1 fabric.tiers[1].oversubscription=1 layout=tp=8,pp="
    s = study_from_dict({"spec": "dgx-h100-superpod", "axes": {"collective": "all_reduce", "size": "1MiB",
                                                                "gpus": [8, 16, 32]}})
    df = sweep(s, scheduler="serial")
    df["label"] = [long + str(g) for g in df["gpus"]]  # labels that agree on their first 60 characters
    fig = _box(df, "time_s")
    names = [t.name for t in fig.data]
    assert names == [f"D{i + 1}: {long}{g}" for i, g in enumerate((8, 16, 32))]  # whole, and distinct
    assert fig.layout.showlegend is True
    assert [t.x[0] for t in fig.data] == ["D1", "D2", "D3"]


def test_heatmap_takes_a_zipped_group_as_one_dimension():
    s = study_from_dict({"spec": "dgx-h100-superpod", "zip": [["collective", "size"]],
                         "axes": {"collective": ["all_reduce", "all_gather"], "size": ["1MiB", "2MiB"],
                                  "gpus": [8, 16]}})
    assert dimensions(s) == [["collective", "size"], ["gpus"]]
    df = sweep(s, scheduler="serial")
    a, b = dimension_values(df, s, ["collective", "size"]), dimension_values(df, s, ["gpus"])
    hm = _heatmap(df, a, b, ("collective / size", "gpus"), "time_s").data[0]
    assert list(hm.y) == ["all_reduce / 1MiB", "all_gather / 2MiB"] and list(hm.x) == ["8", "16"]
    z = np.asarray(hm.z, dtype=float)
    assert z.shape == (2, 2) and not np.isnan(z).any()  # before: collective against size, a diagonal of 2 of 4
    assert z[0, 1] == df[(df["collective"] == "all_reduce") & (df["gpus"] == 16)]["time_s"].mean()


def test_a_failure_study_has_its_heatmap():
    s = study_from_dict({"spec": "dgx-h100-superpod", "seeds": 2,
                         "axes": {"collective": ["all_reduce", "alltoall"], "gpus": 64, "size": "1MiB",
                                  "placement": "one_per_server", "fail": ["", "random:leaf-spine:0.2:{seed}"]}})
    df = sweep(s, scheduler="serial")
    page = render_sweep_page(df, summarize(df), s)
    assert 'data-figure="heatmap"' in page  # before: the seeded axis was left out, one dimension, no heatmap
    fails = dimension_values(df, s, ["fail"])
    assert set(fails) == {"", "random:leaf-spine:0.2:{seed}"}
