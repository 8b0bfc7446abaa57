"""The ECMP hash seed (``hash_seed``): seed 0 is the hash as it was, another seed draws other collisions, ideal ECMP
ignores it, and a study sweeps it as an axis whose summary names the seed of the worst draw."""

import hashlib

import numpy as np
import pandas as pd
import pytest

import topo
from topo.engine.options import EstimateOptions
from topo.engine.ecmp_hash import flow_key, mix64
from topo.engine.route import Router
from topo.errors import TopoError
from topo.fabric.levels import Level

from small_fabrics import small_fabric


def _all_pairs(n):
    return np.nonzero(~np.eye(n, dtype=bool))


def _hashed_loads(name, **kw):
    f = small_fabric(name)
    src, dst = _all_pairs(f.num_gpus)
    r = Router(f, "hash", subflows=2, **kw)
    return f, r.loads(r.route(src, dst, 1.0))


# the loads of every GPU pair routed with hashed ECMP (2 sub-flows), as topo computed them before the seed existed
# (commit 4a2e006): sha256 of the float64 loads, first 32 hex digits
BEFORE_THE_SEED = {"rail_optimized-3": "655e43d6afbb90763e669062761c47cd",
                   "fat_tree-3": "9eae41d247d9e2a02be69f6306aca9d8"}


@pytest.mark.parametrize("name", sorted(BEFORE_THE_SEED))
def test_seed_0_is_the_hash_as_it_was_bit_for_bit(name):
    for kw in ({}, {"salt": 0}):
        _, loads = _hashed_loads(name, **kw)
        assert hashlib.sha256(loads.tobytes()).hexdigest()[:32] == BEFORE_THE_SEED[name]


def test_estimate_default_is_seed_0():
    f = small_fabric("rail_optimized-3")
    a = topo.estimate(f, "alltoall", "64MiB", ecmp="hash")
    b = topo.estimate(f, "alltoall", "64MiB", ecmp="hash", hash_seed=0)
    assert a.results[0].time_s == b.results[0].time_s
    assert a.ecmp == b.ecmp == "hash"


@pytest.mark.parametrize("name", ["rail_optimized-3", "fat_tree-3", "rail_optimized-4"])
def test_two_seeds_draw_different_collisions_with_the_same_totals(name):
    f, a = _hashed_loads(name, salt=1)
    _, b = _hashed_loads(name, salt=2)
    assert not np.array_equal(a, b)
    for k in range(f.layout.num_tiers - 1):  # the cables of each boundary: loaded differently, same total
        sl = f.level_slice(Level.uplink(k))
        ids = np.r_[2 * np.arange(sl.start, sl.stop), 2 * np.arange(sl.start, sl.stop) + 1]
        assert not np.array_equal(a[ids], b[ids]), f"boundary {k}: the seed changed nothing"
        assert a[ids].sum() == pytest.approx(b[ids].sum(), rel=1e-12)
    sl = f.level_slice(Level.NIC)  # below the leaves there is no hash: untouched
    ids = np.r_[2 * np.arange(sl.start, sl.stop), 2 * np.arange(sl.start, sl.stop) + 1]
    np.testing.assert_array_equal(a[ids], b[ids])


def test_the_seed_changes_a_hashed_estimate():
    f = small_fabric("rail_optimized-3")
    times = {topo.estimate(f, "alltoall", "64MiB", ecmp="hash", hash_seed=s).results[0].time_s for s in range(6)}
    assert len(times) > 1
    r = topo.estimate(f, "alltoall", "64MiB", ecmp="hash", hash_seed=7)
    assert r.ecmp == "hash seed 7" and r.to_dict()["ecmp"] == "hash seed 7"


def test_ideal_ecmp_ignores_the_seed():
    f = small_fabric("rail_optimized-3")
    src, dst = _all_pairs(f.num_gpus)
    a, b = Router(f, "ideal"), Router(f, "ideal", salt=99)
    np.testing.assert_array_equal(a.loads(a.route(src, dst, 1.0)), b.loads(b.route(src, dst, 1.0)))
    x = topo.estimate(f, "alltoall", "64MiB", hash_seed=0).results[0]
    y = topo.estimate(f, "alltoall", "64MiB", hash_seed=12345).results[0]
    assert x.time_s == y.time_s and x.bottleneck == y.bottleneck


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, 2**63])
def test_a_bad_seed_is_one_clear_error(bad):
    with pytest.raises(TopoError) as e:
        EstimateOptions(hash_seed=bad).validated()
    assert e.value.key == "hash_seed" and repr(bad) in e.value.message


