"""regions82 (section 378's Left 4): a region's job reports one memory per GPU, the form's its job takes.

Section 370's job: Llama 3 8B (``N`` parameters) on two sites of one GPU each (dp 1 a site, 2 over the job), ZeRO-3,
full recompute. BF16 weights (2 bytes), FP32 gradients (4) and Adam's FP32 main weights and moments (12) a parameter
(Rajbhandari et al. 2020). Under NCCL's flat cross-DC ring Megatron-Core's one distributed-optimizer instance spans
the job (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/distributed/distributed_data_parallel_config.py line 34, ``num_distributed_optimizer_instances = 1``;
parallel_state.py lines 927-929), so a GPU holds ``18 N / 2`` of state (fits an H100's 80 GiB); the share's own step
(one site's instance) holds ``18 N`` (does not). Before: the job fitting at 78.6 GB was also noted "one site's share:
does not fit: 150.9 GB", and ``--json`` gave ``one_site.fits`` false beside ``fits`` true.
"""

import json
import re

import pytest

from conftest import run_cli
from small_regions import region_file, two_sites
from topo.training.model import load_model

MODEL = load_model("llama3-8b")
TEXT = two_sites("mem82", "two SUs", "dgx-h100-superpod", 1)
FORM = '[nccl]\ndp_reduction = "{}"\n'
ARGS = ("--layout", "tp=1,dp=2,global_batch=8,seq_len=4096,dp_sharding=zero3,recompute=full")


def _train(tmp_path_factory, form: str, *extra):
    path = region_file(tmp_path_factory, TEXT + FORM.format(form), f"mem82-{form}")
    return run_cli("train", path, "--model", "llama3-8b", *ARGS, *extra, check=True).stdout


@pytest.mark.parametrize("form", ["auto", "flat_ring"])
def test_the_job_that_fits_says_no_share_that_does_not(tmp_path_factory, form):
    """The flat ring's job (auto takes it): the text's memory line and every note agree that it fits; the JSON's
    share carries the job's memory, ``18 N / 2`` of state a GPU, and no does-not-fit note."""
    text = _train(tmp_path_factory, form)
    assert "does not fit:" not in text and "DOES NOT FIT" not in text
    line = next(x for x in text.splitlines() if x.startswith("one site's share: memory per GPU"))
    assert re.search(r"total [\d.]+ GB of [\d.]+ GB: fits", line), line
    d = json.loads(_train(tmp_path_factory, form, "--json"))
    one = d["one_site"]
    assert d["fits"] and one["fits"] and one["memory"] == d["memory"]
    assert one["memory_per_gpu_bytes"] == d["memory"]["total_bytes"]
    state = sum(d["memory"][k] for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes"))
    assert state == pytest.approx(18 * MODEL.total_params / 2, rel=1e-3)
    assert not any("does not fit:" in n for n in d["notes"] + one["notes"])


def test_the_hierarchical_job_says_its_own_once(tmp_path_factory):
    """The hierarchical form set: its job does not fit (a site's instance, ``18 N`` of state a GPU), said with that
    memory, the same in the note, the lead line and the JSON."""
    d = json.loads(_train(tmp_path_factory, "hierarchical", "--json"))
    state = sum(d["memory"][k] for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes"))
    assert state == pytest.approx(18 * MODEL.total_params, rel=1e-3)
    assert not d["fits"] and d["one_site"]["memory"] == d["memory"]
    gb = f"{d['memory']['total_bytes'] / 1e9:.1f} GB per GPU"
    said = [n for n in d["notes"] if "does not fit:" in n]
    assert len(said) == 1 and gb in said[0]
    text = _train(tmp_path_factory, "hierarchical")
    assert text.startswith(f"DOES NOT FIT: {gb}")
