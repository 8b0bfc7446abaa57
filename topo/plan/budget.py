"""Sizing a design to an IT power budget: the largest whole count of its growth unit whose IT power at nameplate
(:class:`~topo.plan.power.PowerBreakdown`'s ``it_power_W``: servers, switches, optics, storage, front-end) fits.

The growth unit is the pod where the fabric has more than one (past one pod the builder takes whole pods only),
else the fabric's scalable unit (a leaf's servers, a rack of an NVL72 superpod); a one-pod design that fills its pod
grows on by whole pods. IT power grows with the count; the search starts at the count the spec's own IT power per
unit scales to, ``floor(limit / (IT power / count))``, doubles while that fits, then bisects between the largest
count that fits and the smallest that does not, so the answer does not rest on power being linear (storage and the
floor's network racks are not). A count the builder refuses (a tier's radix) does not fit, and the note says so;
a refused count is not one that draws too much, and what builds is not monotone in the count (a GB200 superpod of
83 pods has no whole islands, 84 has: walk34), so past the bisection's answer, where the next count is refused, the
counts above it are tried in turn, the refused passed over, up to the first that builds and draws past the budget.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Callable

from ..errors import TopoError
from ..fabric.builders import build_fabric
from ..spec import Spec
from ..spec.model import ClusterSpec
from ..units import format_count, format_in

__all__ = ["PowerFit", "growth_unit", "fit_it_power"]


@dataclass(frozen=True)
class PowerFit:
    """A design sized to an IT power budget."""

    it_power_limit_W: float
    unit: str  # what the count counts: "pod", or the fabric's unit ("scalable unit", "rack")
    units_per_step: int  # the fabric's units in one of them (1 but for pods)
    count: int  # the largest that fits
    gpus: int  # at that count
    it_power_W: float  # at that count (the final plan's: its job may size storage otherwise)
    next_it_power_W: float | None  # at one more (None: the fabric cannot grow to it)
    spec_count: int  # the spec's own count, before sizing
    fabric_bound: str | None = None  # the builder's refusal of one more unit, when the fabric (not power) binds
    no_step_units: tuple[int, ...] = ()  # with a job: the unit counts its layout does not fit, sized without its step
    no_step_mfu: str = ""  # the MFU those counts were sized with and its key ("0.35, plan.workload.mfu")
    fabric_unit: str = "scalable unit"  # what a pod is made of: the fabric's unit (a GB200 superpod's "rack")
    next_count: int | None = None  # the count next_it_power_W is of, where refused counts were passed over
    passed_over: tuple[int, ...] = ()  # counts between the answer and next_count that the builder refuses
    spec_count_unit: str = ""  # what spec_count counts where it is not ``unit`` (a spec of units sized in pods)

    @property
    def headroom_W(self) -> float:
        """The budget left at the fitted count."""
        return self.it_power_limit_W - self.it_power_W

    def note(self) -> str:
        """What sized the design and what bounds it: the budget (one more would draw past it) or the fabric (the
        builder refuses one more: its words)."""
        of = f" of {self.units_per_step} {self.fabric_unit}s" if self.units_per_step > 1 else ""
        head = (f"sized to {format_in(self.it_power_limit_W, 'MW', ',.2f')} of IT power (--it-power): "
                f"{format_count(self.count)} {self.unit}s{of} ({format_count(self.gpus)} GPUs) draw "
                f"{format_in(self.it_power_W, 'MW', ',.2f')} at nameplate (the spec gives {self._spec_words()}), " + (
                    f"{format_in(self.headroom_W, 'MW', ',.2f')} left; " if self.headroom_W >= 0 else
                    f"{format_in(-self.headroom_W, 'MW', ',.2f')} over: this plan's workload sizes the storage past "
                    "what the sizing's plan of this count did, a count one fewer fits; "))
        if self.fabric_bound is not None:
            return head + (f"the fabric binds, not the budget: {format_count(self.count + 1)} cannot be built "
                           f"({self.fabric_bound})")
        no_step = ""  # plan70 Left d: the next count's IT power without the job's step, said
        if (self.count + 1) * self.units_per_step in self.no_step_units:
            no_step = (f" (at MFU {self.no_step_mfu}: the job's layout does not fit {format_count(self.count + 1)} "
                       f"{self.unit}s, so that count has no step of the job to size with)")
        nxt = self.next_count or self.count + 1
        passed = "" if not self.passed_over else (
            f" ({', '.join(format_count(n) for n in self.passed_over)} cannot be built: the fabric builder refuses "
            f"{'it' if len(self.passed_over) == 1 else 'them'})")
        return head + (f"the budget binds: {format_count(nxt)} would draw "
                       f"{format_in(self.next_it_power_W, 'MW', ',.2f')}{no_step}{passed}")

    def _spec_words(self) -> str:
        """The spec's own count in the answer's unit: "4" where it counts the same unit, else "4 scalable units,
        1 pod" (walk34 Left 7: "49 pods ... (the spec gives 4)" counted scalable units against pods)."""
        if self.spec_count_unit in ("", self.unit):
            return format_count(self.spec_count)
        words = f"{format_count(self.spec_count)} {self.spec_count_unit}s"
        if self.spec_count % self.units_per_step == 0:
            n = self.spec_count // self.units_per_step
            words += f", {format_count(n)} {self.unit}{'s' if n != 1 else ''}"
        return words

    def to_dict(self) -> dict:
        return {**asdict(self), "headroom_W": self.headroom_W}


