"""The one error type the library raises for bad input.

A :class:`TopoError` carries where the problem is (``source``: a file name or a command-line flag), which key
(a dotted path such as ``fabric.tiers[2].oversubscription``) and a message that repeats the value and says what
is allowed. ``str(err)`` is the single line the CLI prints after ``error: ``.
"""

from __future__ import annotations

__all__ = ["TopoError"]


class TopoError(ValueError):
    """Bad input: a spec, an override, an option or an argument that cannot be used as given."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.message = message
        self.source = source
        self.key = key
        super().__init__(self.line())

    def line(self) -> str:
        parts = [p for p in (self.source, self.key) if p]
        return ": ".join(parts + [self.message])

    def with_source(self, source: str) -> "TopoError":
        """The same error, attributed to ``source`` if it had none."""
        if self.source:
            return self
        return TopoError(self.message, source=source, key=self.key)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.line()
