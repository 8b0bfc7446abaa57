"""Specs of several sites joined by a data-centre interconnect (DCI): what a region file may say.

A region file has ``[[sites]]`` (each a fabric: a bundled spec or a file by name with ``set`` overrides, or an inline
``[sites.fabric]`` table written as a whole spec) and one ``[interconnect]``::

    name = "two-site-h100"
    [[sites]]
    name = "east"
    spec = "dgx-h100-superpod"
    set = ["cluster.num_units=24"]
    power_limit_MW = 30
    [interconnect]
    topology = "mesh"          # mesh, ring, hub, line or spans
    distance_km = 1000         # every pair; [[interconnect.spans]] give pairs their own
    waves = 64                 # per site pair ...
    wave_rate = "800 Gb/s"     # ... at this rate each, per direction

The one-way latency of a span is ``distance_km x latency_per_km + equipment_latency``. The default 4.9 us/km is
light in G.652 fibre at 1550 nm (4.897 us/km, /work/shared/data/multisite.md section 4, secondary). What needs the
built sites (an attach tier that does not exist, GPUs that differ) is checked by :func:`topo.fabric.region.build_region`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PrivateAttr, StrictBool, field_validator, model_validator

from .model import Duration, Name, PositiveInt, _Strict, _bandwidth
from .overrides import override_label

__all__ = ["RegionSpec", "SiteSpec", "InterconnectSpec", "SpanSpec", "DCI_TOPOLOGIES", "is_region_data"]

DCI_TOPOLOGIES = ("mesh", "ring", "hub", "line", "spans")
FIBRE_LATENCY_PER_KM_S = 4.9e-6
"""4.897 us/km at 1550 nm in G.652 fibre (204,190 km/s), rounded: multisite.md section 4 (mapyourtech.com, secondary)."""


def is_region_data(data: dict) -> bool:
    """True when a parsed TOML document is a region (it has ``[[sites]]`` or an ``[interconnect]``, which only a
    region has: a file with its DCI but no sites is a region missing its sites), not one fabric."""
    return isinstance(data, dict) and ("sites" in data or "interconnect" in data)


MAX_DISTANCE_KM = 40_075.0
"""The longest span a region may give: the Earth's circumference at the equator. Two sites on Earth are joined by
a shorter route; a larger figure is a typo (or metres for km), and it would price a DCI of absurd latency."""

MAX_WAVE_RATE_BPS = 121.6e12 / 8
"""The fastest wave a region may give, per direction: a whole fibre pair's capacity in full C+L-band DWDM, 76 + 76
wavelengths x 800G = 121.6 Tb/s (multisite.md section 4, SemiAnalysis multi-DC, secondary); one wave carries less
than its whole fibre."""

MAX_WAVES = 152 * 10_000
"""The most waves a span may give: 152 per fibre pair (76 C- + 76 L-band, as above) in 10,000 fibre pairs, beyond
the "hundreds if not thousands of pairs" of a metro trench (multisite.md section 4, SemiAnalysis, secondary)."""


def _positive_rate(value):
    rate = _bandwidth(value)
    if rate <= 0:
        raise ValueError(f"a DCI of zero capacity joins nothing, got {value!r}; allowed: a rate > 0 such as "
                         "'400 Gb/s' or '800 Gb/s'")
    if rate > MAX_WAVE_RATE_BPS:
        raise ValueError(f"a wave of {value!r} is more than a whole fibre pair carries in all its waves (121.6 Tb/s: "
                         "76 C- + 76 L-band x 800G); allowed: a rate > 0 up to '121.6 Tb/s', such as '800 Gb/s' "
                         "(more capacity is more waves)")
    return rate


def _plausible_distance(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_DISTANCE_KM:
        raise ValueError(f"{value:g} km is longer than the Earth's circumference ({MAX_DISTANCE_KM:,.0f} km); "
                         f"allowed: > 0 up to {MAX_DISTANCE_KM:,.0f} km of fibre route (in km, not metres)")
    return value


def _plausible_waves(value):
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_WAVES:
        raise ValueError(f"{value:,} waves is no cable: a fibre pair carries at most 152 (76 C- + 76 L-band), and "
                         f"{MAX_WAVES:,} fill 10,000 pairs; allowed: 1 to {MAX_WAVES:,}")
    return value


PositiveRate = Annotated[float, BeforeValidator(_positive_rate)]
Distance = Annotated[float, Field(gt=0, allow_inf_nan=False), AfterValidator(_plausible_distance)]
Waves = Annotated[int, Field(strict=True, ge=1), AfterValidator(_plausible_waves)]


class SiteSpec(_Strict):
    """One site: a fabric of its own, with its own power limit."""

    name: Annotated[Name, Field(min_length=1, max_length=64)]
    """The site's name, used in messages and in ``--fail dci:NAME-NAME``."""
    spec: Annotated[str, Field(min_length=1)] | None = None
    """A bundled spec's name or a spec file (relative to the region file) for this site's fabric."""
    set: list[str] = []
    """``KEY=VALUE`` overrides of ``spec``, as ``--set`` takes them (e.g. ``["cluster.num_units=24"]``)."""
    fabric: dict | None = None
    """The site's fabric written inline as a whole spec (``name``, ``gpu``, ``cluster``, ``fabric``...) instead of
    ``spec``."""
    count: PositiveInt = 1
    """Alike sites this entry stands for (named NAME-0, NAME-1, ...); they share one built fabric."""
    power_limit_MW: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    """The site's grid connection in MW (facility power, for ``topo plan``)."""
    profile: Annotated[str, Field(min_length=1)] | None = None
    """The cost profile of this site's in-site collectives (a bundled name such as ``hopper+roce``, a file ``topo
    calibrate`` wrote, ``nccl``), of the site's own network; none: the site fabric's own. Never the DCI's; a
    command's ``--profile`` replaces every site's (reg70)."""

    @model_validator(mode="after")
    def _one_fabric(self):
        if (self.spec is None) == (self.fabric is None):
            raise ValueError(f"site {self.name!r}: give exactly one of spec (a bundled name or a file) or an inline "
                             f"[sites.fabric] table, got {'both' if self.spec else 'neither'}")
        if self.fabric is not None and self.set:
            raise ValueError(f"site {self.name!r}: set overrides a spec named by spec; edit the inline fabric instead")
        return self


