"""The one error type the library raises for bad input.

A :class:`TopoError` carries where the problem is (``source``: a file name or a command-line flag), which key
(a dotted path such as ``fabric.tiers[2].oversubscription``) and a message that repeats the value and says what
is allowed. ``str(err)`` is the single line the CLI prints after ``error: ``.
"""

from __future__ import annotations

import re

__all__ = ["TopoError", "one_line"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with control characters and line separators escaped (``\\n``, ``\\x1b``), so that whatever a
    user typed into a key or a value, an error stays one line.

    >>> one_line("cluster.\\n\\x1b[2J")
    'cluster.\\\\n\\\\x1b[2J'
    """
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


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
        """The same error, attributed to ``source`` if it had none."""
        if self.source:
            return self
        return TopoError(self.message, source=source, key=self.key)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.line()
