"""The range a measured time is likely in, given the model's time: from the model's own out-of-sample errors.

``benchmarks/accuracy.py`` scores every measured setup with the constants fitted on every other setup
(leave-one-setup-out) and prints the 10th and 90th percentiles of the signed error ``e = model / measured - 1`` per
size regime; ``topo/data/accuracy/collective_interval.toml`` records them with the run they came from. A model time
``t`` then puts 80% of the held-out measurements of that regime between ``t / (1 + e90)`` and ``t / (1 + e10)``.
The regimes are by message size, as the accuracy figures are: small messages, where the latency half of the model
is weak, get a wide range; large ones a narrow one. It describes bundled profiles on clusters they were not fitted
on; a profile calibrated on the user's own cluster is closer than that (no range is given for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import TopoError
from ..inputs import read_toml
from ..resources import data_dir

__all__ = ["Regime", "load_regimes", "regimes", "regime_of", "time_range_s"]

_FILE = ("accuracy", "collective_interval.toml")


@dataclass(frozen=True)
class Regime:
    """One size regime's error percentiles (signed, model / measured - 1).

    Attributes
    ----------
    name : str
    max_bytes : int
        The largest message size of the regime (the regimes are in increasing order).
    error_p10, error_p90 : float
        10th and 90th percentiles of the signed error over the regime's held-out sizes.
    sizes : int
        How many measured sizes they come from.
    in_table : bool
        Whether ``topo estimate``'s table prints the range (where the model is weaker).
    """

    name: str
    max_bytes: int
    error_p10: float
    error_p90: float
    sizes: int
    in_table: bool


@lru_cache(maxsize=1)
def regimes() -> tuple[Regime, ...]:
    """The regimes of the bundled interval file (``topo/data/accuracy/collective_interval.toml``), read once.

    Returns
    -------
    tuple of Regime
    """
    return load_regimes(data_dir(*_FILE))


def load_regimes(path) -> tuple[Regime, ...]:
    """The regimes of an interval file, in increasing size.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    tuple of Regime

    Raises
    ------
    TopoError
        A malformed file (keyed by the offending entry).
    """
    doc = read_toml(path, "interval file")
    out = []
    for i, r in enumerate(doc.get("regime", [])):
        key = f"regime[{i}]"
        try:
            reg = Regime(str(r["name"]), int(r["max_bytes"]), float(r["error_p10"]), float(r["error_p90"]),
                         int(r["sizes"]), bool(r.get("in_table", False)))
        except (KeyError, TypeError, ValueError) as exc:
            raise TopoError(f"needs name, max_bytes, error_p10, error_p90 and sizes ({exc})", source=str(path),
                            key=key) from None
        if not -1.0 < reg.error_p10 <= reg.error_p90:
            raise TopoError(f"error_p10 {reg.error_p10} and error_p90 {reg.error_p90}: need -1 < p10 <= p90",
                            source=str(path), key=key)
        if out and reg.max_bytes <= out[-1].max_bytes:
            raise TopoError(f"max_bytes {reg.max_bytes} is not above the previous regime's", source=str(path),
                            key=key)
        out.append(reg)
    if not out:
        raise TopoError("no [[regime]] entries", source=str(path), key="regime")
    return tuple(out)


def regime_of(size_bytes: int) -> Regime:
    """The regime a message size falls in (the last one past every bound).

    Parameters
    ----------
    size_bytes : int

    Returns
    -------
    Regime
    """
    for r in regimes():
        if size_bytes <= r.max_bytes:
            return r
    return regimes()[-1]


def time_range_s(size_bytes: int, time_s: float) -> tuple[float, float]:
    """Where 80% of measured times fell for a model time ``time_s`` at ``size_bytes`` on clusters the model was not
    fitted on: ``(time_s / (1 + p90), time_s / (1 + p10))``.

    Parameters
    ----------
    size_bytes : int
    time_s : float

    Returns
    -------
    tuple of float
        ``(low_s, high_s)``.
    """
    r = regime_of(size_bytes)
    return time_s / (1.0 + r.error_p90), time_s / (1.0 + r.error_p10)
