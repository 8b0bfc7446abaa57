"""The ``--it-power`` scan past a refused count (walk34) always ends on a count it priced or the builder refused:
rev75 found ``(lo, lo + 1)`` returned unpriced when the scan's last count fitted, which ``_search`` then read
(``power[hi]``, a KeyError traceback)."""
from topo.plan.budget import _past_refused


def _scan(fit_max: int, refused_counts: set[int], top: int):
    asked = []

    def fits(n: int) -> bool:
        asked.append(n)
        return n not in refused_counts and n <= fit_max

    lo, hi = _past_refused(3, fits, {n: "refused" for n in refused_counts}, top)
    return lo, hi, asked


def test_a_count_fitting_at_the_scan_s_top_goes_on_to_the_first_that_does_not():
    lo, hi, asked = _scan(fit_max=12, refused_counts={4}, top=10)
    assert (lo, hi) == (12, 13) and hi in asked  # 13 priced (it does not fit), not assumed


def test_counts_refused_from_the_top_on_end_on_the_first_refused_past_the_last_that_fits():
    lo, hi, _ = _scan(fit_max=99, refused_counts={4, 9, 10, 11}, top=10)
    assert (lo, hi) == (8, 9)


def test_the_budget_binding_below_the_top_stops_there():
    lo, hi, asked = _scan(fit_max=6, refused_counts={4}, top=10)
    assert (lo, hi) == (6, 7) and max(asked) == 7
