"""Issue 23's 100k search: :func:`topo.engine.algorithms.ring.nics_per_run` counts the distinct NICs beside each
domain run of a ring in one sort of the row's (run, NIC) pairs, where ``channels_for`` ran ``np.unique`` once per
run (175,853 calls in the 100k DeepSeek-V3 search). The pair must hold the run: two runs of one ring may sit in the
same domain and on the same NICs (a ring that leaves a domain and comes back), and each counts its own. Checked
against closed forms (NIC of a GPU: ``topo.fabric.hosts.nic_beside``, server * NICs + local * NICs // GPUs)."""

import numpy as np

from topo.engine.algorithms.ring import channels_for, domain_runs, nics_per_run
from topo.engine.schedule import NodeShape

HGX = NodeShape(gpus_per_domain=8, gpus_per_server=8, nics_per_server=8)  # a DGX H100: a NIC per GPU
SHARED = NodeShape(gpus_per_domain=8, gpus_per_server=8, nics_per_server=4)  # 8 GPUs on 4 NICs: pairs share one


def _runs(ranks, shape):
    ranks = np.asarray(ranks)
    return ranks, domain_runs(ranks, shape.gpus_per_domain)[1]


def test_runs_of_one_domain_each_count_their_own_nics():
    """GPUs 0, 1 | 8 | 2, 3, 4 on DGX H100s: runs of 2, 1, 3 ranks on 2, 1, 3 NICs (the first and last run share a
    domain; counted per NIC alone, without the run, they would merge)."""
    ranks, sizes = _runs([0, 1, 8, 2, 3, 4], HGX)
    assert sizes.tolist() == [2, 1, 3]
    assert nics_per_run(HGX, ranks, sizes).tolist() == [2, 1, 3]


def test_runs_on_shared_nics_count_each_nic_once_per_run():
    """8 GPUs on 4 NICs (GPUs 2k, 2k+1 on NIC k): GPUs 0, 1 | 8, 9, 10 | 2, 3 | 16 are runs on NICs {0}, {4, 5}, {1},
    {8}; the third run's NIC 1 is the first run's domain but not its NIC, and NIC 0 / NIC 1 each count once a run."""
    ranks, sizes = _runs([0, 1, 8, 9, 10, 2, 3, 16], SHARED)
    assert sizes.tolist() == [2, 3, 2, 1]
    assert nics_per_run(SHARED, ranks, sizes).tolist() == [1, 2, 1, 1]


def test_runs_back_on_the_same_nics_count_apart():
    """8 GPUs on 4 NICs: GPU 0 | 8 | 1 are runs on NIC 0, NIC 4, NIC 0 again: 1 each (the pair (run, NIC) keeps the
    third run apart from the first, which shares its NIC)."""
    ranks, sizes = _runs([0, 8, 1], SHARED)
    assert nics_per_run(SHARED, ranks, sizes).tolist() == [1, 1, 1]


def test_unequal_domains_take_the_fewest_nics_of_any_run():
    """Two 12-rank rings on DGX H100s, each 8 + 4 (GPUs 0-11, 16-27): domains hold unequal numbers of ranks, so
    ``channels_for`` takes one channel per NIC of the smallest run: 4. On 8 GPUs per 4 NICs the 4-GPU run sits on 2
    NICs, fewer than its ranks: 2 channels."""
    groups = np.array([np.arange(12), np.arange(16, 28)])
    assert channels_for(HGX, groups) == 4
    assert channels_for(SHARED, groups) == 2


def test_a_row_agrees_with_a_sort_per_run():
    """200 rows of 24 GPUs drawn from 4,096 (runs of 1-3 ranks, domains revisited): the counts equal one
    ``np.unique`` per run (the formula this replaced), on both shapes."""
    rng = np.random.default_rng(73)
    for shape in (HGX, SHARED):
        for _ in range(200):
            ranks, sizes = _runs(rng.choice(64, size=24, replace=False) + 8 * rng.integers(0, 8), shape)
            starts = np.r_[0, np.cumsum(sizes)[:-1]]
            per_run = [np.unique(shape.nic_of(ranks[a:a + k])).size for a, k in zip(starts, sizes)]
            assert nics_per_run(shape, ranks, sizes).tolist() == per_run
