"""walk19's (new user's walk, twelfth pass) defects of ``topo train REGION``."""

import pytest

from conftest import run_cli

from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout


@pytest.mark.parametrize("sizes,crossings", [
    (dict(tp=8, pp=4, dp=96, global_batch=192), 2),  # m = 192 / 96 = 2 micro-batches a pipeline
    (dict(tp=8, pp=4, dp=96, global_batch=1536), 16),
    # interleaved, vpp 2: a site boundary twice a micro-batch one way, the wrap (last site -> first) once back
    (dict(tp=8, pp=4, vpp=2, dp=96, global_batch=1536), 16 * 2 + 16 * 1),
    (dict(tp=8, pp=4, vpp=2, dp=96, global_batch=1536, overlap_pp=True), 16 * 2 + 16 * 1),
])
def test_pipeline_across_sites_carries_every_micro_batch_once_per_boundary(sizes, crossings):
    """walk19: the DCI bytes of ``--across pp`` counted the step's critical-path sends (2 (m + pp - 1) a step,
    the fill's ``pp - 1`` with ``overlap_pp``), not the micro-batches that cross: Llama 3 70B tp 8 pp 4 at 2
    micro-batches a pipeline printed 20 GiB a direction where 8 GiB cross (2.5x), and ``--overlap pp=on`` cut
    192 GiB to 24. Closed form: a boundary carries one micro-batch's activations (seq 8,192 x hidden 8,192 x 2 B
    of bf16, split over tp 8 by Megatron's scatter-gather: 16 MiB a rank) from every rank of a stage (tp x dp =
    8 x 96 = 768 across the job) once per micro-batch and virtual stage, gradients the other way alike."""
    model = load_model("llama3-70b")
    assert (model.hidden, model.seq_len) == (8192, 8192)
    r = estimate_across_sites(build_region("two-site-h100"), model, make_layout(**sizes), across="pp",
                              contention=False)
    pp = next(s for s in r.strategies if s.strategy == "pp")
    assert pp.dci_bytes_per_step == pytest.approx(crossings * 768 * 8192 * 8192 * 2 / 8, rel=1e-12)


def test_fail_naming_a_whole_site_says_what_its_loss_is():
    """walk19: ``--fail ash`` (a user asking what losing a site does) got the syntax alone; it now says the loss is
    the region without that site, and every refused part lists the sites."""
    p = run_cli("describe", "three-site-chain", "--fail", "b")
    assert p.returncode == 2 and p.stderr.startswith("error: --fail: a region fails DCI spans"), p.stderr
    assert "sites: a, b, c, or 0 to 2), got 'b'; a whole site is not failed in place: its loss is the region " \
           "without it, a region file of a, c (on three-site-chain)" in p.stderr, p.stderr
    p = run_cli("describe", "two-site-h100", "--fail", "west")
    assert "a region file of east (one site left: its spec alone)" in p.stderr, p.stderr
    p = run_cli("describe", "three-site-chain", "--fail", "zed:leaf0")
    assert "(SITE:PART, e.g. a:leaf0 or 0:leaf0; sites: a, b, c, or 0 to 2), got 'zed:leaf0' (on three-site-chain)" \
        in p.stderr, p.stderr
    assert "whole site" not in p.stderr
