"""Units: the one place that parses and prints sizes, bandwidths and times.

Conventions (stated once, used everywhere):

- GB = 1e9 bytes, GiB = 2**30 bytes; Gb = 1e9 bits.  ``400 Gb/s`` = 50e9 bytes/s = ``50 GB/s``.
- Bandwidths inside topo are bytes per second per direction (``*_Bps``); links are full duplex.
- Times are seconds (``*_s``).
- Message sizes follow nccl-tests: a bare suffix ``K``, ``M``, ``G``, ``T`` is binary
  (``16G`` = 16 * 2**30 bytes, as nccl-tests' ``-b``/``-e`` parse it); explicit units are taken literally
  (``1GiB`` = 2**30, ``1GB`` = 1e9).

Every parser raises :class:`UnitError` with a message that repeats the value and says what is allowed.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = [
    "UnitError",
    "with_article",
    "parse_size_bytes",
    "parse_size_fraction",
    "format_bytes_exact",
    "parse_bandwidth_Bps",
    "parse_time_s",
    "parse_power_W",
    "format_size",
    "format_bandwidth",
    "format_rate",
    "format_time",
    "format_usd",
    "format_count",
    "format_gpu_hours",
    "in_unit",
    "format_in",
    "GB",
    "GiB",
    "MAX_SIZE_BYTES",
    "whole_bytes",
]

GB = 1e9
GiB = 2**30


class UnitError(ValueError):
    """A quantity that could not be parsed; the message says what is allowed."""


_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_SIGNED = r"([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"  # read with its sign, so a negative value says so

MAX_SIZE_BYTES = 2**50
"""The largest message size topo takes: 1 PiB, thousands of times any GPU's memory (the largest hold a few hundred
GB); beyond it a size is a typo."""

_SIZE_UNITS = {
    "": 1,
    "b": 1,  # nccl-tests-style bare number; "B" lowercased
    "byte": 1,
    "bytes": 1,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
    "t": 2**40,
    "p": 2**50,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
}

_SIZE_HELP = "a size such as 8, 64K, 1M, 16G (nccl-tests, binary) or 1GiB, 512MB"


def parse_size_fraction(text: str | int | float) -> Fraction:
    """Parse a message size into bytes, exactly, a fraction of a byte kept (``205.2MiB``, a size ``topo train``
    prints to four digits, is 215,167,795.2 bytes); up to :data:`MAX_SIZE_BYTES`.

    Parameters
    ----------
    text : str, int or float
        A size as nccl-tests takes it (8, 64K, 1M, 16G: binary) or with its unit (1GiB, 512MB).

    Returns
    -------
    fractions.Fraction
        The bytes, > 0 and at most :data:`MAX_SIZE_BYTES`.

    Raises
    ------
    UnitError
        Not a size, a size <= 0 (nan and inf are not sizes), bits for bytes, or more than :data:`MAX_SIZE_BYTES`.

    >>> parse_size_fraction("205.2MiB")
    Fraction(1075838976, 5)
    """
    if isinstance(text, bool):
        raise UnitError(f"expected {_SIZE_HELP}, got {text!r}")
    if isinstance(text, (int, float)) or type(text).__module__ == "numpy":
        try:
            value, mult = Fraction(text), 1
        except (ValueError, OverflowError, TypeError):
            raise UnitError(f"a size must be a positive number of bytes, got {text!r}") from None
    else:
        m = re.fullmatch(r"\s*" + _SIGNED + r"\s*([A-Za-z]*)\s*", str(text))
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise UnitError(f"expected {_SIZE_HELP}, got {text!r}")
        if len(m.group(2)) > 1 and m.group(2).endswith("b"):  # walk16: "1Gb" read as 1e9 bytes, 8x a gigabit
            n, p = m.group(1), m.group(2)[0].upper()
            raise UnitError(f"a size is in bytes, and {m.group(2)!r} counts bits (as in '400 Gb/s'), got {text!r}; "
                            f"allowed: {n}{p}B, {n}{p}iB or nccl-tests' {n}{p}")
        mantissa, _, exponent = m.group(1).lower().partition("e")
        if exponent and int(exponent) < -40:  # never build a huge exact denominator
            raise UnitError(f"expected {_SIZE_HELP}, got {text!r} (an exponent below -40)")
        if len(mantissa) > 40 or (exponent and int(exponent) > 40):  # never build a huge exact number
            raise UnitError(f"a size is at most {MAX_SIZE_BYTES:,} bytes (1 PiB, far beyond any GPU's memory), "
                            f"got {text!r}")
        value, mult = Fraction(m.group(1)), _SIZE_UNITS[m.group(2).lower()]
    nbytes = value * mult
    if nbytes <= 0:
        raise UnitError(f"a size must be a positive number of bytes, got {text!r}"
                        + (" (the sign is wrong)" if nbytes < 0 else ""))
    if nbytes > MAX_SIZE_BYTES:
        raise UnitError(f"a size is at most {MAX_SIZE_BYTES:,} bytes (1 PiB, far beyond any GPU's memory), "
                        f"got {text!r}")
    return nbytes


def format_bytes_exact(nbytes: Fraction | int) -> str:
    """Bytes with thousands separators, a fraction of a byte to three decimals (three digits below one byte):
    ``215,167,795.2``.

    Parameters
    ----------
    nbytes : fractions.Fraction or int
        The bytes, exact (:func:`parse_size_fraction`'s).

    Returns
    -------
    str

    >>> format_bytes_exact(Fraction(1075838976, 5)), format_bytes_exact(1024)
    ('215,167,795.2', '1,024')
    """
    if Fraction(nbytes).denominator == 1:
        return f"{int(nbytes):,}"
    if nbytes < 1:
        return f"{float(nbytes):.3g}"
    return f"{float(nbytes):,.3f}".rstrip("0").rstrip(".")


def parse_size_bytes(text: str | int | float) -> int:
    """Parse a message size into whole bytes, exactly (no rounding through a float), up to :data:`MAX_SIZE_BYTES`.

    Parameters
    ----------
    text : str, int or float
        As :func:`parse_size_fraction` takes it.

    Returns
    -------
    int

    Raises
    ------
    UnitError
        As :func:`parse_size_fraction`, or a fraction of a byte: the message names the whole sizes either side.

    >>> parse_size_bytes("16G")
    17179869184
    >>> parse_size_bytes("1GB"), parse_size_bytes("1GiB"), parse_size_bytes(8), parse_size_bytes("1.5K")
    (1000000000, 1073741824, 8, 1536)
    """
    nbytes = parse_size_fraction(text)
    if nbytes.denominator != 1:
        below = math.floor(nbytes)
        either = f"{below:,} or {below + 1:,} bytes" if below >= 1 else "1 byte or more"
        raise UnitError(f"a size must be a whole number of bytes, got {text!r} = {format_bytes_exact(nbytes)} bytes; "
                        f"allowed: {either}")
    return int(nbytes)


_COUNT_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT_HELP = "a count such as 15e12, 15T, 2.5B, 400M or 10K (decimal: K 1e3, M 1e6, B or G 1e9, T 1e12)"


def parse_count(text: str | int | float, noun: str = "count") -> float:
    """Parse a finite count of at least 1 such as a number of tokens, with a decimal suffix (walk26: ``--tokens 15T``
    was refused as "invalid float value", where model sizes and token budgets are written 405B and 15T).

    >>> parse_count("15T"), parse_count("2.5B"), parse_count("15e12"), parse_count(400)
    (15000000000000.0, 2500000000.0, 15000000000000.0, 400.0)
    """
    m = re.fullmatch(r"\s*" + _SIGNED + r"\s*([A-Za-z]?)\s*", str(text))
    if isinstance(text, bool) or not (m and m.group(2).lower() in _COUNT_UNITS or str(text).strip().lower()
                                      in ("inf", "+inf", "-inf", "nan")):
        raise UnitError(f"expected {_COUNT_HELP}, got {text!r}")
    value = float(m.group(1)) * _COUNT_UNITS[m.group(2).lower()] if m else float(text)
    if not 0 < value < math.inf:
        raise UnitError(f"must be a positive, finite {noun}, got {str(text).strip()}")
    if value < 1:  # rev67: --tokens 0.1, a tenth of one, was taken
        raise UnitError(f"must be a {noun} of at least 1, got {str(text).strip()}; allowed: a count such as 15T, "
                        "2.5B or 1e9")
    return value


_BW_UNITS = {
    # bits per second
    "b/s": 1 / 8, "bps": 1 / 8, "bit/s": 1 / 8,
    "kb/s": 1e3 / 8, "kbps": 1e3 / 8,
    "mb/s": 1e6 / 8, "mbps": 1e6 / 8,
    "gb/s": 1e9 / 8, "gbps": 1e9 / 8, "gbit/s": 1e9 / 8,
    "tb/s": 1e12 / 8, "tbps": 1e12 / 8, "tbit/s": 1e12 / 8,
}
_BYTE_BW_UNITS = {
    "B/s": 1.0, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "KiB/s": 2**10, "MiB/s": 2**20, "GiB/s": 2**30, "TiB/s": 2**40,
    "Bps": 1.0, "GBps": 1e9, "MBps": 1e6, "TBps": 1e12,
}
_BW_HELP = "a bandwidth with its unit, such as '400 Gb/s', '400Gbps', '450 GB/s' or '1.8 TB/s'"


def parse_bandwidth_Bps(text: str) -> float:
    """Parse a bandwidth into bytes per second. Bits (``Gb/s``, ``Gbps``) and bytes (``GB/s``) are told
    apart by the case of the ``b``.

    >>> parse_bandwidth_Bps("400 Gb/s"), parse_bandwidth_Bps("450 GB/s")
    (50000000000.0, 450000000000.0)
    """
    if not isinstance(text, str):
        raise UnitError(f"expected {_BW_HELP}, got {text!r} (a bare number has no unit)")
    m = re.fullmatch(r"\s*" + _SIGNED + r"\s*([A-Za-z/]+)\s*", text)
    if not m:
        raise UnitError(f"expected {_BW_HELP}, got {text!r}")
    value, unit = float(m.group(1)), m.group(2)
    if value < 0:
        raise UnitError(f"a bandwidth must be positive, got {text!r} (the sign is wrong)")
    if unit in _BYTE_BW_UNITS:
        mult = _BYTE_BW_UNITS[unit]
    elif "b" in unit and "B" not in unit and unit.lower() in _BW_UNITS:
        mult = _BW_UNITS[unit.lower()]
    else:
        raise UnitError(f"expected {_BW_HELP}, got {text!r}")
    bps = value * mult
    if not math.isfinite(bps) or bps <= 0:
        raise UnitError(f"a bandwidth must be positive, got {text!r}")
    return bps


_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_TIME_HELP = "a time with its unit, such as '500 ns', '1.5 us', '2 ms' or '0 ns'"


def parse_time_s(text: str) -> float:
    """Parse a duration into seconds. Zero is allowed (a latency may be neglected on purpose).

    >>> parse_time_s("1.5 us"), parse_time_s("2 ms")
    (1.5e-06, 0.002)
    """
    if not isinstance(text, str):
        raise UnitError(f"expected {_TIME_HELP}, got {text!r} (a bare number has no unit)")
    m = re.fullmatch(r"\s*" + _SIGNED + r"\s*([a-zµ]+)\s*", text)
    if not m or m.group(2) not in _TIME_UNITS:
        raise UnitError(f"expected {_TIME_HELP}, got {text!r}")
    if float(m.group(1)) < 0:
        raise UnitError(f"a time must be >= 0, got {text!r} (the sign is wrong)")
    value = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if not math.isfinite(value) or value < 0:
        raise UnitError(f"a time must be >= 0, got {text!r}")
    return value


_POWER_UNITS = {"W": 1.0, "kW": 1e3, "MW": 1e6, "GW": 1e9}
_POWER_HELP = "a power with its unit, such as '50MW', '50 MW', '800 kW' or '1.2GW'"


def parse_power_W(text: str) -> float:
    """Parse an electrical power into watts (a budget such as ``50MW``); the unit is required, its case as written
    (``mW`` is not ``MW``).

    >>> parse_power_W("50MW"), parse_power_W("800 kW"), parse_power_W("1.2GW")
    (50000000.0, 800000.0, 1200000000.0)
    """
    m = re.fullmatch(r"\s*" + _SIGNED + r"\s*([A-Za-z]+)\s*", str(text))
    if not m or m.group(2) not in _POWER_UNITS:
        bare = " (a bare number has no unit)" if re.fullmatch(r"\s*" + _SIGNED + r"\s*", str(text)) else ""
        raise UnitError(f"expected {_POWER_HELP}, got {text!r}{bare}")
    value = float(m.group(1)) * _POWER_UNITS[m.group(2)]
    if not 0 < value < math.inf:
        raise UnitError(f"a power must be positive and finite, got {str(text).strip()!r}")
    return value


def whole_bytes(d: dict) -> dict:
    """``d`` with each finite float under a key ``bytes`` or ending in ``_bytes`` or ``_bytes_per_step`` rounded to
    an int (a JSON document's byte counts are whole, as ``capacity_bytes`` is); other values as they are.

    Parameters
    ----------
    d : dict
        One flat level of a JSON-ready document (nested dicts are not entered).

    Returns
    -------
    dict

    >>> whole_bytes({"size_bytes": 67108864.0, "time_s": 0.5, "short_bytes": 0.0})
    {'size_bytes': 67108864, 'time_s': 0.5, 'short_bytes': 0}
    """
    def count(k: str, v) -> bool:
        return (k == "bytes" or k.endswith(("_bytes", "_bytes_per_step"))) and isinstance(v, float) and math.isfinite(v)

    return {k: int(round(v)) if count(k, v) else v for k, v in d.items()}


def format_size(nbytes: float) -> str:
    """Human size in binary units, as nccl-tests users read them: ``1 GiB``, ``64 KiB``, ``8 B``."""
    for unit, mult in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= mult:
            return f"{nbytes / mult:.4g} {unit}"
    return f"{nbytes:.4g} B"


def format_bandwidth(bps: float) -> str:
    """Bandwidth in decimal bytes per second (GB = 1e9): ``50 GB/s``, ``1.2 TB/s``."""
    for unit, mult in (("PB/s", 1e15), ("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6)):
        if bps >= mult:
            return f"{bps / mult:.4g} {unit}"
    return f"{bps:.4g} B/s"


def format_rate(bps: float) -> str:
    """A line rate in bits per second, as NICs and ports are sold: ``400 Gb/s``, ``1.6 Tb/s``."""
    bits = bps * 8
    for unit, mult in (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6)):
        if bits >= mult:
            return f"{bits / mult:.4g} {unit}"
    return f"{bits:.4g} b/s"


def format_time(seconds: float, zeros: bool = True) -> str:
    """Duration with a readable unit and 4 significant digits, trailing zeros kept (``3.800 s``, ``4.040 ms``,
    ``12.30 us``): the one format of a time wherever topo prints a figure, a table's column or a note's prose, so
    the same time reads the same everywhere (walk17, section 192: ``3.8 s`` under ``3.776 s``). Zero is ``0 s``.

    Parameters
    ----------
    seconds : float
    zeros : bool
        False drops trailing zeros (``3.8 s``): a value as one writes it in a spec (the spec reference's defaults),
        not a figure topo computed.

    Returns
    -------
    str

    >>> format_time(3.8), format_time(4.04e-3), format_time(1000), format_time(142.5e-6), format_time(0)
    ('3.800 s', '4.040 ms', '1000 s', '142.5 us', '0 s')
    >>> format_time(1.3e-7, zeros=False)
    '130 ns'
    """
    if seconds == 0:
        return "0 s"
    spec = "#.4g" if zeros else ".4g"
    for unit, mult in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= mult or unit == "ns":
            return f"{format(seconds / mult, spec).rstrip('.')} {unit}"


def format_usd(usd: float, smallest: str = "") -> str:
    """Money as the planner prints it: ``$7.296B`` from a billion, ``$70.6M`` from a million, else ``$25,000``;
    ``smallest="M"`` prints less than a million in millions too (``$0.2M``, a plan's tables).

    Parameters
    ----------
    usd : float
        US dollars.
    smallest : {"", "M"}, optional
        ``"M"``: millions below a million too.

    Returns
    -------
    str
        The amount with its ``$`` and scale letter.

    >>> format_usd(7.296e9), format_usd(70.6e6), format_usd(25000), format_usd(250e3, smallest="M")
    ('$7.296B', '$70.6M', '$25,000', '$0.2M')
    """
    if smallest not in ("", "M"):
        raise ValueError(f"smallest must be '' or 'M', got {smallest!r}")
    if abs(usd) >= 1e9:
        return f"${usd / 1e9:,.3f}B"
    if abs(usd) >= 1e6 or smallest == "M":
        return f"${usd / 1e6:,.1f}M"
    return f"${usd:,.0f}"


_FIXED_UNITS = {
    # unit printed: how many of the base unit it holds (the base is the quantity's SI unit as topo names it)
    "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,  # bytes, decimal
    "GiB": 2**30,  # bytes, binary
    "GB/s": 1e9, "TB/s": 1e12,  # bytes per second
    "Gb/s": 1e9 / 8,  # bytes per second, printed in bits
    "kW": 1e3, "MW": 1e6,  # watts
    "GWh": 1e9, "TWh": 1e12,  # watt-hours
    "kt": 1e6, "Mt": 1e9,  # kilograms (kilotonnes, megatonnes)
    "TFLOP/s": 1e12, "EFLOP/s": 1e18,  # FLOP per second
    "min": 60.0, "h": 3600.0, "days": 86400.0,  # seconds
    "million L": 1e6,  # litres
    "km": 1e3,  # metres
    "$M": 1e6,  # US dollars, in millions (printed "$97M": format_usd, or in_unit for a figure's axis)
}


def in_unit(value, unit: str):
    """``value`` (bytes, watts, Wh, kg, FLOP/s, seconds, litres or metres: the base of ``unit``) in ``unit``,
    one of the fixed units the output prints (``"PB"``, ``"TB"``, ``"MW"``, ``"TWh"``, ``"Mt"``, ``"Gb/s"``, ...).
    Works on numpy arrays too.

    Parameters
    ----------
    value : float or numpy.ndarray
        The quantity in the base unit of ``unit``.
    unit : str
        A key of the fixed units (``"PB"``, ``"Gb/s"``, ``"TFLOP/s"``, ``"days"``, ...).

    Returns
    -------
    float or numpy.ndarray
        ``value`` divided by what one ``unit`` holds.

    Raises
    ------
    ValueError
        An unknown ``unit`` (the message lists the known ones).

    >>> in_unit(2.5e15, "PB"), in_unit(400e9 / 8, "Gb/s"), in_unit(5400, "h"), in_unit(989e12, "TFLOP/s")
    (2.5, 400.0, 1.5, 989.0)
    """
    try:
        return value / _FIXED_UNITS[unit]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r}; known: {', '.join(_FIXED_UNITS)}") from None


def format_in(value: float, unit: str, spec: str = ",.3g") -> str:
    """``value`` printed in a fixed ``unit`` with the format ``spec`` (a plan's lines keep one unit a column,
    where :func:`format_size` and friends pick the unit by size).

    Parameters
    ----------
    value : float
        The quantity in the base unit of ``unit`` (:func:`in_unit`).
    unit : str
        The fixed unit, printed after the number.
    spec : str, optional
        The number's format specification (default ``",.3g"``).

    Returns
    -------
    str
        ``"<number> <unit>"``.

    >>> format_in(3.36e14, "PB"), format_in(1.447e12, "TWh", ",.3f"), format_in(165.19e6, "MW", ",.2f")
    ('0.336 PB', '1.447 TWh', '165.19 MW')
    """
    return f"{in_unit(value, unit):{spec}} {unit}"


def format_count(n: int) -> str:
    """Integer with thousands separators: ``98,304``."""
    return f"{int(n):,}"


def format_suffixed_count(n: float) -> str:
    """A count as budgets write it, with the decimal suffix :func:`parse_count` reads (walk33: ``--tokens 15T``
    was echoed as "1.5e+13 tokens"); below a thousand, the number.

    >>> format_suffixed_count(15e12), format_suffixed_count(2.5e9), format_suffixed_count(14.8e12), format_suffixed_count(400)
    ('15T', '2.5B', '14.8T', '400')
    """
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def format_gpu_hours(hours: float) -> str:
    """GPU-hours as a budget reads them: millions (3.06M), else whole hours (29, not 2.86e-05M).

    >>> format_gpu_hours(3.06e6), format_gpu_hours(29.4)
    ('3.06M', '29')
    """
    return f"{hours / 1e6:.3g}M" if hours >= 1e6 else format_count(round(hours))


def count_noun(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for 1: ``1 server``, ``2,048 servers``, ``1 scalable unit``; the plural
    of a noun ending in s, x, z, ch or sh takes "es" (a block named "campus": ``4 campuses``).

    >>> count_noun(1, "server"), count_noun(2048, "server"), count_noun(3, "switch"), count_noun(4, "campus")
    ('1 server', '2,048 servers', '3 switches', '4 campuses')
    """
    if int(n) == 1:
        return f"{format_count(n)} {noun}"
    if plural is None:
        plural = noun + ("es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s")
    return f"{format_count(n)} {plural}"


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an", by its first letter (block names are the user's: "an island", "a pod", "a
    unit": "an" before a vowel, except the "you" sound of uni-, use-, eu-).

    >>> with_article("island"), with_article("pod"), with_article("unit"), with_article("hall")
    ('an island', 'a pod', 'a unit', 'a hall')
    """
    vowel = noun[:1].lower() in "aeiou" and not noun.lower().startswith(("uni", "use", "usu", "eu", "one"))
    return f"{'an' if vowel else 'a'} {noun}"
