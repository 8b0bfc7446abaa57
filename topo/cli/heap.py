"""The command line's process keeps the memory of freed large arrays for its next ones (glibc's ``mallopt``).

glibc serves an allocation of more than ``M_MMAP_THRESHOLD`` bytes (128 KiB at start, raised to the size of each
such block freed, up to 32 MiB) with a fresh ``mmap``, and returns the top of its heap to the system whenever more
than ``M_TRIM_THRESHOLD`` bytes (twice the first) lie free there (mallopt(3),
https://man7.org/linux/man-pages/man3/mallopt.3.html). The engine routes a collective in chunks of 32,768 flows,
each a few MiB of temporaries, and sums loads into arrays of every resource (837,872 at 100k GPUs, 6.4 MiB): each
comes back as new pages that the kernel must fault in again. ``topo train region-1m --model llama3-405b --tp 8
--pp 16`` made 100,000 minor page faults and spent 0.16-0.20 s of system time on them; with the thresholds below
49,000 and 0.10 s, its peak memory unchanged (calibration-findings section 169). Section 67 measured the same on
the 100k layout search with the ``MALLOC_*_`` environment variables (system time 2.9 -> 1.1 s).

Only the command line sets them (:func:`topo.cli.main.main` run as ``topo``): the library leaves the allocator of
a program that imports it alone. A user's own ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` wins.
Elsewhere than on glibc (no ``mallopt``) nothing changes.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["keep_freed_memory", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES"]

# mallopt(3) parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's own ceiling for its dynamic threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TRIM_THRESHOLD_BYTES = 64 << 20  # twice it, as glibc's dynamic rule sets it
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds of this process to :data:`MMAP_THRESHOLD_BYTES` and
    :data:`TRIM_THRESHOLD_BYTES` (see the module doc).

    Returns
    -------
    bool
        Whether both were set: False without glibc's ``mallopt`` or when the environment sets one of glibc's
        ``MALLOC_*_`` tunables (the user's choice is kept).
    """
    if any(k in os.environ for k in _USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (macOS, musl, Windows: no mallopt or no CDLL(None))
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
