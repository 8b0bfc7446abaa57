"""Issue 29's bad-input rule: a recipe option that cannot apply gets one clear line naming the flag and what is
allowed, never a silently different model. An MoE option (padded capacity, a per-expert loop instead of the grouped
GEMM, EP overlap, a dispatcher) on a dense model ran the dense model unchanged and said nothing (rev41's audit);
``--ep`` on a dense model was already refused."""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import MOE_FIELDS, ParallelLayout, check_layout, make_layout

DENSE = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "2", "--dp", "16", "--global-batch", "64"]
MOE = ["train", "dgx-h100-superpod", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "8", "--dp", "32",
       "--global-batch", "256"]


@pytest.mark.parametrize("pair, line", [
    ("moe_capacity_factor=1.25", "error: --layout: moe_capacity_factor: 1.25 applies to a mixture-of-experts "
                                 "model's experts; llama3-8b is dense; allowed: the default none (or no "
                                 "moe_capacity_factor)"),
    ("moe_grouped_gemm=false", "error: --layout: moe_grouped_gemm: false applies to a mixture-of-experts model's "
                               "experts; llama3-8b is dense; allowed: the default true (or no moe_grouped_gemm)"),
])
def test_moe_option_on_a_dense_model_is_one_line(pair, line):
    r = run_cli(*DENSE, "--layout", pair)
    assert r.returncode == 2 and r.stderr.strip() == line and "Traceback" not in r.stderr


def test_overlap_flag_names_itself():
    r = run_cli(*DENSE, "--overlap", "ep=on")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: --overlap: overlap_ep: true applies to a mixture-of-experts model")


def test_the_same_options_run_on_an_moe_model():
    """On Mixtral the options are taken, and padding to capacity 1.25 moves the step (the experts' GEMMs carry
    1.25 x the mean rows)."""
    base = run_cli(*MOE, "--json", check=True)
    padded = run_cli(*MOE, "--layout", "moe_capacity_factor=1.25", "--json", check=True)
    import json
    assert json.loads(padded.stdout)["step_time_s"] > json.loads(base.stdout)["step_time_s"]


def test_every_moe_field_is_checked_and_defaults_pass():
    """Each field of MOE_FIELDS away from its default is refused on a dense model; at its default it is not."""
    model = load_model("llama3-8b")
    check_layout(model, make_layout(tp=2, dp=4, global_batch=8))
    others = {bool: lambda v: not v, float: lambda v: v + 1.0, type(None): lambda v: 2, int: lambda v: v + 4}
    for key in MOE_FIELDS:
        default = ParallelLayout.model_fields[key].default
        if isinstance(default, str):
            ann = ParallelLayout.model_fields[key].annotation
            choices = [a for a in getattr(ann, "__args__", ()) if a != default]
            value = choices[0]
        else:
            value = others[type(default)](default)
        lay = make_layout(tp=2, dp=4, global_batch=8, **{key: value})
        with pytest.raises(TopoError, match="applies to a mixture-of-experts"):
            check_layout(model, lay)
