"""A job placed on a failed GPU (``topo train --fail gpuN``) is refused by the job's placement, not the router's
communicator wording (walk15: "GPU 3 itself failed ... and is a rank of the communicator: place the ranks on
working GPUs", which ``topo train`` has no flag for)."""

from conftest import run_cli

ARGS = ("--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--global-batch", "64")


def _train(*extra, spec="dgx-h100-superpod"):
    return run_cli("train", spec, *ARGS, *extra)


def test_a_failed_gpu_of_the_job_names_the_placement_and_what_is_allowed():
    p = _train("--fail", "gpu3")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("error: --fail: GPU 3 failed and is one of the job's GPUs (0 to 63); allowed: a --first-gpu "
                        "that places the job past it (e.g. 8, the next NVLink domain), or leave gpu3 out of --fail\n")


def test_a_failed_gpu_outside_the_job_leaves_it_running():
    # beyond the job's 64 GPUs, before its first GPU, and the 8 GPUs of an NVL72 rack the 64-of-72 placement skips
    assert _train("--fail", "gpu70").returncode == 0
    assert _train("--fail", "gpu3", "--first-gpu", "8").returncode == 0
    p = run_cli("train", "gb200-nvl72-superpod", *ARGS, "--fail", "gpu70")
    assert p.returncode == 0, p.stderr
    two_racks = ("--model", "llama3-8b", "--gpus", "128", "--tp", "8", "--global-batch", "64")
    p = run_cli("train", "gb200-nvl72-superpod", *two_racks, "--fail", "gpu72")  # the second rack's first GPU
    assert p.returncode == 2 and "GPU 72 failed and is one of the job's GPUs (0 to 135)" in p.stderr, p.stderr
