"""A job with GPUs in an NVLink domain whose switch failed (``topo train --fail nvswitchN``, domain N) is refused
by the job's placement, as a failed GPU of the job is (tests/test_training_failed_gpu.py): the router's line
("GPU 216 cannot reach GPU 217: every path crosses failed parts") named one pair and no way out (walk21: a GB200
rack's NVLink switch down under a 1,024-GPU job)."""

from conftest import run_cli

ARGS = ("--model", "llama3-8b", "--gpus", "128", "--tp", "8", "--global-batch", "64")


def _train(spec, *extra):
    return run_cli("train", spec, *ARGS, *extra)


def test_a_failed_nvswitch_of_the_job_names_its_domain_and_the_placement_that_avoids_it():
    p = _train("gb200-nvl72-superpod", "--fail", "nvswitch1")  # the second rack: GPUs 72-143, 64 of them used
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("error: --fail: nvswitch1 failed: its NVLink domain (GPUs 72 to 143) holds 64 of the job's "
                        "GPUs (0 to 135), which reach each other only through it; allowed: a --first-gpu 144 or past "
                        "it (the next NVLink domain), or nvswitch1 left out of the failures\n")
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "128", "--global-batch", "64",
                "--fail", "nvswitch3", "--search")  # a DGX's domain is its 8 GPUs: 24-31
    assert p.returncode == 2 and p.stderr.startswith("error: --fail: nvswitch3 failed: its NVLink domain (GPUs 24 "
                                                     "to 31) holds 8 of the job's GPUs (0 to 127)")


def test_a_failed_nvswitch_outside_the_job_or_passed_by_first_gpu_leaves_it_running():
    assert _train("gb200-nvl72-superpod", "--fail", "nvswitch5").returncode == 0
    p = _train("gb200-nvl72-superpod", "--fail", "nvswitch1", "--first-gpu", "144")
    assert p.returncode == 0 and "with failures: nvswitch1" in p.stdout, p.stderr
