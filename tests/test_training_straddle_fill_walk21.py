"""The other direction of tests/test_training_straddle_notes.py (walk21): at the default 64 of each NVL72 rack's 72
GPUs, a group of more than 64 that 72 a rack would keep in one rack is pushed onto the network between racks, and
the step said only the generic placement note. A JAX mesh's ``ici_fsdp=72`` (MaxText's ICI axis: one NVLink
domain) on 4 racks ran 3.7x slower (3.218 against 0.881 s) with its FSDP gathers on the NICs, unsaid (since rev107,
section 452, that mesh is refused at 64 a rack and runs with ``gpus_per_domain_used = 72``)."""

import json

from conftest import run_cli


def _notes(*args):
    out = json.loads(run_cli("train", "gb200-nvl72-superpod", *args, "--json", check=True).stdout)
    return [n for n in out["notes"] if n.startswith("placement: a ")]


def test_a_group_that_filling_the_racks_keeps_in_one_is_named():
    # Llama 3 70B TP8 PP2 on 144 GPUs: a stage is 72 GPUs, DP 9; at 64 a rack stage 0 holds GPUs 0-63 and 72-79
    args = ("--model", "llama3-70b", "--gpus", "144", "--tp", "8", "--pp", "2", "--global-batch", "576")
    assert _notes(*args) == ["placement: a DP group (9 GPUs) spans 2 NVLink domains, where 72 of each 72-GPU "
                             "domain would keep it in 1: its collectives cross the network between domains "
                             "(gpus_per_domain_used = 72 avoids it)"]
    assert _notes(*args, "--gpus-per-domain-used", "72") == []


def test_a_mesh_shard_group_of_a_whole_rack_is_named_and_a_wide_dp_group_is_not():
    # rev107 (section 452): a mesh's ici_fsdp=72 at 64 of each rack is refused (walk44's ICI check, against the GPUs
    # the job is placed at: tests/test_review_rev107.py); the same hybrid shard group given as layout fields is named
    notes = _notes("--model", "llama3-8b", "--gpus", "288", "--global-batch", "576", "--layout",
                   "dp_sharding=zero3,dp_shard=72")
    # the DP group of 288 spans 5 racks at 64 and 4 at 72: filling the racks keeps it on the network either way
    assert notes == ["placement: a hybrid shard group (72 GPUs) spans 2 NVLink domains, where 72 of each 72-GPU "
                     "domain would keep it in 1: its collectives cross the network between domains "
                     "(gpus_per_domain_used = 72 avoids it)"]
    assert _notes("--model", "llama3-8b", "--gpus", "256", "--global-batch", "512", "--jax-mesh",
                  "ici_fsdp=64,dcn_data=4") == []
