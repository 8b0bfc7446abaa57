"""rev105's review of findings section 429 (te1x114: each run's Transformer Engine from its container, TE 2.x's
userbuffers copy of a row-parallel FP8 output-gradient shard): the mutations no test caught (findings section 441).

Sources: PEP 440 (peps.python.org/pep-0440, "Pre-releases": ``rcN`` with no separator in the normal form;
"Developmental releases": ``.devN``) and TE's own versions (NVIDIA/TransformerEngine@bee4649c
``build_tools/VERSION.txt`` "2.2.0.dev0", f05f12c9 "2.5.0"); the containers' tables
(docs.nvidia.com/nemo-framework/user-guide/24.09/softwarecomponentversions.html for NeMo 24.07 / 24.09,
NVIDIA/NeMo@v2.3.0 and v2.4.0 ``requirements/manifest.json`` for 25.04 / 25.07, NVIDIA-NeMo/Megatron-Bridge@2075a5b8
``docs/releases/software-versions.md`` lines 9, 33, 57, 80 for 26.04, 26.02, 25.11, 25.09).
"""

import sys

import pytest

from conftest import ROOT
from topo.cli.train import _framework_options
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, kernels_launched, launch_calls, op_time_s
from topo.training.parallel import make_layout
from topo.training.te_version import parse_te_version, run_te, ub_grad_output_copies


def _lay(**kw):
    base = dict(tp=4, pp=4, dp=4, global_batch=128, seq_len=4096, precision="fp8", sequence_parallel=True,
                overlap_tp=True)
    return make_layout(**{**base, **kw})


def _out_proj(lay):
    return next(op for op in block_ops(load_model("llama2-70b"), lay, "*", "hopper") if op.name == "out_proj")


@pytest.mark.parametrize("version, want", [("2.2.0rc1", (2, 2)), ("2.2.0.dev0", (2, 2)), ("1.8.0.dev0", (1, 8)),
                                           ("2.10.0", (2, 10)), ("1.13", (1, 13))])
def test_release_candidates_and_dev_releases_parse(version, want):
    """The forms the docstring allows, as PEP 440 writes them (a release candidate ``rcN`` joined to the release, a
    dev release after a dot; rev105: a parser without ``rc``, or one needing a dot before it, failed no test)."""
    assert parse_te_version(version) == want
    assert ub_grad_output_copies(version) == (1 if want[0] == 2 else 0)


@pytest.mark.parametrize("software, te", [
    ("NeMo 24.07", "1.8.0.dev0"), ("NeMo 24.09", "1.10"), ("NeMo 25.04", "2.2.0.dev0"), ("NeMo 25.07", "2.5.0"),
    ("NeMo 25.09", "2.7.0"), ("NeMo 25.11", "2.9"), ("NeMo 26.02", "2.12"), ("NeMo 26.04", "2.14")])
def test_every_listed_container_reads_its_published_te(software, te):
    """Each container's TE as its published table gives it (module docstring); the major version is what a step
    pays by (rev105: NeMo 25.07 mapped to a 1.x TE failed no test)."""
    assert run_te(software) == te


def test_a_bf16_layer_pays_no_copy_at_any_te():
    """A layer an FP8 layout keeps in BF16 (``operators.bf16_layers``, priced at ``precision = "bf16"``) quantises
    no output gradient, so TE 2.x has no quantised shard to copy (v2.14 ``module/base.py``
    ``fill_userbuffers_buffer_for_all_gather``: the copy is of ``Float8TensorStorage._data``); BF16's own copy into
    the buffer is at every version (section 429 Left 1). Its backward is the same at TE 1.8 and 2.2 (rev105: the
    copy counted whatever the pass's precision failed no test)."""
    g = gpu_compute("H100")
    v1, v2 = _out_proj(_lay(te_version="1.8.0.dev0")), _out_proj(_lay(te_version="2.2.0.dev0"))
    assert v2.ub_grad_copy_elem_bytes == 2.0  # the FP8 layers' op copies
    assert op_time_s(v2, g, "bf16", backward=True) == op_time_s(v1, g, "bf16", backward=True)
    assert kernels_launched(v2, "bf16", True) == kernels_launched(v1, "bf16", True)
    assert launch_calls(v2, "bf16", True) == launch_calls(v1, "bf16", True)


def test_the_benchmark_sets_each_rows_container_te():
    """benchmarks/training_accuracy.py reads each row's TE from its software string; a container no table lists
    leaves the layout's default (rev105: dropping the row's te_version failed no test)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    model = training_accuracy._row_model({"model": "llama2-70b", "run_id": "nemo2407_x"})
    for software, want in (("NeMo 24.07", "1.8.0.dev0"), ("MLPerf Training v4.1 (NeMo 24.09 container)", "1.10"),
                           ("NeMo 25.02.01 (DGXC 25.04)", None), ("Megatron-LM dev (commit not stated)", None)):
        row = {"run_id": "nemo_x", "software": software, "precision": "fp8", "fsdp": "0", "model": "llama2-70b",
               "gpu": "H100", "note": "", "published_date": "unknown"}
        kw = dict(pp=1, vpp=1, dp=8)
        training_accuracy._framework_kw(row, model, kw)
        assert kw.get("te_version") == want, software


def test_the_options_line_shows_te_version_and_when_it_is_idle():
    """``topo train``'s framework-options line names a te_version that differs from the default, marked idle where
    nothing reads it: without FP8 (only an FP8 gradient is copied) or without userbuffers (rev105: dropping it from
    the line, or never marking it idle, failed no test)."""
    m, g = load_model("llama2-70b"), gpu_compute("H100")
    line = _framework_options(_lay(te_version="1.8").model_dump(), m, g)
    assert "te_version 1.8" in line and "no effect" not in line
    line = _framework_options(_lay(te_version="1.8", precision="bf16").model_dump(), m, g)
    assert "te_version 1.8 (no effect: only an FP8 output gradient" in line
    line = _framework_options(_lay(te_version="1.8", overlap_tp=False).model_dump(), m, g)
    assert "te_version 1.8 (no effect: no userbuffers TP overlap" in line
