"""``topo train`` names a layout field a step note names by the flag that sets it (the library names fields only).

fix49 (docs/calibration-findings.md section 158) mapped ``gpus_per_domain_used`` alone: the dualpipe note's
``overlap_ep=true`` (topo/training/step.py ``_notes``) reached the CLI's text as a field, which no flag is called."""

import argparse

from topo.cli.train import _note_fields, note_flags, register
from topo.training.parallel import ParallelLayout


def test_a_domain_note_names_the_flag():
    assert note_flags("gpus_per_domain_used = 72 fills the domains") == "--gpus-per-domain-used 72 fills the domains"
    assert note_flags("gpus_per_domain_used (e.g. 64 of 72) keeps it") == "--gpus-per-domain-used (e.g. 64 of 72) keeps it"


def test_the_dualpipe_notes_overlap_field_is_the_overlap_flag():
    note = ("dualpipe without overlap_ep: DualPipe exists to hide each chunk pair's expert all-to-alls behind the "
            "other chunk's compute (DeepSeek-V3 sec. 3.2.1), but only overlap_ep=true hides them here: priced exposed")
    out = note_flags(note)
    assert "overlap_ep" not in out
    assert "dualpipe without --overlap ep=on:" in out and "only --overlap ep=on hides" in out
    assert note_flags("overlap_tp = false") == "--overlap tp=off"


def test_the_longer_field_wins_and_prose_words_stay():
    assert note_flags("dp_shard = 8 with dp_sharding = fsdp") == "--dp-shard 8 with --dp-sharding fsdp"
    # one-word fields are words of the prose too: a note's "tp" or "precision" is left alone
    assert note_flags("the tp group at bf16 precision") == "the tp group at bf16 precision"


def test_every_layout_field_with_its_own_flag_is_named_by_it():
    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    flags = {s for a in sub.choices["train"]._actions if a.nargs != 0 for s in a.option_strings}  # not switches
    fields = _note_fields()
    for f in ParallelLayout.model_fields:
        flag = "--" + f.replace("_", "-")
        if "_" in f and flag in flags:
            assert fields.get(f) == flag, f
            assert f not in note_flags(f"{f} = 3"), f


def test_a_sentences_full_stop_is_not_read_as_part_of_the_value():
    # rev53: the value ran to the next space, so "overlap_ep=true." read "true." (not true: --overlap ep=off) and
    # the full stop was lost; a value's own dot (a decimal) stays
    assert note_flags("hidden only with overlap_ep=true.") == "hidden only with --overlap ep=on."
    assert note_flags("exposed under overlap_tp = false. Then") == "exposed under --overlap tp=off. Then"
    assert note_flags("set dp_shard = 8.") == "set --dp-shard 8."
    assert note_flags("grad_reduce_bytes = 2.5.") == "--grad-reduce-bytes 2.5."


def test_an_overlap_value_that_is_no_switch_is_left_as_written():
    # neither on nor off: the note's words are kept rather than turned into --overlap DIM=off
    assert note_flags("overlap_ep = auto") == "overlap_ep = auto"
