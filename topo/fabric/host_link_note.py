"""The GPU-to-NIC host link slower than the NIC: one sentence, said by ``topo describe`` (the inventory's notes) and
by the clusters ``topo compare`` and ``topo calibrate`` model (topo.engine.nic_notes)."""

from __future__ import annotations

from ..units import format_bandwidth, format_rate

__all__ = ["host_link_cap", "SPEC_REMEDY"]

SPEC_REMEDY = ("give server.nic_model (e.g. ConnectX-8 for 800 Gb/s, PCIe Gen6) or server.pcie_bandwidth if the "
               "servers differ")  # what the user of a spec can change (describe, estimate, a spec file)


def host_link_cap(spec, remedy: str = SPEC_REMEDY) -> str | None:
    """The host link is slower than one NIC, so it caps each NIC; None when it is not.

    Parameters
    ----------
    spec : topo.spec.Spec
        The cluster.
    remedy : str
        What the reader can do about it, the sentence's end: by default the spec keys that change it
        (:data:`SPEC_REMEDY`); a caller whose user gives no spec words its own (a cluster built from a log,
        tidy84).

    Returns
    -------
    str or None
        One sentence (no ``note:``): the link, its bandwidth, and ``remedy``.

    Examples
    --------
    >>> from topo.spec import load_spec
    >>> host_link_cap(load_spec("dgx-h100-superpod")) is None   # ConnectX-7's 50 GB/s under PCIe gen5's 64
    True
    """
    host_Bps, nic_Bps = spec.server.pcie_bandwidth_Bps, spec.server.nic_rate_Bps
    if host_Bps >= nic_Bps * (1 - 1e-9):
        return None
    host = spec.host_link.describe() if spec.host_link else "server.pcie_bandwidth"
    return (f"the host link ({host}, {format_bandwidth(host_Bps)} per direction) caps each {format_rate(nic_Bps)} "
            f"NIC at {format_bandwidth(host_Bps)}; {remedy}")
