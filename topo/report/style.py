"""One look for every figure: a colour per tier (the same in every figure), size ticks, escaping of spec text.

A link level takes the colour of the tier it leads up to (``nic-leaf`` is drawn in the leaf's colour,
``leaf-spine`` in the spine's), so a tier and the cables into it read as one thing everywhere.
Colours are Okabe and Ito's palette, distinguishable with the common colour-vision deficiencies.
"""

from __future__ import annotations

import html

__all__ = ["GPU_COLOR", "PCIE_COLOR", "ALERT_COLOR", "HOT_UTILIZATION", "HOT_SLOWDOWN", "tier_color", "level_color", "esc", "SIZE_TICKS",
           "size_ticks", "FONT", "base_layout"]

GPU_COLOR = "#009E73"  # GPUs, NVLink domains, NVLink
PCIE_COLOR = "#7F7F7F"  # PCIe between GPU and NIC
ALERT_COLOR = "#B2182B"  # oversubscription > 1, saturated links
HOT_UTILIZATION = 0.8  # a link this utilized or more is shown in ALERT_COLOR in the report's tables
HOT_SLOWDOWN = 1.2  # a traffic-mix member slowed this much or more is shown in ALERT_COLOR
_TIER_COLORS = ("#0072B2", "#E69F00", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442")

FONT = "Helvetica Neue, Arial, sans-serif"


def tier_color(index: int) -> str:
    """Colour of scale-out tier ``index`` (0 = leaf, 1 = spine, 2 = core, ...)."""
    return _TIER_COLORS[index % len(_TIER_COLORS)]


def level_color(level_index: int) -> str:
    """Colour of link level ``level_index`` in :attr:`topo.Fabric.level_names` order
    (0 nvlink, 1 pcie, 2 NIC to tier 0, 3 tier 0 to tier 1, ...)."""
    if level_index == 0:
        return GPU_COLOR
    if level_index == 1:
        return PCIE_COLOR
    return tier_color(level_index - 2)


def esc(text) -> str:
    """A spec-provided string made safe for plotly text: ``<script>`` is shown, never run or parsed as markup.

    Plotly renders a few tags (``<b>``, ``<br>``, ``<a>``) in titles, labels and hover text and decodes ``&lt;``,
    ``&gt;`` and ``&amp;`` but not ``&quot;``, so ``<``, ``>`` and ``&`` are escaped and quotes are left as they
    are (without a ``<`` they cannot open a tag).

    >>> esc('<script>alert("x")</script>')
    '&lt;script&gt;alert("x")&lt;/script&gt;'
    """
    return html.escape(str(text), quote=False)


def size_ticks(min_bytes: float, max_bytes: float) -> tuple[list[int], list[str]]:
    """Tick positions and labels for a log axis of message sizes: the two ends and every factor of 32 from
    1 KiB (1 KiB, 32 KiB, 1 MiB, ...), labelled in binary units as nccl-tests users read them (``8 B``,
    ``32 KiB``, ``16 GiB``); few enough to stay apart on a narrow figure.

    >>> size_ticks(8, 16 * 2**30)[1]
    ['8 B', '1 KiB', '32 KiB', '1 MiB', '32 MiB', '1 GiB', '16 GiB']
    """
    lo, hi = int(min_bytes), int(max_bytes)
    vals = [lo]
    for p in range(0, 64, 5):
        v = 2**p
        # keep a factor of 8 between ticks so their labels never touch
        if v >= lo * 8 and v * 8 <= hi:
            vals.append(v)
    if hi != lo:
        vals.append(hi)
    return vals, [_size_label(v) for v in vals]


def _size_label(v: int) -> str:
    for unit, mult in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= mult:
            return f"{v / mult:g} {unit}"
    return f"{v:g} B"


SIZE_TICKS = size_ticks(8, 16 * 2**30)


def base_layout(title: str, height: int = 460) -> dict:
    """Layout shared by every figure: white background, left-aligned title, room for the legend."""
    return dict(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=16)),
        template="plotly_white",
        font=dict(family=FONT, size=12),
        height=height,
        margin=dict(l=70, r=30, t=70, b=60),
        hoverlabel=dict(font=dict(family=FONT, size=12), align="left"),
    )
