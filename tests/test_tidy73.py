"""tidy73: the reviews' leftovers (issue 29), each rule in one place."""

import dataclasses

import pytest

from topo.fabric.builders import build_fabric
from topo.plan import plan
from topo.plan.train_time import job_layer
from topo.spec import load_spec
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def llama_step():
    """Llama 3 8B at tp 8, dp 128 on the bundled DGX H100 SuperPOD (the README's plan --model job), contention off."""
    fabric = build_fabric(load_spec("dgx-h100-superpod"))
    return estimate_step(fabric, load_model("llama3-8b"), make_layout(tp=8, dp=128, global_batch=256),
                         contention=False)


def test_plan_and_train_intervals_are_one_formula(llama_step):
    """rev72 Left (section 326): plan's interval (PlanResult.time_to_train) and train's (StepResult.train_budget) were
    two expressions of one formula. Both now call train_time.time_to_train_interval_s: at goodput 1 they are equal to
    the bit, and at the plan's goodput the plan's ends are train's over the goodput, to the bit (at_step / goodput)."""
    step = llama_step
    assert "low_s" in step.uncertainty and step.uncertainty["low_s"] < step.uncertainty["high_s"]
    train = step.train_budget(1e12)["time_to_train_interval_s"]
    _, job = job_layer("llama3-8b", step, "bf16", 8e9, tokens=1e12)
    r = plan("dgx-h100-superpod", collectives=False, training=job)
    g = r.reliability.goodput
    assert 0 < g < 1
    assert r.time_to_train["time_to_train_interval_s"] == [x / g for x in train]
    one = dataclasses.replace(r, reliability=dataclasses.replace(r.reliability, goodput=1.0))
    assert one.time_to_train["time_to_train_interval_s"] == train
    # the closed form: tokens x step_end / tokens_per_step (256 sequences of 8,192 tokens a step)
    assert train == pytest.approx([1e12 * step.uncertainty[k] / (256 * 8192) for k in ("low_s", "high_s")],
                                  rel=1e-12)
