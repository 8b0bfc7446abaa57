"""Writing the report's files: whole or not at all, never over an input (:func:`topo.atomic.open_output`), and
marked as ours (``written by topo``) so that the next run may replace them."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from ..atomic import SIGNATURE, open_output

__all__ = ["write_bytes", "sign_image"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_bytes(path: str | Path, data: bytes, **output) -> int:
    """Write ``data`` to ``path`` (``"-"``: standard output) with :func:`topo.atomic.open_output` and its keywords
    (``inputs``, ``force``, ...); returns the number of bytes."""
    with open_output(path, "wb", **output) as fh:
        fh.write(data)
    return len(data)


def sign_image(data: bytes, fmt: str) -> bytes:
    """``data`` (a PNG or an SVG) with the :data:`~topo.atomic.SIGNATURE` near its start: a ``tEXt`` chunk
    ``Software`` right after the PNG header chunk, an XML comment before the SVG root element."""
    if fmt == "png" and data.startswith(_PNG_MAGIC):
        ihdr_end = 8 + 8 + struct.unpack(">I", data[8:12])[0] + 4
        body = b"tEXt" + b"Software\x00" + SIGNATURE.encode()
        chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        return data[:ihdr_end] + chunk + data[ihdr_end:]
    if fmt == "svg":
        return f"<!-- {SIGNATURE} -->\n".encode() + data
    return data