def test_the_cli_takes_hash_seed(capsys):
    from topo.cli.main import main

    assert main(["estimate", "dgx-h100-superpod", "-g", "64", "--placement", "one_per_server", "--size", "256MiB",
                 "-c", "alltoall", "--ecmp", "hash", "--hash-seed", "3", "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["ecmp"] == "hash seed 3"
    assert main(["estimate", "dgx-h100-superpod", "-g", "8", "--hash-seed", "x"]) == 2
    assert capsys.readouterr().err.strip() == "error: --hash-seed: must be a whole number, got 'x'"
    assert main(["estimate", "dgx-h100-superpod", "-g", "8", "--hash-seed", "-2"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --hash-seed: must be 0 to")


def test_hash_seed_as_a_sweep_axis(tmp_path):
    study = {"spec": "dgx-h100-superpod", "seeds": 6,
             "axes": {"collective": "alltoall", "gpus": 64, "placement": "one_per_server", "size": "256MiB",
                      "fabric.tiers[0].oversubscription": 2, "ecmp": "hash", "hash_seed": "{seed}"}}
    df = topo.sweep(study, tmp_path / "out.parquet", scheduler="serial")
    assert df["error"].isna().all()
    assert list(df["seed"]) == list(range(6)) and [int(x) for x in df["hash_seed"]] == list(range(6))
    assert df["time_s"].nunique() > 1  # the draws differ
    # each row is the estimate at that seed
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["fabric.tiers[0].oversubscription=2"]))
    one = topo.estimate(f, "alltoall", "256MiB", gpus=64, placement="one_per_server", ecmp="hash", hash_seed=4)
    assert df.loc[df["seed"] == 4, "time_s"].iat[0] == one.results[0].time_s
    s = topo.sweep.summarize(df, ["time_s"]).iloc[0]
    assert s["draws"] == 6
    assert s["worst"] == df["time_s"].max()
    assert s["worst_seed"] == int(df.loc[df["time_s"].idxmax(), "seed"])
    back = pd.read_parquet(tmp_path / "out.parquet")
    assert sorted(int(x) for x in back["hash_seed"]) == list(range(6))


# --- the salt's mixing (issue 30: replacing ``key ^= mix64(salt)`` by ``key ^= salt`` passed every test above) --

GAMMA = 0x9E3779B97F4A7C15  # splitmix64's increment


def _splitmix64_output(state: int) -> int:
    """splitmix64's output for a state already advanced by its increment, written from Vigna's reference
    (https://prng.di.unimi.it/splitmix64.c) in Python integers, independently of topo's numpy code."""
    z = state & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)


def test_mix64_is_splitmix64_value_for_value():
    # splitmix64 seeded with 0: its published first three outputs (Vigna's splitmix64.c reference sequence)
    want = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    states = np.array([(i * GAMMA) % 2**64 for i in range(3)], dtype=np.uint64)
    assert [int(v) for v in mix64(states)] == want
    xs = np.random.default_rng(3).integers(0, 2**63, size=200, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    assert [int(v) for v in mix64(xs)] == [_splitmix64_output(int(x) + GAMMA) for x in xs]


def test_the_salt_is_mixed_into_the_key_whole():
    """A salt changes every key by splitmix64 of the salt (about half of the 64 bits), not by the salt's own few
    bits: neighbouring salts are unrelated, and salt 0 is the unsalted key."""
    rng = np.random.default_rng(11)
    nic_s, nic_d = rng.integers(0, 50_000, 500), rng.integers(0, 50_000, 500)
    sub = rng.integers(0, 4, 500)
    plain = flow_key(nic_s, nic_d, sub)
    np.testing.assert_array_equal(flow_key(nic_s, nic_d, sub, 0), plain)
    keys = {}
    for salt in list(range(1, 65)) + [2**63, 2**64 - 1]:
        keys[salt] = flow_key(nic_s, nic_d, sub, salt)
        diff = keys[salt] ^ plain
        assert np.all(diff == diff[0]), "a salt moves every key by one value"
        assert int(diff[0]) == _splitmix64_output(salt + GAMMA), f"salt {salt}: not splitmix64 of the salt"
        assert 16 <= int(diff[0]).bit_count() <= 48, f"salt {salt} flips {int(diff[0]).bit_count()} bits"
    for salt in range(1, 64):  # neighbouring salts: keys far apart
        assert 16 <= int((keys[salt] ^ keys[salt + 1])[0]).bit_count() <= 48, salt


@pytest.mark.parametrize("name", ["rail_optimized-3", "fat_tree-3"])
def test_the_router_hashes_the_salted_key(name):
    """The router's first hashed pick (which spine above the leaf) is splitmix64 of the salted key modulo the
    spines of the group: the salt reaches the hash through :func:`flow_key`, not around it."""
    f = small_fabric(name)
    src, dst = _all_pairs(f.num_gpus)
    inter = f.gpu_domain(src) != f.gpu_domain(dst)
    src, dst = src[inter], dst[inter]
    for salt in (0, 1, 2, 12345):
        r = Router(f, "hash", salt=salt)
        send, recv = r.paths.endpoints(src, dst, np.zeros(src.size, dtype=np.int64))
        cross = np.flatnonzero(send.leaf != recv.leaf)
        ls, ld, ns, nd = send.leaf[cross], recv.leaf[cross], send.nic[cross], recv.nic[cross]
        k, use, up, _ = next(r.hashed_hops(ls, ld, ns, nd, 0, src[cross], dst[cross]))
        assert k == 0 and isinstance(use, slice)
        s = f.layout.tiers[1].switches_per_group
        key = [(int(a) * 0x100000001B3 ^ int(b)) % 2**64 for a, b in zip(ns, nd)]
        if salt:
            key = [x ^ _splitmix64_output(salt + GAMMA) for x in key]
        want_j = np.array([_splitmix64_output(x + GAMMA) % s for x in key])
        # the cable within the (leaf, spine) pair comes from the key's next values: compare switches, not cables
        first = f.uplink_id(0, ls, want_j, 0)
        m = f.layout.tiers[1].links_from_below
        assert np.all((up // 2 >= first) & (up // 2 < first + m)), f"salt {salt}: another spine than the hash's"
        assert np.unique(want_j).size > 1
