"""``algorithm`` as NCCL_ALGO reads it: one algorithm, a list to choose among, or ``^`` a list to leave out; and a
log's NCCL_ALGO / NCCL_NVLS_ENABLE=0 / NCCL_MIN_CTAS modelled as the run set them (NCCL's environment variables:
docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, NCCL_ALGO "comma-separated list ... prefix with ^ to
exclude", NCCL_NVLS_ENABLE, NCCL_MIN_CTAS)."""

import pytest

from conftest import run_cli
from topo import build_fabric, spec_from_dict
from topo.calibrate.parse import parse_text
from topo.calibrate.setup import node_spec, setup_from_run
from topo.engine.collectives import algorithm_candidates
from topo.errors import TopoError
from topo.engine.estimate import estimate

SIZES = [8, 2**20, 2**30]


@pytest.fixture(scope="module")
def fab():
    return build_fabric(spec_from_dict(node_spec("H100", 8, "400 Gb/s", "infiniband_ndr", 4)))


def test_candidates():
    assert algorithm_candidates("all_reduce", "auto") == ("auto", ["ring", "tree", "nvls", "nvls_tree", "sharp"])
    assert algorithm_candidates("all_reduce", "Ring, Tree") == ("ring,tree", ["ring", "tree"])
    assert algorithm_candidates("all_reduce", "^NVLS,NVLSTree") == ("^nvls,nvls_tree", ["ring", "tree", "sharp"])
    assert algorithm_candidates("all_reduce", "tree,") == ("tree", ["tree"])
    for bad, words in (("ring,foo", "unknown algorithm 'foo'"), ("^ring,tree,nvls,nvls_tree,sharp", "leaves none"),
                       ("auto,ring", "not auto"), (",", "must name algorithms")):
        with pytest.raises(TopoError, match=words) as exc:
            algorithm_candidates("all_reduce", bad)
        assert exc.value.key == "algorithm"


def test_a_list_chooses_the_fastest_of_its_members_only(fab):
    every = {a: estimate(fab, "all_reduce", SIZES, gpus=32, algorithm=a).results for a in ("ring", "tree",
                                                                                           "nvls_tree")}
    both = estimate(fab, "all_reduce", SIZES, gpus=32, algorithm="ring,tree")
    assert both.algorithm == "ring,tree" and set(both.candidates) == {"ring", "tree"}
    for i, r in enumerate(both.results):
        assert r.time_s == pytest.approx(min(every["ring"][i].time_s, every["tree"][i].time_s))
    no_nvls = estimate(fab, "all_reduce", SIZES, gpus=32, algorithm="^nvls,nvls_tree")
    assert {r.algorithm for r in no_nvls.results} <= {"ring", "tree"}
    # auto would run NVLSTree somewhere in 1 MiB - 1 GiB on these H100s; leaving it out is never faster
    auto = estimate(fab, "all_reduce", SIZES, gpus=32).results
    assert all(a.time_s <= b.time_s + 1e-15 for a, b in zip(auto, no_nvls.results))


def test_a_log_without_nvls_is_modelled_without_it():
    hdr = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0\n")
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on host{r // 8} device {r % 8} [0x00] NVIDIA H100 80GB HBM3\n"
                    for r in range(32))
    run = parse_text("export NCCL_NVLS_ENABLE=0\nexport NCCL_MIN_CTAS=24\n" + hdr + ranks, require_rows=False)[0]
    s = setup_from_run(run)
    assert s.algorithm == "^nvls,nvls_tree" and s.channels == 24
    assert any("NCCL_NVLS_ENABLE=0" in a for a in s.assumptions)
    assert any("NCCL_MIN_CTAS=24" in a for a in s.assumptions)
    run = parse_text("NCCL_ALGO set by environment to Ring,Tree\n" + hdr + ranks, require_rows=False)[0]
    assert setup_from_run(run).algorithm == "ring,tree"


def test_cli_takes_a_list_and_names_a_bad_one(tmp_path):
    out = run_cli("estimate", "dgx-h100-superpod", "-c", "all_reduce", "--size", "1GiB", "-g", "64",
                  "-a", "^nvls,nvls_tree", "--json")
    assert out.returncode == 0, out.stderr
    bad = run_cli("estimate", "dgx-h100-superpod", "-c", "all_reduce", "--size", "8", "-a", "ring,foo")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--algorithm" in bad.stderr
