"""walk34: ``topo plan --it-power`` sized a design by bisection that took a count the fabric builder refuses for one
that draws too much. What builds is not monotone in the count: a GB200 NVL72 superpod of 83 pods has no whole
islands (83 is prime, islands hold 2 to 32 pods) while 84 to 88 build, so 100 MW gave 82 pods (47,232 GPUs) with
"the fabric binds" where 88 pods (50,688 GPUs) draw 98.22 MW; a DGX B200 superpod with ``grow_tiers`` stopped at
its 2-tier 8 scalable units (2,048 GPUs; 9 do not fill the 3-tier fabric's pods of 4) where 49 pods (50,176 GPUs)
draw 99.97 MW. Past a refused next count the counts above are now tried in turn, the refused passed over."""

from topo.fabric.builders import build_fabric
from topo.plan.budget import fit_it_power
from topo.spec import load_spec


def _linear(fixed_W: float, per_unit_W: float):
    """A closed-form IT power: fixed + per unit (racks or scalable units) of the spec, so the answer is exact; the
    fabric is built first, so a count the builder refuses raises, as the planner's IT power does."""
    return lambda s: (build_fabric(s), fixed_W + per_unit_W * s.cluster.num_units)[1]


def test_a_refused_count_below_the_budget_is_passed_over():
    # 2 MW + 1 MW a rack, pods of 8 racks: 706 MW holds (706 - 2) / 8 = 88 pods exactly; 83 and 89 pods do not
    # build (prime counts of pods above the 32 an island of 64-port cores holds), 90 draw 2 + 720 = 722 MW
    sized, fit = fit_it_power(load_spec("gb200-nvl72-superpod"), 706e6, _linear(2e6, 1e6))
    assert (fit.unit, fit.units_per_step, fit.count, fit.gpus) == ("pod", 8, 88, 88 * 8 * 72)
    assert sized.cluster.num_units == 704 and fit.it_power_W == 706e6
    assert fit.fabric_bound is None and fit.next_count == 90 and fit.next_it_power_W == 722e6
    assert fit.passed_over == (89,)
    assert ("88 pods of 8 racks (50,688 GPUs) draw 706.00 MW" in fit.note()  # the spec's unit, not "scalable units"
            and "the budget binds: 90 would draw 722.00 MW (89 cannot be built: the fabric builder refuses it)"
            in fit.note())
    assert "(the spec gives 4)" in fit.note()  # 32 racks = 4 pods: the spec counts pods already, said as before


def test_a_two_tier_design_that_grows_tiers_is_sized_past_its_first_pod():
    # 10 MW + 1 MW a scalable unit of 32 DGX B200: 206.5 MW holds 196 units = 49 pods of 4 (pods once a third tier
    # is grown past 8 units), 49 x 4 x 32 x 8 = 50,176 GPUs; 50 pods draw 210 MW. The spec's 4 units (14 MW) scale
    # to 59, which the builder refuses (not whole pods), and the bisection ended at the 2-tier fabric's 8
    spec = load_spec("dgx-b200-superpod")
    spec = spec.model_copy(update={"fabric": spec.fabric.model_copy(update={"grow_tiers": True})})
    sized, fit = fit_it_power(spec, 206.5e6, _linear(10e6, 1e6))
    assert (fit.unit, fit.units_per_step, fit.count, fit.gpus) == ("pod", 4, 49, 50_176)
    assert fit.next_it_power_W == 210e6 and fit.fabric_bound is None
    assert "49 pods of 4 scalable units (50,176 GPUs)" in fit.note()
    # plan78 (walk34 Left 7): the spec's own size in the answer's unit too, not "(the spec gives 4)" of units
    # against pods; the bundled spec's 4 scalable units are one pod of 4
    assert "(the spec gives 4 scalable units, 1 pod)" in fit.note()
    assert fit.spec_count == 4 and fit.spec_count_unit == "scalable unit"


def test_a_fabric_that_builds_nothing_larger_still_binds():
    # dgx-b200-superpod's 2 tiers of 64-port QM9700 take at most 8 scalable units: every larger count is refused,
    # so the scan stops at its bound and the fabric binds, as before
    sized, fit = fit_it_power(load_spec("dgx-b200-superpod"), 100e6, _linear(0.0, 1e6))
    assert fit.count == 8 and fit.next_it_power_W is None and "radix" in fit.fabric_bound
    assert "the fabric binds, not the budget: 9 cannot be built" in fit.note()