def growth_unit(spec: Spec) -> tuple[str, int, int]:
    """``(noun, units per step, steps)``: what ``spec`` grows by, a pod of units where its fabric has more than one
    pod (the builder takes only whole pods then), else a unit, and how many of them the spec gives."""
    L = build_fabric(spec).layout
    if L.num_pods > 1:
        return "pod", int(L.units_per_pod), int(L.num_pods)
    return str(L.unit_name), 1, int(L.num_units)


def _at(spec: Spec, units: int) -> Spec:
    """``spec`` at ``units`` scalable units (the other cluster sizes dropped)."""
    return spec.model_copy(update={"cluster": ClusterSpec(num_units=units)})


def fit_it_power(spec: Spec, limit_W: float, it_power_of: Callable[[Spec], float]) -> tuple[Spec, PowerFit]:
    """``spec`` at the largest whole count of its growth unit whose IT power fits ``limit_W``.

    Parameters
    ----------
    spec : the design as given (its count is the search's start).
    limit_W : the IT power budget, W (> 0).
    it_power_of : the IT power at nameplate of a spec, W (the planner's, with the plan's overrides).

    Returns
    -------
    (Spec, PowerFit)
        The sized spec, and the count, its IT power and one more unit's (or the builder's refusal of one more).

    Raises
    ------
    TopoError
        (key ``--it-power``) when one unit alone draws more than the budget.
    """
    noun, step, own = growth_unit(spec)
    memo: dict[int, float | str] = {}  # the fabric's units -> IT power, or the builder's refusal
    fit = _search(spec, limit_W, it_power_of, noun, step, own, memo=memo, scan=step > 1)
    if step == 1 and fit.fabric_bound is not None and fit.count > 1:
        again = growth_unit(_at(spec, fit.count))  # one pod full: past it the fabric grows by whole pods
        if again[1] > 1 and fit.count % again[1] == 0:
            fit = _search(spec, limit_W, it_power_of, "pod", again[1], fit.count // again[1], own, memo=memo)
        else:  # no pods to grow by yet (a 2-tier fabric at this count): the units past a refused count, in turn
            fit = _search(spec, limit_W, it_power_of, noun, step, own, memo=memo)
            again = growth_unit(_at(spec, fit.count))  # walk34: past a grown tier, pods of units: said in pods
            if again[1] > 1 and fit.count % again[1] == 0:
                fit = _search(spec, limit_W, it_power_of, "pod", again[1], fit.count // again[1], own, memo=memo)
    unit_name = str(build_fabric(spec).layout.unit_name)
    if fit.unit != noun:  # sized in pods from a spec that counts units: its count said in both
        fit = replace(fit, spec_count_unit=noun)
    fit = replace(fit, fabric_unit=unit_name)
    return _at(spec, fit.count * fit.units_per_step), fit


def _search(spec, limit_W, it_power_of, noun: str, step: int, start: int, spec_count: int | None = None,
            memo: dict | None = None, scan: bool = True) -> PowerFit:
    """The largest count of ``step`` units that fits ``limit_W``: from the count the IT power at ``start`` scales
    to, up by doubling while it fits, then by bisection (a count the builder refuses does not fit), then, with
    ``scan``, past a refused next count (:func:`_past_refused`). ``memo`` (units -> IT power or the builder's
    refusal) is shared between searches of one design."""
    power: dict[int, float] = {}
    refused: dict[int, str] = {}
    memo = {} if memo is None else memo

    def fits(n: int) -> bool:
        if n not in power:
            if n * step not in memo:
                try:
                    memo[n * step] = it_power_of(_at(spec, n * step))
                except TopoError as exc:  # the fabric cannot grow to n (a tier's radix): n does not fit either
                    memo[n * step] = exc.message
            got = memo[n * step]
            power[n] = math.inf if isinstance(got, str) else got
            if isinstance(got, str):
                refused[n] = got
        return power[n] <= limit_W

    fits(start)
    lo, hi = 0, max(1, math.floor(limit_W / power[start] * start))
    if fits(hi):
        lo, hi = hi, hi + 1
        while fits(hi):
            lo, hi = hi, 2 * hi
    while hi - lo > 1:  # lo fits (0: none known), hi does not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    if scan and lo and lo + 1 in refused:  # walk34: the bound is a refusal, not the budget; a larger count may build
        lo, hi = _past_refused(lo, fits, refused, _scan_top(lo, power[lo], limit_W))
    if lo == 0:
        raise TopoError(f"{format_in(limit_W, 'MW', ',.3g')} is less than one {noun} of {spec.name} draws "
                        f"({format_in(power[1], 'MW', ',.3g')} of IT power at nameplate); allowed: a budget of at "
                        "least that", key="--it-power")
    gpus = build_fabric(_at(spec, lo * step)).layout.num_gpus
    passed = tuple(n for n in range(lo + 1, hi) if n in refused) if hi not in refused else ()
    return PowerFit(it_power_limit_W=limit_W, unit=noun, units_per_step=step, count=lo, gpus=int(gpus),
                    it_power_W=power[lo], next_it_power_W=None if hi in refused else power[hi],
                    spec_count=start if spec_count is None else spec_count,
                    fabric_bound=refused.get(lo + 1) if hi in refused else None,
                    next_count=None if hi in refused else hi, passed_over=passed)


def _scan_top(count: int, power_W: float, limit_W: float) -> int:
    """The last count :func:`_past_refused` tries above ``count``: twice the count the budget holds at
    ``count``'s mean IT power per count (an engineering bound on the scan, not a physical figure: past it a fabric
    whose builder refuses every count, a 2-tier fabric past its spines' radix, stops; a unit drawing less than half
    of the mean is the case it would miss)."""
    return max(count + 1, math.floor(2 * limit_W / power_W * count))


def _past_refused(lo: int, fits: Callable[[int], bool], refused: dict[int, str], top: int) -> tuple[int, int]:
    """``(lo, hi)``: from ``lo`` (fits) up, each count in turn, the refused passed over; ``lo`` the last that fits,
    ``hi`` the first that builds and does not fit, or the first refused past ``lo`` when the counts from ``top`` on
    are refused (the fabric binds). A count that fits past ``top`` is taken and the scan goes on, so ``hi`` is
    always priced or refused (rev75: it was ``lo + 1`` unpriced when the scan's last count fitted)."""
    n = lo + 1
    while True:
        if fits(n):
            lo = n
        elif n not in refused:
            return lo, n
        elif n >= top:
            return lo, next(m for m in range(lo + 1, n + 1) if m in refused)
        n += 1
