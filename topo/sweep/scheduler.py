"""Where a study runs when it is not this machine: a Dask scheduler's address (``tcp://``, ``tls://``, ``ucx://``)
or its scheduler file (``dask scheduler --scheduler-file``, Dask's convention for batch systems), checked before
Dask is asked, so that a typo, an unreachable host or a missing TLS or UCX set-up is one line within the connect
timeout, never a traceback; and a cluster without workers, waited for a bounded time.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import socket
import sys
import time
from pathlib import Path
from typing import Callable

from ..errors import TopoError
from ..inputs import read_input_text

__all__ = ["scheduler_from_file", "check_address", "connect", "wait_for_workers", "SCHEMES"]

SCHEMES = ("tcp", "tls", "ucx")
_TLS_KEYS = ("ca-file", "client.cert")  # distributed.comm.tls.* that a tls:// client needs


def scheduler_from_file(path: str | Path) -> str:
    """The address in a Dask scheduler file (the JSON ``dask scheduler --scheduler-file FILE`` writes).

    Raises
    ------
    TopoError
        Keyed ``scheduler_file``: the file is missing, not a regular file (a directory, a pipe, a device), not
        JSON, or has no ``address``.
    """
    try:  # a regular file only, never a blocking read of a pipe or a device (/dev/zero would never end)
        data = json.loads(read_input_text(path, "Dask scheduler file (as dask scheduler --scheduler-file writes it)"))
    except TopoError as exc:
        raise TopoError(exc.message, source=str(path), key="scheduler_file") from None
    except ValueError:
        raise TopoError("is not a Dask scheduler file (JSON with an \"address\", as dask scheduler "
                        "--scheduler-file writes it)", source=str(path), key="scheduler_file") from None
    address = data.get("address") if isinstance(data, dict) else None
    if not isinstance(address, str) or not address:
        raise TopoError(f"has no \"address\" (keys: {', '.join(data) if isinstance(data, dict) else '-'}); "
                        "is it a Dask scheduler file?", source=str(path), key="scheduler_file")
    return address


def check_address(address: str, timeout_s: float) -> None:
    """Refuse, in one line keyed ``scheduler``, an address Dask could not use: a malformed one, a scheme other
    than :data:`SCHEMES`, ``tls://`` without Dask's TLS settings, ``ucx://`` without UCX for Dask installed, or a
    host and port where nothing listens within ``timeout_s``."""
    scheme, sep, rest = address.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or scheme not in SCHEMES or not colon or not host or not port.isdecimal() or not 0 < int(port) < 65536:
        raise TopoError(f"{address!r} is not a Dask scheduler address; give SCHEME://HOST:PORT with SCHEME one of "
                        f"{', '.join(SCHEMES)} (e.g. tcp://10.0.0.5:8786), 'serial', or --scheduler-file",
                        key="scheduler")
    if scheme == "tls":
        import dask

        missing = [k for k in _TLS_KEYS if not dask.config.get(f"distributed.comm.tls.{k}", None)]
        if missing:
            raise TopoError(f"{address} needs Dask's TLS settings (distributed.comm.tls.{missing[0]} is not set; "
                            "see Dask's 'TLS/SSL' configuration)", key="scheduler")
    if scheme == "ucx":
        if not any(importlib.util.find_spec(m) for m in ("distributed_ucxx", "ucp")):
            raise TopoError(f"{address} needs UCX for Dask (the distributed-ucxx package), which is not installed",
                            key="scheduler")
        return  # UCX is not a TCP socket to probe
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise TopoError(f"no Dask scheduler answers at {address} within {timeout_s:g} s ({why}); start one "
                        "(dask scheduler) or leave --scheduler out for a local cluster", key="scheduler") from None


def connect(address: str, timeout_s: float):
    """A :class:`distributed.Client` of the scheduler at ``address`` (checked first, :func:`check_address`).

    Raises
    ------
    TopoError
        Keyed ``scheduler``, one line: the address cannot be used, or the scheduler does not answer.
    """
    from distributed import Client

    check_address(address, timeout_s)
    try:
        return Client(address, timeout=f"{timeout_s}s", set_as_default=False)
    except Exception as exc:  # whatever Dask raises on a failed handshake, as one line
        _collect_quietly()  # the half-built client's own close would time out again and print a traceback
        raise TopoError(f"cannot connect to the Dask scheduler at {address} within {timeout_s:g} s "
                        f"({type(exc).__name__}: {exc})", key="scheduler") from None


def _collect_quietly() -> None:
    hook = sys.unraisablehook
    sys.unraisablehook = lambda _: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook


def wait_for_workers(client, address: str, timeout_s: float, notify: Callable[[str], None] | None = None) -> int:
    """The number of workers of ``client``'s cluster, waiting up to ``timeout_s`` for a first one (saying so
    through ``notify``).

    Raises
    ------
    TopoError
        Keyed ``scheduler``: no worker joined within ``timeout_s``.
    """
    def count() -> int:
        return len(client.scheduler_info(n_workers=-1).get("workers", {}))

    n = count()
    if n:
        return n
    if notify:
        notify(f"waiting for workers at {address} (up to {timeout_s:g} s; start some with: dask worker {address})")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        n = count()
        if n:
            return n
    raise TopoError(f"no worker joined the Dask cluster at {address} within {timeout_s:g} s; start workers "
                    f"(dask worker {address}) or leave --scheduler out for a local cluster", key="scheduler")
