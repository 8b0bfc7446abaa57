"""Max-min fair sharing at scale: flow classes on a compacted sparse incidence matrix.

Progressive filling (Bertsekas & Gallager, *Data Networks*, 6.5.2): every flow's rate rises at the same pace;
when a resource saturates, the flows crossing it freeze at that level. When flows finish, the rates are
re-computed, and the step ends when the last flow ends.

Two things make this fast enough for a hashed all-to-all over thousands of GPUs (millions of flows):

- **Classes.** Flows of equal size that cross the same resources move at the same max-min rate, so a class
  of ``members`` such flows is filled once. A class may also share a *template*: resources that some or all of
  its members cross, common to many classes (e.g. the NVLink hops that bring a server's GPUs to the NIC PXN picks
  for a destination's rail, the same for every destination on that rail). A template resource crossed by only
  some members of a class (``partial``) must not bind while the class is still rising, or its members would
  move at different rates: the solver checks this and refuses the case instead of answering wrongly.
- **Incremental re-filling.** When flows finish, every flow that moved slower than the slowest of them keeps
  its rate: the resource that froze it saturated at a lower level, so no finished flow crossed it, and without
  the finished flows nothing saturates earlier. Only flows at or above that level are filled again, on what
  the others leave. Work per event is the incidences of the flows that change, not of all flows.

The incidence matrix (classes x resources) is held in CSR/CSC form: CSR to read a class's resources, CSC (of the
pattern only, built with ``scipy.sparse``) to find the classes on a saturated resource. Classes given by class
(:attr:`FlowClasses.ptr`, as the all-to-all's router gives them) are the CSR as they are, without a copy; with at
least as many incidences as resources the resource ids are kept, else they are compacted to the resources used
(issue 30 item 10: the 100k all-to-all's 39 million incidences fill in 0.85 GB, not 2.0).
"""

from __future__ import annotations

import numpy as np

from ..errors import ClassesDiverge, TopoError
from .flow_classes import FlowClasses

__all__ = ["max_min_finish_times", "max_min_makespan_classes", "max_min_rates"]


_BATCH = 32  # resources looked at first per round of filling (then adapted to how many a round takes at once)
_CHUNK = 1 << 19  # classes whose incidences are gathered at once (loads, demands): bounds the temporaries
_TIE = 1e-9  # relative: resources saturating, or flows finishing, within this of each other are simultaneous


def _direct(s, classes: np.ndarray):
    """The direct incidences ``(resources, weights)`` of ``classes`` on the solver ``s``, a chunk at a time (every
    class: slices of the whole matrix; some: :data:`_CHUNK` classes' incidences gathered at once), so that no
    temporary of the incidence's size is made (8 B an incidence for the resources' local index alone)."""
    if classes.size == s.C:
        for lo in range(0, s.c_res.size, _CHUNK * 8):
            yield s.c_res[lo:lo + _CHUNK * 8], s.c_a[lo:lo + _CHUNK * 8]
        return
    for lo in range(0, classes.size, _CHUNK):
        seg = _segments(s.c_ptr, classes[lo:lo + _CHUNK])
        yield s.c_res[seg], s.c_a[seg]


