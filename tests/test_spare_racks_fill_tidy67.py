"""The "spare racks" note of an NVL72 job that fills every GPU past a skipped rack (tidy67; tidy66's Left): the
job's size came from the fill (every GPU from its first past the skipped domains, tidy66), not from the user, so
"it needs 1 more NVLink domain" misread it; the note says the job fills those domains and what runs at 64 a rack
(Megatron-Bridge's GB200 recipes' 64 of 72, as ``default_placement`` cites). A job the user sized larger than the
domains left at 64 still gets the spare racks (place64's, walk23's)."""

from conftest import run_cli
from topo.training.mapping import default_placement
from topo.training.parallel import make_layout

D, N = 72, 3 * 72  # three NVL72 racks


def test_a_filled_job_is_told_it_fills_the_racks_left_not_that_it_needs_more():
    # rack 1 skipped: racks 0 and 2 hold 144 GPUs, the fill's size; at 64 a rack they hold 128
    lay, note = default_placement(make_layout(tp=8, dp=18, global_batch=144, skip_domains=[1]), D, N)
    assert lay.gpus_per_domain_used == 72
    assert "more NVLink domain" not in note, note
    assert note.endswith("; the job's 144 GPUs are every GPU of the 2 NVLink domains past the skipped ones: at 64 "
                         "of each they hold 128 (a job of 128 GPUs runs 64 a rack)"), note


def test_the_cli_fill_says_it_too():
    # tidy122 (section 445): the fill itself is now 64 of each rack left, 2 x 64 = 128 GPUs, which need no spare rack
    job = ("train", "gb200-nvl72-superpod", "--set", "cluster.num_units=3", "--model", "llama3-8b", "--tp", "8",
           "--skip-domains", "1")
    out = run_cli(*job, "--global-batch", "128", check=True)
    said = out.stdout + out.stderr
    assert "dp=16 " in said and "placement: 64 of each 72-GPU NVLink domain" in said, said
    assert "more NVLink domain" not in said
    # a job given every GPU of the racks left (144) is told it fills them, not that it needs another rack
    out = run_cli(*job, "--gpus", "144", "--global-batch", "144", check=True)
    said = out.stdout + out.stderr
    assert "every GPU of the 2 NVLink domains past the skipped ones" in said, said
    assert "more NVLink domain" not in said


def test_a_job_sized_past_the_racks_left_still_gets_the_spare_racks():
    lay, note = default_placement(make_layout(tp=4, dp=34, global_batch=136, skip_domains=[1]), D, N)
    assert lay.gpus_per_domain_used == 72
    assert "at 64 of each it needs 1 more NVLink domain in the fabric (spare racks: the 2 left hold 128 of the " \
        "job's 136 GPUs" in note, note
