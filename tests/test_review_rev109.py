"""rev109 (issue 29, findings 464): the mutations of sections 458-463 no test caught, and the fix.

Each test below fails under one mutation the suite let pass: ``parsesize``'s truncation turned rounding, ``-i``
passed on unread, the sub-byte format's digits, ``dp_overlapped`` reading ``overlap_param_gather`` for ZeRO-3's
gathers (the fix), the CLI's no-effect reasons at dp 1 and under ``dp_sharding none``. The region error line guards
the one path where ``--overlap`` and an ``overlap_param_gather`` refusal meet (its mutation is unreachable there: the
region path's error comes keyed ``--layout`` already).

- nccl-tests' ``parsesize`` keeps ``(size_t)parsed`` of a double (NVIDIA/nccl-tests@a0b82b22 src/common.cu lines
  227-260; ``-b``/``-e``/``-i`` lines 1217-1240, ``stepBytes = (size_t)parsed``): a fraction of a byte is dropped,
  never rounded up, and ``-i`` alike.
- Megatron-FSDP turns ``overlap_param_gather`` on whenever it shards the weights (``optim_grads_params``:
  NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
  megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py lines 328-330, "Default to overlapped parameter
  gather when fully-sharding") and gathers its optimizer-sharded replicas' weights with the first unit's, in the
  forward pre-hook of the step's first micro-batch (lines 482-490): under ZeRO-3 / FSDP the setting changes nothing,
  neither the per-unit gathers nor the outer group's once-a-step one (which the one-site step exposed whole with it
  false, while the cross-site window kept it overlapped).
"""

import json
from fractions import Fraction

import pytest

import topo
from conftest import run_cli
from small_regions import two_sites
from topo.training.model import load_model
from topo.training.multisite import dp_gather_window_s
from topo.training.parallel import dp_overlapped, make_layout
from topo.training.step import estimate_step
from topo.units import format_bytes_exact

EST = ("estimate", "dgx-h100-superpod", "-g", "16", "-c", "all_gather", "--json")


def _sizes(*argv):
    out = json.loads(run_cli(*EST, *argv, check=True).stdout)
    return [r["size_bytes"] for r in out["results"]], out["notes"]


def test_a_fraction_of_a_byte_is_dropped_not_rounded():
    # (size_t)1023.9 = 1023: C's conversion of a double to an integer truncates (ISO C 6.3.1.4); rounding would run
    # 1024, which all_gather over 16 ranks runs whole where it trims 1023
    sizes, notes = _sizes("--size", "1023.9")
    assert sizes == _sizes("--size", "1023")[0] != _sizes("--size", "1024")[0]
    assert any("--size 1023.9 is 1,023.9 bytes, run as 1,023" in n for n in notes)


def test_the_step_between_sizes_is_read_as_nccl_tests_reads_it():
    # -b 1024 -e 3072 -i 1023.9: stepBytes = (size_t)1023.9 = 1023, the sizes 1024, 2047, 3070 (as -i 1023 runs them)
    sizes, notes = _sizes("-b", "1024", "-e", "3072", "-i", "1023.9")
    assert sizes == _sizes("-b", "1024", "-e", "3072", "-i", "1023")[0] != _sizes("-b", "1024", "-e", "3072",
                                                                                   "-i", "1024")[0]
    assert len(sizes) == 3
    assert any(n.startswith("-i 1023.9 is 1,023.9 bytes, run as 1,023") for n in notes)


def test_a_size_below_one_byte_is_said_to_three_digits():
    assert format_bytes_exact(Fraction(123, 1000)) == "0.123"


def test_a_region_job_refusing_the_gather_names_the_layout_not_overlap(tmp_path):
    """``--overlap`` sets overlap_tp .. overlap_ep only; an error about ``overlap_param_gather`` (a ``--layout``
    field) is the layout's, on the region path too (``_as_flags``)."""
    region = tmp_path / "two.toml"
    region.write_text(two_sites("r109", "two SUs", "dgx-h100-superpod", 1))
    r = run_cli("train", str(region), "--model", "llama3-8b", "--tp", "8", "--dp", "8", "--global-batch", "64",
                "--overlap", "tp=on", "--layout", 'overlap_param_gather=true,dp_sharding="none"')
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: --layout: overlap_param_gather: true overlaps the distributed optimizer's")


FSDP = dict(tp=8, dp=4, global_batch=256, micro_batch=32, seq_len=8192, dp_sharding="fsdp")


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


@pytest.mark.parametrize("extra", [{}, {"dp_shard": 2, "dp_outer_sharding": "optim"}],
                         ids=["fsdp", "megatron_fsdp_outer_optim"])
def test_zero3_gathers_ignore_overlap_param_gather(pod, extra):
    """Megatron-FSDP forces the gather overlap on when it shards the weights (module doc): false is the default's
    step to the last bit, the outer group's once-a-step gather hidden as before, and the cross-site window the
    same; the phases follow ``overlap_dp``."""
    model = load_model("llama3-8b")
    base = make_layout(**FSDP, **extra)
    off = make_layout(**FSDP, **extra, overlap_param_gather=False)
    assert all(dp_overlapped(off, p) for p in ("gather", "gather_unit"))
    assert not dp_overlapped(make_layout(**FSDP, **extra, overlap_dp=False), "gather")
    a, b = estimate_step(pod, model, base), estimate_step(pod, model, off)
    assert b.step_time_s == a.step_time_s
    assert [c.exposed_s for c in b.comm] == [c.exposed_s for c in a.comm]
    assert dp_gather_window_s(b, off) == dp_gather_window_s(a, base)
    if extra:  # the outer group's gather (calls a unit, once a step) hides behind the first forward
        outer = [c for c in b.comm if c.dim == "dp" and c.collective == "all_gather"][-1]
        assert outer.exposed_s < outer.time_s


_CLI = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "4", "--global-batch", "512"]


@pytest.mark.parametrize("layout, dp, why", [
    ('overlap_param_gather=false,dp_sharding="none"', "64", "dp_sharding none gathers no weights"),
    ("overlap_param_gather=false", "1", "dp x cp 1: no data-parallel collective"),
    ('overlap_param_gather=false,dp_sharding="fsdp",dp_shard=16,dp_outer_sharding="optim"', "64",
     "Megatron-FSDP overlaps its weight gathers whatever overlap_param_gather says"),
])
def test_cli_says_why_the_field_changes_nothing(layout, dp, why):
    out = run_cli(*_CLI, "--dp", dp, "--layout", layout, check=True).stdout
    assert f"overlap_param_gather false (no effect: {why}" in out