def _segments(starts: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Concatenated ranges ``starts[i]:starts[i+1]`` for every i in ``idx``."""
    lo = starts[idx]
    n = starts[idx + 1] - lo
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total) + np.repeat(lo - (np.cumsum(n) - n), n)


def _by_class(sp, fc: FlowClasses, pos: np.ndarray | None, C: int, R: int):
    """The class x resource incidence as CSR arrays ``(ptr, resource, weight)``, a class's parts on one resource
    summed. Classes given by class (``fc.ptr``: each resource once in a class) are used as they are, without a
    copy (the 100k all-to-all's 39 million incidences: 0.3-0.5 GB a copy); incidences grouped by class go in as
    they are; others through a COO matrix (which needs 2-3x the memory)."""
    if fc.ptr is not None:
        return fc.ptr, (fc.res if pos is None else pos[fc.res]), fc.a
    col = np.array(fc.res, dtype=np.int32) if pos is None else pos[fc.res]  # a copy: summing sorts it
    if fc.cls.size and np.all(fc.cls[1:] >= fc.cls[:-1]):
        ptr = np.zeros(C + 1, dtype=np.int64)
        np.cumsum(np.bincount(fc.cls, minlength=C), out=ptr[1:])
        m = sp.csr_matrix((np.array(fc.a, dtype=float), col, ptr), shape=(C, R))
    else:
        m = sp.csr_matrix((fc.a, (fc.cls, col)), shape=(C, R))
    m.sum_duplicates()
    return m.indptr, m.indices, m.data


def _used_resources(fc: FlowClasses, n: int):
    """The resources the classes cross (a mask over the ``n`` ids), the compact index -> resource id, and the
    resource id -> compact index (None: the ids themselves). Classes with at least as many incidences as there are
    resources keep the ids (a compacted copy of their incidences would take more than per-resource arrays of
    every id: 39 million incidences over 0.8 million resources at 100k GPUs)."""
    seen = np.zeros(n, dtype=bool)
    seen[fc.res] = True
    if fc.num_templates:
        seen[fc.t_res] = True
    if fc.res.size >= n:
        return seen, np.arange(n), None
    used = np.flatnonzero(seen)
    pos = np.zeros(n, dtype=np.int32)
    pos[used] = np.arange(used.size)
    return seen, used, pos


def _pattern_by_resource(sp, c_ptr: np.ndarray, c_res: np.ndarray, C: int, R: int):
    """The classes on each resource (CSC of the pattern only: int8 ones, not the float weights, and int32
    indices where they fit, so the transpose copies nothing of the incidence's size but its result)."""
    idx = np.int32 if c_res.size < 2 ** 31 and max(C, R) < 2 ** 31 else np.int64
    mt = sp.csr_matrix((np.ones(c_res.size, dtype=np.int8), c_res.astype(idx, copy=False),
                        c_ptr.astype(idx, copy=False)), shape=(C, R)).tocsc()
    return mt.indptr, mt.indices


class _Solver:
    """The incidence of one set of classes, compacted to the resources they use, and the filling on it."""

    def __init__(self, fc: FlowClasses, capacity_Bps: np.ndarray):
        import scipy.sparse as sp  # only max-min needs it (and it takes a while to import)

        C = fc.num_classes
        T = fc.num_templates
        has_t = T > 0
        seen, self.used, pos = _used_resources(fc, capacity_Bps.size)
        R = self.used.size
        if np.any(capacity_Bps[seen] <= 0):
            raise TopoError("a flow gets no bandwidth (a resource has zero capacity)", key="sharing")
        self.cap = capacity_Bps[self.used].astype(float)
        del seen
        self.c_ptr, self.c_res, self.c_a = _by_class(sp, fc, pos, C, R)  # by class
        self.r_ptr, self.r_cls = _pattern_by_resource(sp, self.c_ptr, self.c_res, C, R)  # by resource
        if pos is None:
            pos = np.arange(R)
        self.C, self.R, self.T = C, R, T
        self.template = fc.template if has_t else None
        if has_t:  # templates are few: plain numpy
            key = fc.t_id.astype(np.int64) * R + pos[fc.t_res]
            uniq, inv = np.unique(key, return_inverse=True)
            tid, tr = uniq // R, uniq % R
            ta = np.bincount(inv, weights=fc.t_a)
            tp = np.bincount(inv, weights=fc.t_partial.astype(float)) > 0
            self.t_ptr = np.searchsorted(tid, np.arange(T + 1))  # by template
            self.t_res, self.t_a = tr, ta
            order = np.argsort(tr, kind="stable")  # by resource
            self.rt_ptr = np.searchsorted(tr[order], np.arange(R + 1))
            self.rt_tpl, self.rt_partial = tid[order], tp[order]
            t_of = self.template
            keep = np.flatnonzero(t_of >= 0).astype(np.int32)
            order = np.argsort(t_of[keep], kind="stable")
            self.tc_cls = keep[order]  # classes of each template, grouped
            del keep
            self.tc_ptr = np.searchsorted(t_of[self.tc_cls], np.arange(T + 1))
        self.open = np.zeros(C, dtype=bool)  # scratch: classes still rising in the current fill
        self.stamp = np.zeros(C, dtype=np.int32)  # scratch: a class's first place among a round's users
        self.lpos = np.zeros(R, dtype=np.int64)  # scratch: compact resource -> local index in a fill

    def loads(self, classes: np.ndarray, rate: np.ndarray) -> np.ndarray:
        """Bytes/s on every used resource from ``classes`` moving at ``rate`` (per member), summed
        :data:`_CHUNK` classes at a time (the incidences of millions of classes at once, with their weights and
        rates, took a gigabyte)."""
        out = np.zeros(self.R)
        # every class, in order (the first fill): slices, no gathered indices
        whole = classes.size == self.C and bool(np.all(classes[1:] > classes[:-1]))
        for lo in range(0, classes.size, _CHUNK):
            c, r = classes[lo:lo + _CHUNK], rate[lo:lo + _CHUNK]
            seg = slice(self.c_ptr[lo], self.c_ptr[lo + c.size]) if whole else _segments(self.c_ptr, c)
            cnt = self.c_ptr[c + 1] - self.c_ptr[c]
            out += np.bincount(self.c_res[seg], weights=self.c_a[seg] * np.repeat(r, cnt), minlength=self.R)
        if self.template is not None:
            t = self.template[classes]
            t += 1  # bin 0: the classes without a template (the others' sums in the same order as without them)
            per_t = np.bincount(t, weights=rate, minlength=self.T + 1)[1:]
            del t
            if per_t.any():
                ts = np.flatnonzero(per_t)
                tseg = _segments(self.t_ptr, ts)
                tcnt = self.t_ptr[ts + 1] - self.t_ptr[ts]
                out += np.bincount(self.t_res[tseg], weights=self.t_a[tseg] * np.repeat(per_t[ts], tcnt),
                                   minlength=self.R)
        return out

    def fill(self, classes: np.ndarray, cap_left: np.ndarray, limits: np.ndarray | None = None) -> np.ndarray:
        """Max-min fair rates (bytes/s per member) of ``classes`` on the residual capacities ``cap_left``.

        When ``limits`` is given (an array of ``classes.size``), it receives for each class the resource id that
        froze it (-1: none held it back).

        Each resource's capacity left is kept as of the level its demand last changed, so a level touches only
        the resources whose demand changes; it saturates at that level + capacity left / demand. A template's
        load is kept per template (classes still rising, rates of those frozen) and brought onto its resources
        only when one of them might saturate: until then their saturation levels are lower bounds, since
        freezing classes only ever postpones a saturation."""
        rate = np.zeros(classes.size)
        if classes.size:
            _Fill(self, classes, cap_left, limits, rate).run()
        return rate


class _Fill:
    """One progressive filling (:meth:`_Solver.fill`), in steps: :meth:`candidates` (the next resources to
    saturate), :meth:`users` (the rising classes on them), :meth:`accept` (the levels that hold, and the classes
    they freeze), :meth:`freeze` (their rates, and the demand and capacity they leave), :meth:`retire`."""

    def __init__(self, s: _Solver, classes: np.ndarray, cap_left: np.ndarray, limits: np.ndarray | None,
                 rate: np.ndarray):
        self.s, self.classes, self.limits, self.rate = s, classes, limits, rate
        self.where = np.full(s.C, -1, dtype=np.int32 if s.C < 2 ** 31 else np.int64)  # class -> place in classes
        self.where[classes] = np.arange(classes.size)
        mark = np.zeros(s.R, dtype=bool)
        for r_dir, _ in _direct(s, classes):
            mark[r_dir] = True
        self.tpl_on = s.template is not None
        if self.tpl_on:
            t = s.template[classes]
            self.open_t = np.bincount(t[t >= 0], minlength=s.T).astype(float)  # classes of each template rising
            del t
            self.frozen_t = np.zeros(s.T)  # sum of the rates of its classes already frozen
            ts = np.flatnonzero(self.open_t)
            tseg = _segments(s.t_ptr, ts)
            tr_res = s.t_res[tseg]
            self.tr_id, self.tr_a = np.repeat(ts, s.t_ptr[ts + 1] - s.t_ptr[ts]), s.t_a[tseg]
            mark[tr_res] = True
            self.tpl_on = tr_res.size > 0
        self.local = np.flatnonzero(mark)
        L = self.L = self.local.size
        lpos = s.lpos
        lpos[self.local] = np.arange(L)
        self.demand = np.zeros(L)  # direct incidences only
        for r_dir, a_dir in _direct(s, classes):
            self.demand += np.bincount(lpos[r_dir], weights=a_dir, minlength=L)
        self.base_cap = np.maximum(cap_left[self.local].astype(float), 0.0)
        self.base_level = np.zeros(L)
        self.sat_at = np.full(L, np.inf)
        live = self.demand > 1e-12
        self.sat_at[live] = self.base_cap[live] / self.demand[live]
        if self.tpl_on:
            self.tl = lpos[tr_res]
            self.is_tr = np.zeros(L, dtype=bool)
            self.is_tr[self.tl] = True
            self.tr = np.flatnonzero(self.is_tr)
            self.refresh()
        self.fresh = True
        s.open[classes] = True
        self.left = classes.size
        self.batch = _BATCH

    def refresh(self) -> None:
        """Exact saturation levels of the template resources."""
        L, tr, tl = self.L, self.tr, self.tl
        f_load = np.bincount(tl, weights=self.tr_a * self.frozen_t[self.tr_id], minlength=L)[tr]
        slope = np.bincount(tl, weights=self.tr_a * self.open_t[self.tr_id], minlength=L)[tr] + self.demand[tr]
        num = self.base_cap[tr] + self.demand[tr] * self.base_level[tr] - f_load
        ok = slope > 1e-12
        self.sat_at[tr] = np.where(ok, np.maximum(num, 0.0) / np.where(ok, slope, 1.0), np.inf)

    def run(self) -> None:
        while self.left:
            step = self.candidates()
            if step is None:
                break
            if step is _AGAIN:
                continue
            idx, lv, with_tpl, k = step
            grp = np.cumsum(np.r_[True, lv[1:] > lv[:-1] * (1 + _TIE) + 1e-300]) - 1  # ties form one level
            cls_all, g_all, r_all = self.users(idx, grp, with_tpl)
            if cls_all.size == 0:
                self.drop(idx)
                continue
            hit, g_hit, idx, g_level = self.accept(idx, lv, grp, cls_all, g_all, r_all, with_tpl, k)
            self.freeze(hit, g_level[g_hit], float(g_level[-1]))
            self.retire(idx)

    def candidates(self):
        """The next resources to saturate, in order, as ``(indices, levels, with_tpl, looked at)``: a run of them
        whose classes are disjoint saturates in turn without changing each other's levels, so it is taken at
        once; a template resource's ties alone. ``_AGAIN`` after making a lower bound exact; None when no resource
        holds the classes left back (their rates are then infinite)."""
        sat_at, L = self.sat_at, self.L
        k = min(self.batch, L)
        idx = np.argpartition(sat_at, k - 1)[:k] if L > k else np.arange(L)
        idx = idx[np.argsort(sat_at[idx], kind="stable")]
        lv = sat_at[idx]
        if not np.isfinite(lv[0]):  # classes that cross nothing: no resource holds them back
            rising = self.classes[self.s.open[self.classes]]
            self.rate[self.where[rising]] = np.inf
            if self.limits is not None:
                self.limits[self.where[rising]] = -1
            self.s.open[self.classes] = False
            return None
        idx, lv = idx[np.isfinite(lv)], lv[np.isfinite(lv)]
        with_tpl = False
        if self.tpl_on:
            trc = self.is_tr[idx]
            if trc.any():
                if not self.fresh:
                    self.refresh()  # a lower bound came up: make it exact and look again
                    self.fresh = True
                    return _AGAIN
                first = int(np.argmax(trc))
                if first == 0:  # a template resource saturates: take its ties alone
                    idx = np.flatnonzero(sat_at <= lv[0] * (1 + _TIE) + 1e-300)
                    lv = np.full(idx.size, lv[0])
                    with_tpl = True
                else:
                    idx, lv = idx[:first], lv[:first]
        return idx, lv, with_tpl, k

    def users(self, idx: np.ndarray, grp: np.ndarray, with_tpl: bool):
        """The rising classes on the resources ``idx`` (with their templates' classes when ``with_tpl``):
        ``(class, level group, resource or None)`` of each entry, in level order."""
        s = self.s
        sat = self.local[idx]
        n_k = s.r_ptr[sat + 1] - s.r_ptr[sat]
        cls_all = s.r_cls[_segments(s.r_ptr, sat)]
        g_all = np.repeat(grp, n_k)
        r_all = np.repeat(sat, n_k) if self.limits is not None else None  # the resource of each entry
        if with_tpl and np.any(s.rt_ptr[sat + 1] > s.rt_ptr[sat]):
            tseg = _segments(s.rt_ptr, sat)
            tpl = s.rt_tpl[tseg]
            on = self.open_t[tpl] > 0
            if np.any(s.rt_partial[tseg] & on):
                raise ClassesDiverge("max-min sharing: a resource that only some flows of a merged group "
                                     "cross (e.g. one GPU's NVLink to the NIC PXN sends through) binds before "
                                     "the group is held back elsewhere, so their speeds differ; use "
                                     "sharing=equal or fewer GPUs (up to 1,000,000 flows are kept one by one)",
                                     key="sharing")
            t_sat = np.repeat(sat, s.rt_ptr[sat + 1] - s.rt_ptr[sat])[on]  # resource of each template
            tpl, first_t = np.unique(tpl[on], return_index=True)
            if tpl.size:
                per_t = s.tc_ptr[tpl + 1] - s.tc_ptr[tpl]
                more = s.tc_cls[_segments(s.tc_ptr, tpl)]
                cls_all = np.concatenate([cls_all, more])
                g_all = np.concatenate([g_all, np.zeros(more.size, dtype=g_all.dtype)])
                if r_all is not None:
                    r_all = np.concatenate([r_all, np.repeat(t_sat[first_t], per_t)])
        m = s.open[cls_all]
        cls_all, g_all = cls_all[m], g_all[m]
        if r_all is not None:
            r_all = r_all[m]
        if with_tpl and cls_all.size:
            order = np.argsort(g_all, kind="stable")
            cls_all, g_all = cls_all[order], g_all[order]
            if r_all is not None:
                r_all = r_all[order]
        return cls_all, g_all, r_all

    def accept(self, idx, lv, grp, cls_all, g_all, r_all, with_tpl: bool, k: int):
        """The level groups that hold (up to the first where a class frozen at an earlier level crosses too) and
        the classes they freeze: ``(classes, their group, the resources saturated, each group's level)``."""
        s = self.s
        n = cls_all.size
        stamp = s.stamp
        stamp[cls_all[::-1]] = np.arange(n - 1, -1, -1)  # the first (lowest level) place of each class
        first_i = stamp[cls_all]
        late = g_all > g_all[first_i]  # a class frozen at an earlier level crosses this resource too
        firsts = first_i == np.arange(n)
        hit, g_hit = cls_all[firsts], g_all[firsts]
        n_ok = int(g_all[late].min()) if late.any() else int(grp[-1]) + 1
        take = g_hit < n_ok
        hit, g_hit = hit[take], g_hit[take]
        if r_all is not None:
            self.limits[self.where[hit]] = s.used[r_all[firsts][take]]
        done = grp < n_ok
        idx, lv = idx[done], lv[done]
        if not with_tpl:  # look further ahead when whole batches go through, less far when few do
            b = self.batch
            self.batch = min(2 * b, 1024) if idx.size == k else (max(8, b // 2) if 4 * idx.size < k else b)
        g_level = lv[np.searchsorted(grp[done], np.arange(n_ok))]  # level of each accepted group
        return hit, g_hit, idx, g_level

    def freeze(self, hit: np.ndarray, lev_hit: np.ndarray, top: float) -> None:
        """Classes ``hit`` freeze at ``lev_hit``: their rates, and the demand and capacity they leave behind on
        their resources (kept as of ``top``, the highest level reached)."""
        s = self.s
        self.rate[self.where[hit]] = lev_hit
        s.open[hit] = False
        self.left -= hit.size
        hseg = _segments(s.c_ptr, hit)
        li = s.lpos[s.c_res[hseg]]
        w = s.c_a[hseg]
        L = self.L
        d_sum = np.bincount(li, weights=w, minlength=L)
        ch = np.flatnonzero(d_sum)  # the resources whose demand changes
        d_sum = d_sum[ch]
        d_lev = np.bincount(li, weights=w * np.repeat(lev_hit, s.c_ptr[hit + 1] - s.c_ptr[hit]), minlength=L)[ch]
        demand, base_cap, base_level = self.demand, self.base_cap, self.base_level
        # capacity used up to ``top``: the old demand all along, less what each frozen class no longer takes
        base_cap[ch] -= demand[ch] * (top - base_level[ch]) - (d_sum * top - d_lev)
        base_level[ch] = top
        demand[ch] -= d_sum
        live = demand[ch] > 1e-12
        self.sat_at[ch] = np.where(live, top + np.maximum(base_cap[ch], 0.0) / np.where(live, demand[ch], 1.0),
                                   np.inf)
        if self.tpl_on:
            th = s.template[hit]
            sel = th >= 0
            if sel.any():
                self.open_t -= np.bincount(th[sel], minlength=s.T)
                self.frozen_t += np.bincount(th[sel], weights=lev_hit[sel], minlength=s.T)
                self.fresh = False
            tch = ch[self.is_tr[ch]]
            if tch.size:  # their formula above left the templates out: only a lower bound now
                self.sat_at[tch] = top
                self.fresh = False

    def drop(self, idx: np.ndarray) -> None:
        """The resources ``idx`` carry no rising class: no demand, never saturating."""
        self.demand[idx] = 0.0
        self.sat_at[idx] = np.inf

    def retire(self, idx: np.ndarray) -> None:
        """The resources ``idx`` saturated: done with, like any other (a template resource too)."""
        self.drop(idx)
        if self.tpl_on and self.is_tr[idx].any():
            self.is_tr[idx] = False
            self.tr = np.flatnonzero(self.is_tr)


_AGAIN = object()  # _Fill.candidates: look again (a lower bound was made exact)


def max_min_rates(fc: FlowClasses, capacity_Bps: np.ndarray, classes: np.ndarray | None = None,
                  limits: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rate of each member flow of ``classes`` (default: every class), active at once.

    Parameters
    ----------
    fc : FlowClasses
        The flows, grouped into classes.
    capacity_Bps : numpy.ndarray
        Capacity of every resource (bytes/s), indexed by the resource ids ``fc`` uses.
    classes : numpy.ndarray, optional
        The classes that run (the others are left out); default all.
    limits : numpy.ndarray, optional
        An int array of ``classes.size`` that receives the resource that froze each class (-1: none).

    Returns
    -------
    numpy.ndarray
        Bytes/s of each member of each class of ``classes`` (``inf`` for a class that crosses no resource).
    """
    s = _Solver(fc, capacity_Bps)
    classes = np.arange(s.C) if classes is None else np.asarray(classes, dtype=np.int64)
    return s.fill(classes, s.cap, limits)


def max_min_finish_times(fc: FlowClasses, capacity_Bps: np.ndarray, max_events: int = 1_000_000,
                         limits: np.ndarray | None = None) -> np.ndarray:
    """Fluid max-min fair completion time of every class, rates re-computed as classes finish.

    Between re-fills every rate is fixed, so the classes finish in the order of their finish times. Finishing
    classes change nobody's rate unless a class at least as fast as the slowest of them is still running (module
    docstring), so the run of completions before the first such event is taken in one step; at that event the
    classes at or above its level are filled again and the finish times re-sorted.

    Parameters
    ----------
    fc : FlowClasses
        The flows; ``fc.size_bytes`` is each member's amount of work (a class of size 0 finishes at 0).
    capacity_Bps : numpy.ndarray
        Capacity of every resource.
    max_events : int
        Re-fills allowed before giving up.
    limits : numpy.ndarray, optional
        An int array of ``fc.num_classes`` that receives, for each class, the resource that held it back first
        (from the fill at t = 0; -1: none, or a class of size 0). Rates only rise as classes finish, so a class
        not held back at first never is.

    Returns
    -------
    numpy.ndarray
        Finish time of each class (seconds when sizes are bytes and capacities bytes/s).

    Raises
    ------
    TopoError
        A flow gets no bandwidth (a resource of zero capacity), or more than ``max_events`` re-fills.
    """
    finish = np.zeros(fc.num_classes)
    if fc.num_classes == 0:
        return finish
    size = np.asarray(fc.size_bytes, dtype=float)  # no copy: a router may give one broadcast size
    act = np.flatnonzero(size > 0).astype(np.int32 if size.size < 2 ** 31 else np.int64)
    s = _Solver(fc, capacity_Bps)
    rate, load = _first_fill(s, act, size, finish, limits)
    for _ in range(max_events):
        if act.size == 0:
            return finish
        o = act[np.argsort(finish if act.size == s.C else finish[act], kind="stable")]  # act: all, in order
        event = _first_rate_change(o, finish[o], rate)
        if event is None:  # everything finishes at the rates it has
            return finish
        act = _refill(s, o, *event, finish, rate, load)
    raise TopoError(f"max-min sharing needed more than {max_events:,} re-computations; use sharing=equal",
                    key="sharing")


def _first_fill(s: _Solver, act: np.ndarray, size: np.ndarray, finish: np.ndarray, limits: np.ndarray | None):
    """The fill at t = 0 of the classes ``act``: their rates and the load on every resource; ``finish`` gets each
    one's finish time at that rate and ``limits`` (when given) what held it back."""
    rate = np.zeros(s.C)
    first = np.full(act.size, -1, dtype=np.int64) if limits is not None else None
    rate[act] = s.fill(act, s.cap, first)
    if limits is not None:
        limits[:] = -1
        limits[act] = first
    load = s.loads(act, rate[act])
    with np.errstate(divide="ignore"):
        finish[act] = size[act] / rate[act]
    return rate, load


def _first_rate_change(o: np.ndarray, fs: np.ndarray, rate: np.ndarray) -> tuple[int, float, float] | None:
    """The first completion event that changes someone's rate, of the running classes ``o`` in order of their
    finish times ``fs``: ``(i1, lam, t)``, the classes ``o[:i1]`` done by then, the slowest rate among those
    finishing at it and its time; None when no event does."""
    if not np.isfinite(fs[-1]):
        raise TopoError("a flow gets no bandwidth (a resource has zero capacity)", key="sharing")
    starts = np.flatnonzero(np.r_[True, fs[1:] > fs[:-1] * (1 + _TIE) + 1e-300])  # events (tied finishes)
    ends = np.r_[starts[1:], o.size]
    rs = rate[o]
    lam = np.minimum.reduceat(rs, starts)  # the slowest class of each event
    top = np.maximum.reduceat(rs, starts)  # and the fastest
    del rs
    faster_left = np.r_[np.maximum.accumulate(top[::-1])[::-1][1:], -np.inf]  # fastest still running
    need = np.flatnonzero(faster_left >= lam * (1 - _TIE))
    if need.size == 0:
        return None
    e = int(need[0])
    i1 = int(ends[e])
    return i1, lam[e], float(fs[i1 - 1])


def _refill(s: _Solver, o: np.ndarray, i1: int, lam: float, t: float, finish: np.ndarray, rate: np.ndarray,
            load: np.ndarray) -> np.ndarray:
    """At time ``t`` the classes ``o[:i1]`` are done: fill again those still running at least as fast as ``lam``
    with what the others leave (``finish``, ``rate`` and ``load`` updated in place); the classes still running."""
    done, rest = o[:i1], o[i1:]
    redo = rest[rate[rest] >= lam * (1 - _TIE)]
    load -= s.loads(done, rate[done])
    load -= s.loads(redo, rate[redo])
    left = rate[redo] * np.maximum(finish[redo] - t, 0.0)
    rate[done] = 0.0
    new = s.fill(redo, s.cap - load)
    rate[redo] = new
    with np.errstate(divide="ignore"):
        finish[redo] = t + left / new
    load += s.loads(redo, new)
    return rest


def max_min_makespan_classes(fc: FlowClasses, capacity_Bps: np.ndarray, max_events: int = 1_000_000) -> float:
    """Fluid max-min fair completion time of every flow: the last of :func:`max_min_finish_times`.

    Parameters
    ----------
    fc : FlowClasses
        The flows.
    capacity_Bps : numpy.ndarray
        Capacity of every resource.
    max_events : int
        Re-fills allowed before giving up.

    Returns
    -------
    float
        Time until the last flow ends.
    """
    if fc.num_classes == 0:
        return 0.0
    return float(max_min_finish_times(fc, capacity_Bps, max_events).max())
