"""The files a point reads by path (a model, traffic or profile file named in an axis), keyed by their content:
what :meth:`topo.sweep.Study.points` puts into a point's hash, and what a worker's model cache is keyed by, so
that an edited file is never answered from an old result."""

from __future__ import annotations

import hashlib

from ..inputs import is_input_file

__all__ = ["FILE_AXES", "file_digest"]

FILE_AXES = ("model", "traffic", "profile")  # axes whose value may name a file that a point reads


def file_digest(value) -> str | None:
    """The SHA-256 of the bytes of the file that an axis value names (a model, traffic or profile file), None
    when the value is not a file's path (a bundled name, a number); an unreadable file is keyed by its error, so
    that its point is computed (and reports it) again once the file is readable."""
    if not isinstance(value, str) or not value or not is_input_file(value):
        return None
    try:
        with open(value, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
