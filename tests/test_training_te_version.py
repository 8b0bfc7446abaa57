"""The Transformer Engine a run's container ships, and userbuffers' copy of the FP8 output gradient that TE 2.x makes
and 1.x does not (topo/training/te_version.py, findings section 429).

TE 1.x casts a row-parallel layer's output gradient straight into userbuffers' dgrad all-gather buffer
(NVIDIA/TransformerEngine v1.8 ``transformer_engine/pytorch/module/base.py`` lines 674-687: ``get_ubuf_output(0)``
as ``cast_to_fp8``'s ``out``); TE 2.x quantises it, then ``copy_into_buffer`` (v2.2 lines 838-850): one copy of the
rank's FP8 shard, read and written, a row-parallel linear and micro-batch backward. Closed form on Llama 2 70B at TP 4
with sequence parallelism (one sequence of 4,096 tokens): the output projection's gradient shard is ``4096 / 4 x
8192`` FP8 elements, 2 bytes moved each, and one kernel and one call more.

Containers: docs.nvidia.com/nemo-framework/user-guide/24.09/softwarecomponentversions.html (NeMo 24.07: TE
1.8.0.dev0, 24.09: 1.10); NVIDIA-NeMo/Megatron-Bridge@2075a5b8 docs/releases/software-versions.md (NeMo 26.04: 2.14).
"""

import tomllib

import pytest

from topo.errors import TopoError
from topo.resources import data_dir
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import block_ops, kernels_launched, launch_calls, op_time_s
from topo.training.parallel import make_layout
from topo.training.te_version import NEWEST, parse_te_version, run_te, ub_grad_output_copies

H, TP, SEQ = 8192, 4, 4096


def _lay(**kw):
    base = dict(tp=TP, pp=4, dp=4, global_batch=128, seq_len=SEQ, precision="fp8", sequence_parallel=True,
                overlap_tp=True)
    return make_layout(**{**base, **kw})


def _rs(lay, kind="*", name="out_proj"):
    return next(op for op in block_ops(load_model("llama2-70b"), lay, kind, "hopper") if op.name == name)


def test_a_run_reads_its_container_s_te():
    """The containers the NeMo rows name, read by cuDNN's rule (a patch release reads its release, MLPerf's
    banner its NeMo container); one no source gives (NeMo 25.02) reads none: the layout's default."""
    assert run_te("NeMo 24.07") == "1.8.0.dev0"
    assert run_te("MLPerf Training v4.1 (NeMo 24.09 container)") == "1.10"
    assert run_te("NeMo 25.04.01 (DGXC 25.05.04)") == "2.2.0.dev0"
    assert run_te("NeMo 26.04") == "2.14"
    assert run_te("NeMo 25.02.01 (DGXC 25.04)") is None
    assert run_te("Megatron-LM (commit not stated)") is None


def test_the_default_is_the_newest_listed_and_every_entry_is_sourced():
    rel = tomllib.loads((data_dir("compute") / "te_releases.toml").read_text(encoding="utf-8"))["release"]
    assert NEWEST == max((e["te"] for e in rel.values()), key=parse_te_version)
    assert all(e["status"] == "published" and e["source"] for e in rel.values())
    assert make_layout(tp=1, pp=1, dp=1, global_batch=8, seq_len=128).te_version == NEWEST


def test_te_1_casts_into_the_buffer_te_2_copies_into_it():
    assert ub_grad_output_copies("1.8.0.dev0") == 0 and ub_grad_output_copies("1.10") == 0
    assert ub_grad_output_copies("2.2.0.dev0") == 1 and ub_grad_output_copies("2.14") == 1


def test_te_2_s_copy_of_the_gradient_shard_in_closed_form():
    """The output projection's backward at TE 2.2 against 1.8: the shard's FP8 bytes read and written, one kernel's
    launch gap, one kernel and one call more."""
    g = gpu_compute("H100")
    v1, v2 = _rs(_lay(te_version="1.8.0.dev0")), _rs(_lay(te_version="2.2.0.dev0"))
    copy_s = memory_s(g.kernels, 2 * (SEQ / TP) * H)
    t1, t2 = (op_time_s(op, g, "fp8", backward=True) for op in (v1, v2))
    assert t2 - t1 == pytest.approx(copy_s + g.kernels.launch_gpu_s, rel=1e-9)
    assert kernels_launched(v2, "fp8", True) == kernels_launched(v1, "fp8", True) + 1
    assert launch_calls(v2, "fp8", True)[0] == launch_calls(v1, "fp8", True)[0] + 1
    assert op_time_s(v2, g, "fp8") == op_time_s(v1, g, "fp8")  # forward: no copy
    assert _rs(_lay(te_version="2.2"), "-", "fc2").ub_grad_copy_elem_bytes == 2.0  # fc2 too


def test_only_a_quantised_row_parallel_gradient_through_userbuffers():
    """No copy for the column-parallel QKV, for BF16, without TP overlap, or without sequence parallelism."""
    assert _rs(_lay(), name="qkv").ub_grad_copy_elem_bytes == 0.0
    assert _rs(_lay(precision="bf16")).ub_grad_copy_elem_bytes == 0.0
    assert _rs(_lay(overlap_tp=False)).ub_grad_copy_elem_bytes == 0.0
    assert _rs(_lay(sequence_parallel=False)).ub_grad_copy_elem_bytes == 0.0


@pytest.mark.parametrize("value", ["3.0", "2", "v2.2", "latest"])
def test_a_bad_te_version_is_one_clear_line(value):
    with pytest.raises(TopoError) as e:
        _lay(te_version=value)
    msg = str(e.value)
    assert "te_version" in msg and repr(value) in msg and "1.MINOR or 2.MINOR" in msg and "\n" not in msg


def test_a_number_is_refused():
    with pytest.raises(TopoError, match="te_version"):
        _lay(te_version=2.1)
