"""regions76 (section 357, item 3): the logged loss's all-reduce across the sites.

Megatron-LM's ``train_step`` (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/training/training.py lines 3232-3242), on the last pipeline stage after the optimizer's step (line 3165),
sums each micro-batch's ``[loss, tokens]`` and calls ``torch.distributed.all_reduce(val, group=dp_cp_group)``:
no ``async_op``, so the rank's next kernels wait for it. Two FP32 elements (pretrain_gpt.py lines 254-259), 8 bytes,
over the data x context group: across the sites with data parallelism across them, in either form (one optimizer
instance a site or over the job: the group is the whole data-parallel group). Priced as the one small cross-site
all-reduce (``region_estimate.small_all_reduce_dci_s``): at two sites 40 km apart (4.9 us/km + 50 us a hop, ``L``)
``2 L`` = 492 us, latency. At pp 1 the next step's first forward waits for it; at pp > 1 the last stage's next fill
(``pp - 1`` first-chunk forwards, milliseconds) hides it.
"""

import pytest

from small_regions import region_file, two_sites
from topo.fabric.region import build_region
from topo.training import multisite
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout
from topo.units import format_time

TEXT = two_sites("ls76", "two SUs", "dgx-h100-superpod", 1)
FLAT = '[nccl]\ndp_reduction = "flat_ring"\n'
HOP_S = 40 * 4.9e-6 + 50e-6


def _job(tmp_path_factory, nccl: str, pp: int = 1):
    region = build_region(region_file(tmp_path_factory, TEXT + nccl, "ls76"))
    return estimate_across_sites(region, load_model("llama3-8b"),
                                 make_layout(tp=8, pp=pp, dp=4, global_batch=8, seq_len=4096))


@pytest.mark.parametrize("nccl", ["", FLAT])
def test_the_loss_crosses_exposed_at_pp1_in_either_form(tmp_path_factory, monkeypatch, nccl):
    """pp 1: the step and the DCI time are longer by 2 L than with the loss's crossing priced at 0, both forms."""
    job = _job(tmp_path_factory, nccl)
    s = job.strategies[0]
    line = next(a for a in job.assumptions if a.startswith("dp across sites: the logged loss's all-reduce"))
    assert "8 bytes" in line and "exposed (pp 1" in line
    monkeypatch.setattr(multisite, "small_all_reduce_dci_s", lambda *a, **k: 0.0)
    z = _job(tmp_path_factory, nccl).strategies[0]
    assert s.step_time_s - z.step_time_s == pytest.approx(2 * HOP_S, abs=2e-6)
    assert s.dci_time_s - z.dci_time_s == pytest.approx(2 * HOP_S, abs=2e-6)


def test_the_last_stages_next_fill_hides_it(tmp_path_factory, monkeypatch):
    """pp 2: the fill (one first-chunk forward, 1/3 of a micro-batch's compute) is far longer than 2 L: the step is
    the same with the loss priced at 0; the DCI time still counts its crossing."""
    job = _job(tmp_path_factory, "", pp=2)
    s = job.strategies[0]
    line = next(a for a in job.assumptions if a.startswith("dp across sites: the logged loss's all-reduce"))
    fill = job.one_site["breakdown_s"]["compute"] / 3 / job.one_site["layout"]["microbatches"]
    assert f"0 s of it exposed (the rest behind the last stage's next fill of {format_time(fill)})" in line, line
    monkeypatch.setattr(multisite, "small_all_reduce_dci_s", lambda *a, **k: 0.0)
    z = _job(tmp_path_factory, "", pp=2).strategies[0]
    assert s.step_time_s == z.step_time_s
    assert s.dci_time_s - z.dci_time_s == pytest.approx(2 * HOP_S, abs=2e-6)
