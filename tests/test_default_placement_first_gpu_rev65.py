"""``mapping.default_placement`` from a first GPU past domain 0 (rev65).

On NVL72 racks recipes run 64 of each rack's 72 GPUs (Megatron-Bridge's GB200 recipes; the module's rule); a job
takes every GPU of each rack only where it does not fit at 64. The test compared ``first_gpu + gpus`` (an id plus
a count) with ``domains x 64``: a 128-GPU job from GPU 72 (rack 1 of 3) fits at 64 on racks 1 and 2, yet was
placed at 72 a rack (GPUs 72 to 199, its groups straddling the racks) with the note 'the job needs more than 64
of each'; with rack 2 skipped, a 64-GPU job from rack 1 was told it 'needs 0 more NVLink domain'. The rule is now
:func:`_placed_ids`' own: the job's last GPU at 64 a rack lies inside the fabric."""

from topo.training.mapping import _placed_ids, default_placement
from topo.training.parallel import make_layout

D, N = 72, 216  # three GB200 NVL72 racks


def test_a_job_from_a_later_rack_that_fits_at_64_runs_64_a_rack():
    lay, note = default_placement(make_layout(tp=4, dp=32, global_batch=128, first_gpu=72), D, N)
    assert lay.gpus_per_domain_used == 64 and note.startswith("placement: 64 of each 72-GPU NVLink domain")
    assert int(_placed_ids(127, 64, D, 72)) == 207  # racks 1 and 2: GPUs 72-135 and 144-207


def test_a_job_that_fits_past_a_skipped_rack_is_not_told_it_needs_more():
    lay, note = default_placement(make_layout(tp=4, dp=16, global_batch=64, first_gpu=72, skip_domains=[2]), D, N)
    assert lay.gpus_per_domain_used == 64 and "more NVLink domain" not in note


def test_a_job_too_large_at_64_still_takes_every_gpu_and_says_the_spare_racks():
    lay, note = default_placement(make_layout(tp=4, dp=32, global_batch=128, first_gpu=72, skip_domains=[2]), D, N)
    assert lay.gpus_per_domain_used == 72
    assert "at 64 of each it needs 1 more NVLink domain in the fabric (spare racks: the 1 left hold 64 of the " \
        "job's 128 GPUs" in note
    lay, _ = default_placement(make_layout(tp=4, dp=48, global_batch=192), D, N)  # 192 = 3 x 64: fits at 64
    assert lay.gpus_per_domain_used == 64
    lay, _ = default_placement(make_layout(tp=4, dp=50, global_batch=200), D, N)
    assert lay.gpus_per_domain_used == 72