class SpanSpec(_Strict):
    """One site pair's span, where it differs from the interconnect's defaults."""

    sites: Annotated[list[Name], Field(min_length=2, max_length=2)]
    """The two sites, by name."""
    distance_km: Distance | None = None
    """Fibre route length in km (> 0, at most the Earth's 40,075 km); default: the interconnect's."""
    waves: Waves | None = None
    """Waves (or ports) on this span (at most 1,520,000); default: the interconnect's."""
    wave_rate_Bps: PositiveRate | None = Field(None, alias="wave_rate")
    """Rate of one wave per direction (at most 121.6 Tb/s); default: the interconnect's."""


class InterconnectSpec(_Strict):
    """The data-centre interconnect: one more level above each site's attach tier."""

    topology: Literal["mesh", "ring", "hub", "line", "spans"] = "mesh"
    """mesh: a span between every pair of sites; ring: between neighbours in the order given (and last to first);
    hub: between the hub site and each other; line: between neighbours in the order given, a chain with no span from
    last to first (traffic between its ends transits every site between); spans: exactly the pairs
    ``[[interconnect.spans]]`` lists, which must join every site."""
    hub: Name | None = None
    """The hub site's name (topology hub; default the first site). Refused under another topology."""
    distance_km: Distance | None = None
    """Fibre route length of every span in km (> 0, at most the Earth's 40,075 km), unless a span gives its own."""
    latency_per_km_s: Duration = Field(FIBRE_LATENCY_PER_KM_S, alias="latency_per_km")
    """One-way latency per km of fibre (default "4.9 us": 4.897 us/km at 1550 nm, mapyourtech.com, secondary)."""
    equipment_latency_s: Duration = Field(0.0, alias="equipment_latency")
    """One-way latency of the span's equipment (coherent DSP and FEC, amplifiers, DCI switches), added once."""
    waves: Waves = 1
    """Waves (DWDM channels) or ports per site pair (1 to 1,520,000: 152 per fibre pair x 10,000 pairs)."""
    wave_rate_Bps: PositiveRate = Field(100e9, alias="wave_rate")
    """Rate of one wave per direction (default "800 Gb/s", 800ZR; at most 121.6 Tb/s, a whole fibre pair's)."""
    attach: Literal["top", "border"] = "top"
    """top: the DCI's coherent pluggables (one a wave) sit in the attach tier's cages, where it can host them (an
    Ethernet tier whose cages carry the wave's rate and power the module; else ``topo plan`` adds DCI switches);
    border: on border leaves hanging off that tier (the leaf model where it can host them, else the DCI switch),
    with their own oversubscription."""
    attach_tier: Name | None = None
    """The tier the DCI (or its border leaves) attaches to, by name; default each site's top tier."""
    border_oversubscription: Annotated[float, Field(ge=1.0, allow_inf_nan=False)] = 1.0
    """Border leaves: DCI capacity : capacity towards the attach tier (>= 1). Refused above 1 without
    ``attach = "border"``."""
    spans: list[SpanSpec] = []
    """Pairs whose distance, waves or rate differ (``[[interconnect.spans]]``); with topology ``spans``, every span
    of the DCI."""


