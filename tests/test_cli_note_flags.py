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
