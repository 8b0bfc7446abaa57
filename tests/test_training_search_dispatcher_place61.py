"""The search chooses the expert dispatcher (walk23's leftover 3, place61): Megatron-Core's all-to-all and its flex
dispatcher on HybridEP's and on DeepEP's kernels are a searched dimension unless the layout fixes them."""

import json

import pytest

import topo
from conftest import run_cli
from topo.training.model import load_model
from topo.training.search import expert_dispatchers, search_layouts

NARROW = dict(micro_batches=(1,), dp_sharding=("zero1",), recompute=("none",), contention=False, top=3)


def test_the_dispatchers_a_search_tries():
    """The values ParallelLayout allows for ep_dispatcher ("alltoall", "deepep") and ep_flex_backend ("hybridep",
    "deepep"): three choices, fewer where the layout fixes one; a dense model has no choice to make."""
    moe = load_model("qwen3-30b-a3b")
    a2a, hybrid, v1 = ({"ep_dispatcher": "alltoall"}, {"ep_dispatcher": "deepep", "ep_flex_backend": "hybridep"},
                       {"ep_dispatcher": "deepep", "ep_flex_backend": "deepep"})
    assert expert_dispatchers(moe, {}) == (a2a, hybrid, v1)
    assert expert_dispatchers(moe, {"ep_dispatcher": "alltoall"}) == (a2a,)
    assert expert_dispatchers(moe, {"ep_dispatcher": "deepep"}) == (hybrid, v1)
    assert expert_dispatchers(moe, {"ep_flex_backend": "deepep"}) == (a2a, v1)
    assert expert_dispatchers(load_model("llama3-8b"), {}) == ({},)


@pytest.fixture(scope="module")
def two_racks():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=2"]))


def test_the_search_ranks_the_fastest_dispatcher_first(two_racks):
    """Qwen3-30B-A3B on 128 GB200 (two NVL72 racks at 64 each), a batch of 128: with every dispatcher tried the
    search's #1 is the best of the searches that fix each one (the flex dispatcher's, EP 128 over both racks:
    363.7 ms against the all-to-all's best, EP 64 in a rack, 385.5 ms). Before, the search kept the layout's default
    all-to-all and ranked 385.5 ms first."""
    model = load_model("qwen3-30b-a3b")
    free = search_layouts(two_racks, model, 128, 128, **NARROW)
    fixed = {d: search_layouts(two_racks, model, 128, 128, ep_dispatcher=d, **NARROW) for d in ("alltoall", "deepep")}
    best = min(fixed.values(), key=lambda r: r.ranked[0].step_time_s)
    assert free.ranked[0].step_time_s == pytest.approx(best.ranked[0].step_time_s, rel=1e-12)
    assert free.ranked[0].layout["ep_dispatcher"] == "deepep" and free.ranked[0].layout["ep"] == 128
    assert fixed["alltoall"].ranked[0].step_time_s > free.ranked[0].step_time_s * 1.05
    assert {r.layout["ep_dispatcher"] for r in fixed["alltoall"].ranked} == {"alltoall"}


def test_the_search_table_names_the_dispatcher_unless_the_layout_holds_it():
    """The table's dispatcher column (``deepep/BACKEND`` for the flex dispatcher), left out when ``--layout`` holds
    ``ep_dispatcher = "alltoall"`` (nothing chosen); the --json layout carries both fields either way."""
    args = ["train", "gb200-nvl72-superpod", "--set", "cluster.num_units=2", "--model", "qwen3-30b-a3b", "--gpus",
            "128", "--global-batch", "128", "--search", "--top", "2", "--micro-batch", "1", "--dp-sharding", "zero1",
            "--recompute", "none", "--no-contention"]
    text = run_cli(*args, check=True).stdout.splitlines()
    assert "dispatcher" in text[1].split() and "deepep/deepep" in text[2].split(), text[:3]
    held = run_cli(*args, "--layout", "ep_dispatcher=alltoall", "--json", check=True).stdout
    assert {r["layout"]["ep_dispatcher"] for r in json.loads(held)["ranked"]} == {"alltoall"}
