"""The error types the library raises: :class:`TopoError` for bad input, and its subclasses where code must tell
failures apart (never by the text of a message).

A :class:`TopoError` carries where the problem is (``source``: a file name or a command-line flag), which key
(a dotted path such as ``fabric.tiers[2].oversubscription``) and a message that repeats the value and says what
is allowed. ``str(err)`` is the single line the CLI prints after ``error: ``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["TopoError", "AlgorithmUnavailable", "ProtocolUnavailable", "ClassesDiverge", "TooManyFlows",
           "Unreachable", "OnFabric", "StudyNotSpec", "RegionNotSpec", "one_line", "closest"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_WORD = re.compile(r"[a-z]+|[0-9]+")  # a name's words for closest(): runs of letters or of digits


def one_line(text: str) -> str:
    """``text`` with control characters and line separators escaped (``\\n``, ``\\x1b``), so that whatever a
    user typed into a key or a value, an error stays one line.

    >>> one_line("cluster.\\n\\x1b[2J")
    'cluster.\\\\n\\\\x1b[2J'
    """
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def closest(name: str, allowed: Iterable[str], cutoff: float = 0.6) -> list[str]:
    """The allowed name a mistyped ``name`` most likely meant, as a list of at most one (empty: none is close).

    A name that differs from an allowed one only in case (``[MoE]`` for ``[moe]``) is that name; a name of two
    words or more (runs of letters or of digits: ``nemotron3-nano`` is nemotron, 3, nano) that some allowed names
    hold every word of is the closest of those (walk41: ``nemotron3-nano`` was taken for ``nemotron-nano-9b-v2``,
    not ``nemotron-3-nano-30b-a3b``, and ``gb200`` got no suggestion); otherwise the closest by
    :func:`difflib.get_close_matches` at ``cutoff``, compared without case. The one rule every "did you mean" of
    topo's errors uses.

    Parameters
    ----------
    name : str
        What the user wrote.
    allowed : iterable of str
        The names allowed there.
    cutoff : float
        The least similarity (0-1) for a suggestion.

    Returns
    -------
    list of str
        ``[suggestion]`` or ``[]``.

    >>> closest("MoE", ["moe", "model"])
    ['moe']
    >>> closest("modle", ["moe", "model"])
    ['model']
    >>> closest("nemotron3-nano", ["nemotron-nano-9b-v2", "nemotron-3-nano-30b-a3b", "nemotron-3-super-120b-a12b"])
    ['nemotron-3-nano-30b-a3b']
    """
    name, allowed = str(name), [str(a) for a in allowed]  # a pydantic location may be an index
    by_lower = {a.lower(): a for a in reversed(allowed)}
    if name.lower() in by_lower:
        return [by_lower[name.lower()]]
    words = set(_WORD.findall(name.lower()))
    holding = [a for a in by_lower if words <= set(_WORD.findall(a))] if len(words) >= 2 else []
    close = difflib.get_close_matches(name.lower(), holding or list(by_lower), n=1, cutoff=0 if holding else cutoff)
    return [by_lower[close[0]]] if close else []


def key_hint(name: str, allowed: Iterable[str]) -> str:
    """The "did you mean" of an unknown key: the keys of the same first word (``nic_speed``: ``nic_rate``,
    ``nic_model``, ``nic_latency``; walk28 took ``nics`` for it) where the name has more than one word and one
    allowed key starts with its first, else :func:`closest`'s one; "" when none.

    >>> key_hint("nic_speed", ["nics", "nic_rate", "nic_model"])
    "; did you mean one of 'nic_rate', 'nic_model'?"
    >>> key_hint("nic_rat", ["nics", "nic_rate", "nic_model"])
    "; did you mean 'nic_rate'?"
    >>> key_hint("nic", ["nics", "nic_rate"])
    "; did you mean 'nics'?"
    """
    allowed = [str(a) for a in allowed]
    head, _, rest = str(name).lower().partition("_")
    same = [a for a in allowed if a.lower().split("_")[0] == head] if rest else []
    if not same or str(name).lower() in (a.lower() for a in allowed):
        close = closest(name, allowed)
        return f"; did you mean {close[0]!r}?" if close else ""
    by_rest = {a.lower().partition("_")[2]: a for a in same}
    near = closest(rest, by_rest)  # a typo in the second word (nic_rat): that key
    same = [by_rest[near[0].lower()]] if near else same
    return f"; did you mean {same[0]!r}?" if len(same) == 1 else \
        f"; did you mean one of {', '.join(repr(a) for a in same)}?"


class TopoError(ValueError):
    """Bad input: a spec, an override, an option or an argument that cannot be used as given."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.message = message
        self.source = source
        self.key = key
        super().__init__(self.line())

    def line(self) -> str:
        """``source: key: message`` on one line (control characters escaped, see :func:`one_line`)."""
        parts = [p for p in (self.source, self.key) if p]
        return one_line(": ".join(parts + [self.message]))

    def with_source(self, source: str) -> "TopoError":
        """The same error (same type), attributed to ``source`` if it had none."""
        if self.source:
            return self
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        TopoError.__init__(out, self.message, source=source, key=self.key)
        return out

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.line()


class AlgorithmUnavailable(TopoError):
    """An algorithm cannot run for this collective, fabric, placement or profile.

    ``reason`` says why, without the algorithm's name (``"needs the same number of ranks in every NVLink
    domain"``); the message may add the name. :func:`topo.engine.estimate.evaluate` leaves such an algorithm out
    of ``auto`` and raises this when the one algorithm asked for cannot run.
    """

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None,
                 reason: str | None = None):
        self.reason = message if reason is None else reason
        super().__init__(message, source=source, key=key)


class ProtocolUnavailable(AlgorithmUnavailable):
    """An algorithm does not run with the protocol the options pinned (the profile allows it others)."""


class ClassesDiverge(TopoError):
    """Max-min sharing: the members of a merged flow class would move at different speeds (a resource only some of
    them cross binds first), so the classes cannot answer; the flows must be filled one by one."""


class TooManyFlows(TopoError):
    """Max-min sharing needs every flow (or class) of a step, and there are more than are kept one by one."""


class Unreachable(TopoError):
    """Failed parts cut a GPU (or a flow's every path) off the fabric: a collective that needs it cannot run."""


class OnFabric(TopoError):
    """An error of a layout on one of several fabrics it runs on in lockstep (a region's site fabrics,
    :func:`topo.training.search.search_layouts`' ``also_on``): ``fabric`` is the one it came from, so that the caller
    names that site (regsearch66: a failed GPU under the job on the second site was named with the first)."""

    def __init__(self, exc: TopoError, fabric):
        self.fabric = fabric
        super().__init__(exc.message, source=exc.source, key=exc.key)


class StudyNotSpec(TopoError):
    """A sweep study (``topo.sweep.study``) was given where one fabric's spec is expected. ``source`` is the
    study's file; the CLI adds how to run it (the library names no command or flag)."""


class RegionNotSpec(TopoError):
    """A region of several sites (``[[sites]]``) was given where one fabric's spec is expected (a comparison, a
    calibration, a traffic mix, a site of another region). ``source`` is the region's file; the CLI adds which
    commands take a region (the library names no command or flag)."""