def _check_applies(ic: InterconnectSpec) -> None:
    """A key that only one topology or attachment reads, given under another, is refused (small50): ``hub`` was
    ignored under every topology but ``hub`` (a ``line`` region with ``hub = "a"`` described as the line), and
    ``border_oversubscription`` divided the DCI's capacity under ``attach = "top"`` too, where no border leaf is
    (:meth:`topo.fabric.region.Region.border_Bps`): either way a model other than the one the file asks for."""
    if ic.hub is not None and ic.topology != "hub":
        raise ValueError(f"interconnect.hub: {ic.hub!r} is read with topology \"hub\" only, got topology "
                         f"\"{ic.topology}\"; allowed: no hub, or topology = \"hub\"")
    if ic.border_oversubscription != 1.0 and ic.attach != "border":
        raise ValueError(f"interconnect.border_oversubscription: {ic.border_oversubscription:g} is read with attach "
                         f"\"border\" only (border leaves), got attach \"{ic.attach}\"; allowed: 1 (or none), or "
                         f"attach = \"border\"")


def _check_connected(names: list[str], pairs: list[tuple[int, int]], topology: str) -> None:
    """Every site must reach every other over the spans: a job across sites that share no route cannot run."""
    seen, todo = {0}, [0]
    while todo:
        k = todo.pop()
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                if x == k and y not in seen:
                    seen.add(y)
                    todo.append(y)
    if len(seen) < len(names):
        cut = [names[k] for k in range(len(names)) if k not in seen]
        raise ValueError(f"interconnect.spans: no DCI route joins site{'s' if len(cut) > 1 else ''} "
                         f"{', '.join(cut)} to {names[0]} (topology {topology}); allowed: spans that join every "
                         f"site (a chain, a ring or a tree of them)")


class RegionPlanSpec(_Strict):
    """What ``topo plan`` of a region reads besides the sites' own files (``[plan]``)."""

    dci: dict[str, dict[str, float]] = {}
    """Quotes over the DCI's figures (``topo/data/dci/interconnect.toml``), by section and key:
    ``[plan.dci.module] price_usd = 8000`` or ``--set plan.dci.module.price_usd=8000``; checked by
    :func:`topo.plan.dci.load_dci_catalog`."""


class RegionNcclSpec(_Strict):
    """NCCL's settings for communicators that span the sites (``[nccl]``), as its environment sets them."""

    scatter_xdc: StrictBool = True
    """``NCCL_SCATTER_XDC`` (NVIDIA/nccl branch ``cross-dc`` commit 18a07ee, src/graph/connect.cc lines 89-105,
    default 1): true, each channel of a flat ring or tree crosses between the sites from another node
    (``channelToNode`` scatters the channel index), so ``c`` channels cross through ``c`` NICs; false, every channel
    crosses from the same node (a ring leaves from one node and enters the next site at its neighbour; a tree's
    primal roots sit on one node and its dual roots on the next), so the crossing has one node's NICs (a ring) or
    two nodes' (a tree)."""
    dp_reduction: Literal["auto", "hierarchical", "flat_ring"] = "auto"
    """How a training job's gradient reduction crosses the sites (``topo train REGION``'s ``dp`` way): hierarchical
    (one distributed-optimizer instance a site, NeMo's multi-DC run: each GPU's gradient shard all-reduced across,
    ``2(K-1)/K V`` a span, the parameters gathered inside the site), flat_ring (one NCCL communicator a data-parallel
    group over every replica, its ring crossing each site boundary once a channel, cross-dc branch ``connectRings``:
    the one-site step's data-parallel collectives, ``(D-1)/D`` of the gradients' reduce-scatter and the parameters'
    all-gather with the distributed optimizer, ``2(D-1)/D V`` without sharding, a span over ``2(D-1)`` steps;
    :mod:`topo.training.dp_across`), or auto: the faster of the two."""


