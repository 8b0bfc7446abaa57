"""Hashed ECMP's hash: the key of a flow part (its two NICs, its sub-flow index and the salt), and the chain of
64-bit values each tier boundary picks its switch and cables from.

The key is ``nic_s * 0x100000001B3 ^ nic_d``, plus ``sub * 0x9E3779B1``, and, when a salt (the estimate option
``hash_seed``) is set, XORed with the salt *mixed* (:func:`mix64`): each salt changes about half of the key's
bits, so neighbouring salts draw unrelated collisions, and salt 0 leaves the key as it was. The values are
splitmix64's finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the
constants of Vigna's ``splitmix64.c``) applied in a chain (:class:`Hashes`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["mix64", "flow_key", "Hashes", "mod"]


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's output function on ``x + golden gamma``: a fast, well-spread deterministic hash of uint64 keys
    (``mix64(0)`` is splitmix64's first output from seed 0).

    Parameters
    ----------
    x : numpy.ndarray
        Keys (converted to uint64).

    Returns
    -------
    numpy.ndarray
        One new uint64 array (worked on in place).
    """
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    t = x >> np.uint64(30)
    x ^= t
    x *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(x, np.uint64(27), out=t)
    x ^= t
    x *= np.uint64(0x94D049BB133111EB)
    np.right_shift(x, np.uint64(31), out=t)
    x ^= t
    return x


def flow_key(nic_s: np.ndarray, nic_d: np.ndarray, sub, salt: int = 0) -> np.ndarray:
    """The hash key of flow parts from NIC ``nic_s`` to NIC ``nic_d``, hashed part ``sub``, under ``salt``.

    Parameters
    ----------
    nic_s, nic_d : numpy.ndarray
        The sending and receiving NIC of each flow part.
    sub : numpy.ndarray or int
        Each part's index among its flow's hashed sub-flows.
    salt : int
        A whole number from 0 to 2^64 - 1 (0: no salt).

    Returns
    -------
    numpy.ndarray
        uint64 keys; with a salt, the unsalted keys XOR ``mix64(salt)``.
    """
    key = np.asarray(nic_s).astype(np.uint64) * np.uint64(0x100000001B3)
    key ^= np.asarray(nic_d).astype(np.uint64)
    key += np.asarray(sub).astype(np.uint64) * np.uint64(0x9E3779B1)
    if salt:  # a salt mixed in whole: neighbouring salts give unrelated hashes
        key ^= mix64(np.array([salt], dtype=np.uint64))[0]
    return key


class Hashes:
    """The hash values of flow parts, per tier boundary: which switch above (``switch(k)``), which up cable
    (``cable(k, False)``) and which down cable (``cable(k, True)``), each an independent 64-bit value (the up and
    the down cable of a boundary never share one: they would always pick the same index).

    The values come from one chain ``v0 = mix(key)``, ``v(i+1) = mix(v(i))``: boundary 0 takes ``v0`` (switch, its
    high half the up cable) and ``v1``'s high half (down cable); boundary 1 ``v1`` and ``v2`` (up; high half:
    down); boundary ``k >= 2`` ``v(2k-1)`` (switch; high half: up) and ``v(2k)``'s high half (down). Links of
    the chain are computed when first asked for: a boundary with one cable per switch pair never needs its cable
    values.

    Parameters
    ----------
    key : numpy.ndarray
        The uint64 keys of the flow parts (:func:`flow_key`).
    """

    def __init__(self, key: np.ndarray):
        self._chain = [mix64(key)]

    def _v(self, i: int) -> np.ndarray:
        while len(self._chain) <= i:
            self._chain.append(mix64(self._chain[-1]))
        return self._chain[i]

    def switch(self, k: int) -> np.ndarray:
        """The switch-above hash values at boundary ``k``.

        Parameters
        ----------
        k : int
            The tier boundary.

        Returns
        -------
        numpy.ndarray
        """
        return self._v(max(0, 2 * k - 1))

    def cable(self, k: int, down: bool) -> np.ndarray:
        """The up (or down) cable hash values at boundary ``k``.

        Parameters
        ----------
        k : int
            The tier boundary.
        down : bool
            The down cable's values instead of the up cable's.

        Returns
        -------
        numpy.ndarray
        """
        if k == 1:
            return self._v(2) >> np.uint64(32) if down else self._v(2)
        if k == 0:
            return self._v(int(down)) >> np.uint64(32)
        return self._v(2 * k if down else 2 * k - 1) >> np.uint64(32)


def mod(h: np.ndarray, n: int) -> np.ndarray:
    """``h mod n`` as int64 (a mask when ``n`` is a power of two: the same value, faster).

    Parameters
    ----------
    h : numpy.ndarray
        uint64 hash values.
    n : int
        The number of choices.

    Returns
    -------
    numpy.ndarray
    """
    if n & (n - 1) == 0:
        return (h & np.uint64(n - 1)).astype(np.int64)
    return (h % np.uint64(n)).astype(np.int64)
