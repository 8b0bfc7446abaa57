"""The command line's estimate flags against the options object, where each option and its default is declared
once (:class:`topo.engine.options.EstimateOptions`, :data:`topo.engine.options.CHOICES`)."""

import dataclasses

import pytest

from topo.cli.estimate import FLAGS, MEMBER_OPTIONS, _dest, options_from_args
from topo.cli.main import build_parser
from topo.engine.options import CHOICES, EstimateOptions


def _estimate_parser():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["estimate"]


def _actions():
    return {o: a for a in _estimate_parser()._actions for o in a.option_strings}


FIELDS = [f.name for f in dataclasses.fields(EstimateOptions)]


def test_every_option_has_one_flag_and_every_flag_exists():
    actions = _actions()
    assert set(FIELDS) <= set(FLAGS)
    missing = [flag for flag in FLAGS.values() if flag not in actions]
    assert not missing
    for key in MEMBER_OPTIONS:
        assert actions[FLAGS[key]].dest == _dest(FLAGS[key])


@pytest.mark.parametrize("field", FIELDS)
def test_a_flag_leaves_the_default_to_the_options_and_takes_its_choices_from_them(field):
    action = _actions()[FLAGS[field]]
    if field == "pxn":  # --no-pxn: a switch that sets pxn=False
        assert action.default is False and EstimateOptions.default("pxn") is None
        return
    assert action.default is None, f"{FLAGS[field]} states its own default"
    # protocol (any case) and op (its error names the op, as nccl-tests' -o is spelled) are checked by the options
    if field in CHOICES and field not in ("protocol", "op"):
        assert tuple(action.choices) == CHOICES[field]
    default = EstimateOptions.default(field)
    if default is not None and field not in ("ranks",):
        assert f"default {default}" in action.help, f"{FLAGS[field]}'s help does not state the default {default}"


def test_no_flags_are_the_default_options():
    args = _estimate_parser().parse_args([])
    assert options_from_args(args) == EstimateOptions()
    args = _estimate_parser().parse_args(["--ecmp", "hash", "--subflows", "4", "-g", "8", "--no-pxn"])
    assert options_from_args(args) == EstimateOptions(ecmp="hash", subflows=4, gpus=8, pxn=False)
