"""JAX rematerialisation policies (MaxText's ``remat_policy``) as the recomputation they cause.

A policy names what the forward pass saves; the backward pass recomputes what it needs that was not saved. Each
bundled policy (``topo/data/compute/remat_policies.toml``, from MaxText's ``Decoder.get_remat_policy``) is therefore
a recomputation setting in :class:`~topo.training.parallel.ParallelLayout`'s terms: ``recompute`` and
``recompute_modules``.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["remat_policies", "remat_settings", "RematPolicyError"]


class RematPolicyError(ValueError):
    """A policy topo does not know or does not model (the message says which, and what is allowed)."""


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "remat_policies.toml").read_text(encoding="utf-8"))


def remat_policies() -> tuple[str, ...]:
    """The policy names topo models."""
    return tuple(_table()["policies"])


def remat_settings(name: str) -> dict:
    """``{"recompute": ..., "recompute_modules": (...)}`` of policy ``name``.

    Raises
    ------
    RematPolicyError
        An unknown policy, or one that offloads to host memory (not modelled), naming the allowed ones.
    """
    t = _table()
    allowed = ", ".join(remat_policies())
    if name in t["not_modelled"]:
        raise RematPolicyError(f"{name!r} {t['not_modelled'][name]}, which topo does not model; allowed: {allowed}")
    if name not in t["policies"]:
        raise RematPolicyError(f"unknown remat policy {name!r}; allowed: {allowed}")
    p = t["policies"][name]
    return {"recompute": p["recompute"], "recompute_modules": tuple(p["modules"])}
