"""A job placed on a failed GPU (``topo train --fail gpuN``) is refused by the job's placement, not the router's
communicator wording (walk15: "GPU 3 itself failed ... and is a rank of the communicator: place the ranks on
working GPUs", which ``topo train`` has no flag for)."""

import pytest

from conftest import run_cli

ARGS = ("--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--global-batch", "64")


def _train(*extra, spec="dgx-h100-superpod"):
    return run_cli("train", spec, *ARGS, *extra)


def test_a_failed_gpu_of_the_job_names_the_placement_and_what_is_allowed():
    p = _train("--fail", "gpu3")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("error: --fail: GPU 3 failed and is one of the job's GPUs (0 to 63); allowed: --skip-domains [0] "
                        "(the job on the other domains, 8 of each), or a --first-gpu 8 or past it (the next NVLink domain), or gpu3 left out of the failures\n")


def test_a_failed_gpu_outside_the_job_leaves_it_running():
    # beyond the job's 64 GPUs, before its first GPU, and the 8 GPUs of an NVL72 rack the 64-of-72 placement skips
    assert _train("--fail", "gpu70").returncode == 0
    assert _train("--fail", "gpu3", "--first-gpu", "8").returncode == 0
    p = run_cli("train", "gb200-nvl72-superpod", *ARGS, "--fail", "gpu70")
    assert p.returncode == 0, p.stderr
    two_racks = ("--model", "llama3-8b", "--gpus", "128", "--tp", "8", "--global-batch", "64")
    p = run_cli("train", "gb200-nvl72-superpod", *two_racks, "--fail", "gpu72")  # the second rack's first GPU
    assert p.returncode == 2 and "GPU 72 failed and is one of the job's GPUs (0 to 135)" in p.stderr, p.stderr


@pytest.mark.parametrize("spec, gpus, fail, first, last, after, domain, used", [
    ("dgx-h100-superpod", 64, "gpu3", 0, 63, 8, 0, 8),  # place61: the failed GPU's domain, the job's GPUs of each
    ("gb200-nvl72-superpod", 128, "gpu72", 0, 135, 144, 1, 64),  # 64 of each 72-GPU rack: the second rack's first GPU
])
def test_the_search_refuses_a_failed_gpu_of_the_job_in_the_same_line(spec, gpus, fail, first, last, after, domain,
                                                                    used):
    """walk15 left ``topo train --search --fail gpuN`` as surfacing the router's line ("... is a rank of the
    communicator: place the ranks on working GPUs"); a search's first evaluation is a step, which refuses the
    placement before routing anything (a bound refined by routed traffic needs an evaluated layout first), so both
    paths print one line, the same."""
    n = fail[3:]
    line = (f"error: --fail: GPU {n} failed and is one of the job's GPUs ({first} to {last}); allowed: --skip-domains "
            f"[{domain}] (the job on the other domains, {used} of each), or a --first-gpu {after} "
            f"or past it (the next NVLink domain), or {fail} left out of the failures\n")
    job = ("--model", "llama3-8b", "--gpus", str(gpus), "--global-batch", str(gpus), "--fail", fail)
    one = run_cli("train", spec, *job, "--tp", "8")
    search = run_cli("train", spec, *job, "--search", "--top", "2")
    assert (one.returncode, one.stdout, one.stderr) == (2, "", line)
    assert (search.returncode, search.stdout, search.stderr) == (2, "", line)


def test_the_search_across_sites_refuses_a_failed_gpu_of_a_site_in_the_same_line():
    job = ("--model", "llama3-8b", "--gpus", "512", "--global-batch", "3072", "--fail", "east:gpu3")
    line = ("error: --fail: site east: GPU 3 failed and is one of the job's GPUs (0 to 255); allowed: --skip-domains [0] (the job on "
            "the other domains, 8 of each), or a --first-gpu 8 or past it (the next NVLink domain), or gpu3 left out of the failures\n")
    one = run_cli("train", "two-site-h100", *job, "--tp", "8")
    search = run_cli("train", "two-site-h100", *job, "--search", "--top", "2")
    assert (one.returncode, one.stderr) == (2, line) and (search.returncode, search.stderr) == (2, line)


def test_the_library_line_names_the_layout_field_not_a_flag():
    """The library never names a CLI flag (rev53 found ``--first-gpu`` and ``--fail`` in ``refuse_failed_gpus``);
    the CLI says the field as its flag (above)."""
    from topo.errors import TopoError
    from topo.training.parallel import ParallelLayout
    from topo.training.mapping import refuse_failed_gpus
    lay = ParallelLayout(tp=8, dp=8, global_batch=64)
    with pytest.raises(TopoError) as exc:
        refuse_failed_gpus(lay, 8, ("gpu3",))
    assert exc.value.key == "fail" and "--" not in exc.value.message
    assert "first_gpu = 8 or past it" in exc.value.message
