"""What a spec's NIC rate means for the model when it is faster than its network or its host link allows.

Two facts, each said where a cluster is modelled (``topo describe``, ``topo estimate``, and the cluster ``topo
compare`` and ``topo calibrate`` build from a log and the rates given with it, walk36: a NIC rate of 400 GB/s, a
3.2 Tb/s NIC, was taken without a word there while describe noted it):

- the NICs run faster than the fabric technology's fastest port (``max_port_rate_Gbps`` of its network profile
  file, topo/data/profiles/network/), so the costs are that technology's constants;
- the GPU-to-NIC host link (PCIe, ``server.pcie_bandwidth`` or topo/data/hardware/host_links.toml) is slower than
  the NIC, so it caps what each NIC carries.
"""

from __future__ import annotations

from ..fabric.host_link_note import SPEC_REMEDY, host_link_cap
from ..units import in_unit
from .profile_data import bundled_files

__all__ = ["technology_mismatch", "nic_notes"]


def technology_mismatch(spec) -> str | None:
    """The NICs are faster than the spec's network technology's fastest port (800 Gb/s NICs on
    ``infiniband_ndr``, 400 Gb/s); None when they are not, or the technology gives no fastest port.

    Parameters
    ----------
    spec : topo.spec.Spec
        The cluster.

    Returns
    -------
    str or None
        One sentence (no ``note:``), naming a technology whose ports run that fast when one does.
    """
    tech = spec.fabric.technology
    files = bundled_files()["network"]
    pf = files.get(tech)
    p = pf.params.get("max_port_rate_Gbps") if pf else None
    nic_Gbps = in_unit(spec.server.nic_rate_Bps, "Gb/s")
    if p is None or nic_Gbps <= p.value * (1 + 1e-9):
        return None
    faster = sorted((q.params["max_port_rate_Gbps"].value, n) for n, q in files.items()
                    if "max_port_rate_Gbps" in q.params and q.params["max_port_rate_Gbps"].value >= nic_Gbps)
    hint = f"; {faster[0][1]} runs {faster[0][0]:g} Gb/s ports (fabric.technology)" if faster else ""
    return f"the NICs run {nic_Gbps:g} Gb/s but {tech} ports run at most {p.value:g} Gb/s: the network's " \
           f"constants are {tech}'s{hint}"


def nic_notes(spec, host_link_remedy: str = SPEC_REMEDY) -> list[str]:
    """:func:`technology_mismatch` and :func:`topo.fabric.host_link_note.host_link_cap`, those that apply, in that
    order.

    Parameters
    ----------
    spec : topo.spec.Spec
        The cluster.
    host_link_remedy : str
        The host-link sentence's remedy (:func:`~topo.fabric.host_link_note.host_link_cap`'s ``remedy``).

    Returns
    -------
    list of str
        Sentences without ``note:`` (none for a NIC its network and host link carry at its rate).
    """
    return [n for n in (technology_mismatch(spec), host_link_cap(spec, host_link_remedy)) if n]
