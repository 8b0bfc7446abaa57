"""topo.alltoall: loads of all-to-all (and group-matrix) traffic from counts must equal routing every pair.

The oracle is the router itself, one flow per ordered pair of distinct ranks, each split over the destination
GPU's NICs exactly as topo/algorithms/p2p.py's ``_route_split`` does, summed with ``router.loads``."""

from __future__ import annotations

import numpy as np
import pytest

from small_fabrics import SPECS, small_fabric
from topo import TopoError
from topo.engine.alltoall import matrix_loads, uniform_alltoall_loads
from topo.engine.placement import place
from topo.engine.route import Router


def _k(router):
    L = router.fabric.layout
    return max(1, L.nics_per_server // L.gpus_per_server)


def per_pair_loads(router, groups, nbytes):
    groups = np.asarray(groups)
    p = groups.shape[1]
    i, j = np.nonzero(~np.eye(p, dtype=bool))
    k = _k(router)
    out = np.zeros(router.num_res)
    for c in range(k):
        out += router.loads(router.route(groups[:, i].ravel(), groups[:, j].ravel(), nbytes / k, c))
    return out


def placements(f):
    """Packed, spread over pods, strided and blocked groups, one GPU per server, a random scatter."""
    n = f.num_gpus
    L = f.layout
    out = {"all": np.arange(n)[None, :],
           "packed-half": place(f, n // 2).groups,
           "spread-pods": place(f, n // 2, kind="spread_pods").groups,
           "strided-4": place(f, groups=4).groups,
           "blocked-4": place(f, groups=4, group_layout="blocked").groups,
           "one-per-server": place(f, L.num_servers, kind="one_per_server", rail=L.gpus_per_server - 1).groups}
    rng = np.random.default_rng(7)
    out["random-2"] = rng.permutation(n)[: 2 * (n // 3)].reshape(2, -1)
    return out


@pytest.mark.parametrize("name", sorted(SPECS))
def test_uniform_equals_per_pair_routing_ideal(name):
    f = small_fabric(name)
    for pxn in (None, True):
        if pxn and f.layout.leaves_per_unit == 1 and f.layout.num_tiers < 2:
            continue
        r = Router(f, "ideal", pxn=pxn)
        for label, groups in placements(f).items():
            got = uniform_alltoall_loads(r, groups, 3.5)
            want = per_pair_loads(r, groups, 3.5)
            assert got.shape == (r.num_res,)
            assert want.sum() > 0
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=f"{name} pxn={pxn} {label}")


@pytest.mark.parametrize("name", ["rail_optimized-2", "fat_tree-3", "rail_optimized-3-os2",
                                  "rail_optimized-2-shared-nic", "rail_optimized-3-two-nics-per-gpu"])
def test_uniform_without_pxn(name):
    """Each GPU through its own NIC (pxn=False) on fabrics where every pair still has a path."""
    f = small_fabric(name)
    r = Router(f, "ideal", pxn=False)
    for label, groups in placements(f).items():
        np.testing.assert_allclose(uniform_alltoall_loads(r, groups, 2.0), per_pair_loads(r, groups, 2.0),
                                   rtol=1e-9, atol=1e-9, err_msg=label)


def _uplink_blocks(router):
    """(leaf uplink ids per leaf, spine uplink ids per spine group) of the directed real links."""
    f = router.fabric
    L = f.layout
    lo = f.link_offset
    u0 = L.tiers[0].up_ports
    leaf = lo["up:0"] + np.arange(L.tiers[0].num_switches * u0).reshape(-1, u0)
    blocks = [leaf]
    if L.num_tiers > 2:
        t1 = L.tiers[1]
        per = t1.switches_per_group * t1.up_ports
        blocks.append(lo["up:1"] + np.arange(t1.num_switches * t1.up_ports).reshape(-1, per))
    return blocks


@pytest.mark.parametrize("name", ["rail_optimized-2", "rail_optimized-3", "fat_tree-3", "rail_only-3",
                                  "rail_optimized-3-os2"])
def test_uniform_hashed_is_the_expected_load(name):
    """Hashed ECMP: exact on every NVLink, PCIe and NIC link and on each leaf's (spine group's) uplinks in
    total; per cable it is the mean over hashes, which the average of many salted routings approaches."""
    f = small_fabric(name)
    groups = np.arange(f.num_gpus)[None, :]
    got = uniform_alltoall_loads(Router(f, "hash"), groups, 1.0)
    # far-apart salts: the salt is added to the hash key, so consecutive salts re-use other pairs' hashes and
    # are not independent draws
    rng = np.random.default_rng(11)
    salts = [per_pair_loads(Router(f, "hash", salt=int(s)), groups, 1.0) for s in rng.integers(0, 2**40, 300)]
    mean = np.mean(salts, axis=0)
    blocks = _uplink_blocks(Router(f, "hash"))
    ecmp = np.zeros(got.size, dtype=bool)
    for b in blocks:
        ecmp[2 * b.ravel()] = ecmp[2 * b.ravel() + 1] = True
    for one in salts[:3]:
        np.testing.assert_allclose(got[~ecmp], one[~ecmp], rtol=1e-9, atol=1e-9)
        for b in blocks:
            for d in (0, 1):
                np.testing.assert_allclose(got[2 * b + d].sum(axis=1), one[2 * b + d].sum(axis=1), rtol=1e-9)
    # per cable: uniform within each block, and the mean over 300 salted hashes close to it (a hash decides per
    # NIC pair, so a cable sees only tens of independent decisions per salt: about 1% of noise remains)
    for b in blocks:
        for d in (0, 1):
            blk = got[2 * b + d]
            assert np.allclose(blk, blk[:, :1])
            busy = blk > 0
            assert busy.any()
            dev = np.abs(mean[2 * b + d][busy] / blk[busy] - 1)
            assert dev.max() < 0.08 and dev.mean() < 0.03


def test_uniform_ideal_spread_is_the_hashed_expectation():
    """The hashed answer is the ideal answer with aggregates spread evenly (Router.real_link_loads)."""
    f = small_fabric("rail_optimized-3-os2")
    g = place(f, groups=3).groups
    ideal = Router(f, "ideal")
    np.testing.assert_allclose(uniform_alltoall_loads(Router(f, "hash"), g, 1.0),
                               ideal.real_link_loads(uniform_alltoall_loads(ideal, g, 1.0)), rtol=1e-12)


def test_nccl_tests_size_semantics():
    """nccl-tests alltoall of size S on p ranks: each rank sends S/p to each peer (PERFORMANCE.md), so every
    GPU's NVLink carries (g-1) S/p out inside a domain of g ranks, and its NIC (p-g) S/p out of it."""
    f = small_fabric("rail_optimized-2")
    L = f.layout
    p, g, S = f.num_gpus, L.gpus_per_domain, 64.0
    r = Router(f, "ideal", pxn=False)  # own NIC: no NVLink hop before the network
    loads = uniform_alltoall_loads(r, np.arange(p)[None, :], S / p)
    nv_up = loads[2 * (f.link_offset["nvlink"] + np.arange(p))]
    nic_up = loads[2 * (f.link_offset["nic"] + np.arange(L.num_nics))]
    np.testing.assert_allclose(nv_up, (g - 1) * S / p)
    np.testing.assert_allclose(nic_up, (p - g) * S / p)


@pytest.mark.parametrize("name", ["rail_optimized-3", "rail_only-3", "rail_optimized-2-shared-nic",
                                  "fat_tree-3-two-nics-per-gpu", "rail_optimized-2-domain-of-2-servers"])
def test_matrix_loads_equal_per_pair_routing(name):
    f = small_fabric(name)
    r = Router(f, "ideal")
    rng = np.random.default_rng(3)
    perm = rng.permutation(f.num_gpus)
    sizes = [3, 5, 1, f.num_gpus // 4]
    gl = np.split(perm[:sum(sizes)], np.cumsum(sizes)[:-1])
    T = rng.uniform(0.5, 2.0, (4, 4))
    T[1, 2] = 0.0
    want = np.zeros(r.num_res)
    k = _k(r)
    for i in range(4):
        for j in range(4):
            s, d = np.meshgrid(gl[i], gl[j], indexing="ij")
            m = s != d
            for c in range(k):
                want += r.loads(r.route(s[m], d[m], T[i, j] / k, c))
    np.testing.assert_allclose(matrix_loads(r, gl, T), want, rtol=1e-9, atol=1e-9)


def test_matrix_of_one_block_is_the_uniform_all_to_all():
    f = small_fabric("fat_tree-3")
    r = Router(f, "ideal")
    g = place(f, groups=2).groups
    np.testing.assert_allclose(matrix_loads(r, list(g), np.diag([1.5, 1.5])),
                               uniform_alltoall_loads(r, g, 1.5), rtol=1e-12)


def test_bad_input_is_a_clean_error():
    f = small_fabric("rail_optimized-2")
    r = Router(f)
    with pytest.raises(TopoError, match="does not exist"):
        uniform_alltoall_loads(r, np.array([[0, f.num_gpus]]), 1.0)
    with pytest.raises(TopoError, match="2-D"):
        uniform_alltoall_loads(r, np.arange(4), 1.0)
    with pytest.raises(TopoError, match="disjoint"):
        matrix_loads(r, [[0, 1], [1, 2]], np.ones((2, 2)))
    with pytest.raises(TopoError, match="2 x 2"):
        matrix_loads(r, [[0, 1], [2, 3]], np.ones(3))


def test_rail_only_without_pxn_is_refused_like_the_router():
    f = small_fabric("rail_only-2")
    r = Router(f, "ideal", pxn=False)
    groups = np.arange(f.num_gpus)[None, :]
    with pytest.raises(TopoError) as want:
        per_pair_loads(r, groups, 1.0)
    with pytest.raises(TopoError) as got:
        uniform_alltoall_loads(r, groups, 1.0)
    assert got.value.key == want.value.key == "pxn"


@pytest.mark.parametrize("spec, ecmp", [("meta-llama3-24k", "ideal"), ("h100-100k", "ideal"),
                                        ("rail-only-h100-16k", "ideal"), ("gb200-nvl72-superpod", "ideal")])
def test_bundled_fabrics_agree_with_per_pair_routing(spec, ecmp):
    """On the real structures (parallel cables, 7:1 cores, 72-GPU domains): 576 GPUs taken evenly from every
    pod, in 2 concurrent communicators, against the ~166k routed pairs."""
    import topo

    f = topo.build_fabric(topo.load_spec(spec))
    L = f.layout
    pods = L.num_pods
    per_pod = f.num_gpus // pods
    take = 576 // pods if 576 % pods == 0 else 8
    gpus = (np.arange(pods)[:, None] * per_pod + np.arange(take)[None, :] * (per_pod // take)).ravel()
    groups = gpus.reshape(-1, 2).T
    r = Router(f, ecmp)
    np.testing.assert_allclose(uniform_alltoall_loads(r, groups, 1.0), per_pair_loads(r, groups, 1.0),
                               rtol=1e-9, atol=1e-9)