class RegionSpec(_Strict):
    """Several sites joined by a data-centre interconnect."""

    name: Annotated[Name, Field(min_length=1)]
    """The region's name."""
    description: str = ""
    """One line on what the region is."""
    source: str | list[str] = ""
    """Where the design comes from (URLs)."""
    assumptions: list[str] = []
    """What the file assumes where nothing is published."""
    sites: list[SiteSpec]  # at least 2 sites, counted with `count` (_joinable says so in its own words)
    """The sites (``[[sites]]``), in order; global GPU ids run site by site."""
    interconnect: InterconnectSpec
    """The DCI (``[interconnect]``)."""
    plan: RegionPlanSpec = RegionPlanSpec()
    """Planning inputs of the region itself (``[plan.dci]``: DCI prices and figures)."""
    nccl: RegionNcclSpec = RegionNcclSpec()
    """NCCL's settings across the sites (``[nccl]``: ``scatter_xdc``, ``dp_reduction``)."""

    _origin: str = PrivateAttr("")
    _path: str = PrivateAttr("")
    _set_paths: dict = PrivateAttr(default_factory=dict)

    def source_of(self, key: str) -> str:
        """Where ``key``'s value came from, as errors name it: the region file, with ``(--set KEY=VALUE)`` when an
        override set it (or a table holding it)."""
        origin = next((o for path, o in self._set_paths.items() if key == path or key.startswith(path + ".")
                       or key.startswith(path + "[")), None)
        return f"{self._origin} ({override_label(origin)})" if origin else self._origin

    @field_validator("sites")
    @classmethod
    def _at_least_two(cls, sites: list[SiteSpec]) -> list[SiteSpec]:
        """Keyed ``sites`` (with its ``--set``), the value as given: an empty list or the one site's name."""
        n = sum(s.count for s in sites)
        if n < 2:
            got = "an empty list ([])" if not sites else f"one site ({sites[0].name!r})"
            raise ValueError(f"a region joins at least 2 sites, got {got}; allowed: two or more [[sites]] entries "
                             "(or one with count >= 2)")
        return sites

    @model_validator(mode="after")
    def _joinable(self):
        names = self.site_names
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"site names must be unique, got {', '.join(map(repr, dup))} twice")
        ic = self.interconnect
        if ic.hub is not None and ic.hub not in names:
            raise ValueError(f"interconnect.hub names no site: {ic.hub!r}; sites: {', '.join(names)}")
        _check_applies(ic)
        listed: dict[frozenset, int] = {}
        for i, s in enumerate(ic.spans):
            bad = [n for n in s.sites if n not in names]
            if bad or s.sites[0] == s.sites[1]:
                what = f"no site {bad[0]!r}" if bad else f"the same site twice ({s.sites[0]!r})"
                raise ValueError(f"interconnect.spans[{i}].sites: {what}; allowed: two different of "
                                 f"{', '.join(names)}")
            first = listed.setdefault(frozenset(s.sites), i)
            if first != i:  # one span a pair: a second entry would silently replace the first's figures
                raise ValueError(f"interconnect.spans[{i}].sites: {s.sites[0]}-{s.sites[1]} is listed already "
                                 f"(spans[{first}]); allowed: one entry per site pair")
            if s.distance_km is None and ic.distance_km is None:
                raise ValueError(f"interconnect.spans[{i}]: no distance_km, and the interconnect gives none")
        if ic.distance_km is None:
            given = {frozenset(s.sites) for s in ic.spans}
            missing = [p for p in self.pairs() if frozenset(names[k] for k in p) not in given]
            if missing:
                a, b = missing[0]
                raise ValueError(f"interconnect.distance_km: required (> 0, in km) unless every span gives its own; "
                                 f"none for {names[a]}-{names[b]}")
        _check_connected(names, self.pairs(), ic.topology)
        return self

    @property
    def site_names(self) -> list[str]:
        """Every site's name, alike sites (``count``) expanded as NAME-0, NAME-1, ..."""
        out = []
        for s in self.sites:
            out += [s.name] if s.count == 1 else [f"{s.name}-{k}" for k in range(s.count)]
        return out

    def pairs(self) -> list[tuple[int, int]]:
        """The site pairs (lower index first) that have a span, by the topology."""
        names = self.site_names
        n = len(names)
        topo = self.interconnect.topology
        if topo == "mesh":
            return [(a, b) for a in range(n) for b in range(a + 1, n)]
        if topo == "ring":
            return sorted({tuple(sorted((k, (k + 1) % n))) for k in range(n)})
        if topo == "line":
            return [(k, k + 1) for k in range(n - 1)]
        if topo == "spans":
            return sorted({tuple(sorted((names.index(s.sites[0]), names.index(s.sites[1]))))
                           for s in self.interconnect.spans})
        hub = self.site_names.index(self.interconnect.hub) if self.interconnect.hub else 0
        return [tuple(sorted((hub, k))) for k in range(n) if k != hub]

    @property
    def input_path(self) -> str:
        return self._path
