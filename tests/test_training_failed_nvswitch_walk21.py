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
                        "GPUs (0 to 135), which reach each other only through it; allowed: --skip-domains [1] (the "
                        "job on the other domains, 64 of each), or a --first-gpu 144 or past it (the next NVLink "
                        "domain), or nvswitch1 left out of the failures\n")  # place61: the job around the rack
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "128", "--global-batch", "64",
                "--fail", "nvswitch3", "--search")  # a DGX's domain is its 8 GPUs: 24-31
    assert p.returncode == 2 and p.stderr.startswith("error: --fail: nvswitch3 failed: its NVLink domain (GPUs 24 "
                                                     "to 31) holds 8 of the job's GPUs (0 to 127)")


def test_a_failed_nvswitch_outside_the_job_or_passed_by_first_gpu_leaves_it_running():
    assert _train("gb200-nvl72-superpod", "--fail", "nvswitch5").returncode == 0
    p = _train("gb200-nvl72-superpod", "--fail", "nvswitch1", "--first-gpu", "144")
    assert p.returncode == 0 and "with failures: nvswitch1" in p.stdout, p.stderr


def test_the_way_past_a_failed_rack_says_what_the_job_becomes_there():
    """walk23: 7,168 GB200 on 112 NVL72 racks, 64 a rack (GPUs 0 to 111 x 72 + 63 = 8,055), rack 5 failed. The
    line offered --first-gpu 432, from where 7,168 GPUs fit only at all 72 of each rack (106 racks x 64 = 6,784 <
    7,168 <= 106 x 72 = 7,632): the step then ran 3.4x slower, its EP groups straddling racks, and --gpus-per-
    domain-used 64 there was refused. The line now says so, with the largest job at 64 a rack past the rack
    (6,784) and before it (5 x 64 = 320); past the last racks, where nothing as large fits, only the smaller jobs.
    place64: first, the rack skipped with a spare: 111 racks x 64 = 7,104 < 7,168 <= 112 x 64, so ceil(7,168 / 64)
    - 111 = 1 more rack keeps 64 of each (on 120 racks, the next whole pods of 8, --skip-domains 5 then runs the job
    at 64 a rack)."""
    import pytest
    from topo.errors import TopoError
    from topo.training.mapping import refuse_failed_gpus
    from topo.training.parallel import ParallelLayout
    lay = ParallelLayout(tp=1, dp=7168, global_batch=7168, gpus_per_domain_used=64)
    with pytest.raises(TopoError) as exc:
        refuse_failed_gpus(lay, 72, ("nvswitch5",), 112 * 72)
    assert ("allowed: skip_domains = [5] with 1 more NVLink domain in the fabric (spare racks: the 111 left hold "
            "7,104 of the job's 7,168 GPUs at 64 of each; grow the spec's [cluster]), or a first_gpu = 432 or past it (the next NVLink domain), "
            "where the job's 7,168 GPUs fit only at all 72 of each domain (the 106 domains left hold 6,784 at 64: its power-of-two groups then straddle "
            "domains), or a job of at most 6,784 GPUs from there or of at most 320 before it, or nvswitch5 left out "
            "of the failures") in exc.value.message
    with pytest.raises(TopoError) as exc:  # 1 rack of 64 past rack 110, 110 x 64 before it
        refuse_failed_gpus(lay, 72, ("gpu7930",), 112 * 72)
    assert exc.value.message.endswith("allowed: skip_domains = [110] with 1 more NVLink domain in the fabric (spare "
                                      "racks: the 111 left hold 7,104 of the job's 7,168 GPUs at 64 of each; grow "
                                      "the spec's [cluster]), or a job of at most 64 GPUs from first_gpu = 7992 (the next NVLink "
                                      "domain) or of at most 7,040 before it, or gpu7930 left out of the failures")
    small = ParallelLayout(tp=8, dp=16, global_batch=64, gpus_per_domain_used=64)  # 128 GPUs: fits past rack 1
    with pytest.raises(TopoError) as exc:
        refuse_failed_gpus(small, 72, ("nvswitch1",), 112 * 72)
    assert ("allowed: skip_domains = [1] (the job on the other domains, 64 of each), or a first_gpu = 144 or past it "
            "(the next NVLink domain), or nvswitch1") in exc.value.message  # place61: the job around the rack
    # the command line passes the fabric's GPUs: 32 racks at 64 (2,048 GPUs), rack 5 failed, 26 racks past it
    p = run_cli("train", "gb200-nvl72-superpod", "--model", "llama3-8b", "--gpus", "2048", "--tp", "8",
                "--global-batch", "2048", "--fail", "nvswitch5")
    assert p.returncode == 2 and p.stderr.endswith("allowed: --skip-domains [5] with 1 more NVLink domain in the "
                                                   "fabric (spare racks: the 31 left hold 1,984 of the job's 2,048 "
                                                   "GPUs at 64 of each; grow the spec's [cluster]), "
                                                   "or a job of at most 1,664 GPUs from --first-gpu 432 (the "
                                                   "next NVLink domain) or of at most 320 before it, or nvswitch5 "
                                                   "left out of the failures\n"), p.stderr
