"""rev107's review of sections 445-449 (issue 29, docs/calibration-findings.md section 452): the mutations no test
caught, and the fix of one bug the merges made between them.

The bug: walk44's ICI check (section 447) took the GPUs of an NVLink domain the job uses as ``gpus_per_domain_used``
given as a flag, else every GPU of the domain, while tidy122 (section 445) and the step's own ``default_placement``
place a job without it at 64 of each NVL72 rack's 72 where it fits. ``ici_fsdp=72,dcn_data=7`` (504 GPUs) on 8 NVL72
racks passed the check, then ran with every 72-GPU ICI group across two racks (64 of each): the silent ICI / DCN
mix walk44 refuses. A layout's ``gpus_per_domain_used`` was not read either (``ici_fsdp=8`` passed on 8-GPU VMs at 4
of each). A JAX hybrid mesh lays the ICI mesh over one granule's devices
(``jax.experimental.mesh_utils.create_hybrid_device_mesh``, which MaxText's ``create_device_mesh`` calls), so the
ICI part must lie in the GPUs of one domain the job is placed on.
"""

from __future__ import annotations

import json

import pytest

import topo
from conftest import run_cli
from topo.training.mapping import default_placement, placed_gpus_used, recipe_gpus_used
from topo.training.parallel import make_layout

NVL72 = ("gb200-nvl72-superpod", "--set", "cluster.num_units=8")  # 8 racks of 72 GPUs, 576
H100 = ("dgx-h100-superpod",)  # 8-GPU NVLink domains
LLAMA = ("--model", "llama3-70b")


def _train(spec, *extra):
    return run_cli("train", *spec, *extra)


@pytest.mark.parametrize("gpus, first_gpu, want", [
    (504, 0, 64),    # 7 x 72 GPUs fit at 64 of each of the 8 racks (8 x 64 = 512)
    (512, 0, 64),
    (576, 0, 72),    # every GPU of the 8 racks: more than 64 of each
    (512, 72, 72),   # from rack 1: 7 racks x 64 = 448 < 512
    (64, 0, 64),
])
def test_placed_gpus_used_is_default_placements(gpus, first_gpu, want):
    """The one rule: the GPUs of a domain the step places a job at (64 = the largest power of two in 72,
    Megatron-Bridge's GB200 recipes) unless the job does not fit at 64 a rack from its first GPU."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=8"]))
    n = fabric.layout.num_gpus
    assert placed_gpus_used(gpus, 72, n, first_gpu) == want
    assert want in (72, recipe_gpus_used(72))
    lay = make_layout(tp=1, dp=gpus, global_batch=gpus, first_gpu=first_gpu)
    assert default_placement(lay, 72, n)[0].gpus_per_domain_used == want
    assert placed_gpus_used(32, 8, 1024) == 8  # a power-of-two domain: every GPU


def test_mesh_ici_of_a_whole_rack_is_refused_where_the_job_is_placed_at_64():
    bad = _train(NVL72, *LLAMA, "--global-batch", "504", "--jax-mesh", "ici_fsdp=72,dcn_data=7")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and bad.stdout == "" and len(lines) == 1, bad.stderr
    assert lines[0].startswith("error: --jax-mesh: ")
    assert "multiply to 72 GPUs, more than the 64 the job uses of an NVLink domain" in lines[0]
    assert "gpus_per_domain_used = 72" in lines[0]


@pytest.mark.parametrize("extra, mesh, batch", [
    (("--gpus-per-domain-used", "72"), "ici_fsdp=72,dcn_data=7", "504"),  # the fill the message names
    ((), "ici_fsdp=72,dcn_data=8", "576"),   # every GPU of the racks: placed at 72 of each
    ((), "ici_fsdp=64,dcn_data=7", "448"),   # an ICI part of 64 on racks at 64
])
def test_mesh_ici_inside_the_placed_domain_runs_on_nvlink(extra, mesh, batch):
    ok = _train(NVL72, *LLAMA, "--global-batch", batch, "--jax-mesh", mesh, *extra, "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    ici = int(mesh.split(",")[0].split("=")[1])
    assert ici <= doc["layout"]["gpus_per_domain_used"]
    assert not any("spans" in n and "NVLink domains" in n for n in doc["notes"]), doc["notes"]


@pytest.mark.parametrize("placed", [("--gpus-per-domain-used", "4"), ("--layout", "gpus_per_domain_used=4")])
def test_mesh_ici_is_checked_against_a_given_gpus_per_domain_used(placed):
    """At 4 GPUs of each 8-GPU VM an ICI part of 8 spans two VMs, by flag or by layout field."""
    bad = _train(H100, "--model", "llama3-8b", "--global-batch", "128", "--jax-mesh", "ici_fsdp=8,dcn_fsdp=4",
                 *placed)
    assert bad.returncode == 2, bad.stderr
    assert "multiply to 8 GPUs, more than the 4 the job uses of an NVLink domain" in bad.stderr


@pytest.mark.parametrize("field", ["recompute_num_layers=4", "activation_offload_layers=1"])
def test_a_layouts_recompute_field_keeps_maxtexts_remat_off(field):
    """jax_mesh.RECOMPUTE_FIELDS: any field that says what a step recomputes or offloads keeps MaxText's default
    ``remat_policy: 'full'`` (maxtext@315ebb59 base.yml) from being chosen; dropping one from the tuple chose it."""
    ok = _train(H100, "--model", "llama3-8b", "--gpus", "32", "--global-batch", "128", "--jax-mesh",
                "ici_fsdp=8,dcn_fsdp=4", "--layout", field, "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["chosen_by"].get("remat_policy") != "jax_mesh"
    assert doc["layout"]["remat_policy"] is None and doc["layout"]["recompute"] == "none"


def test_chosen_by_names_no_micro_batch_the_mesh_could_not_choose():
    """48 sequences on 16 replicas of 2 stages: MaxText's default (no accumulation, as many micro-batches as
    stages: 48 / (16 x 2)) is no whole number, so the mesh chose no micro-batch and the step runs topo's 1; neither
    chosen_by nor the text line may name it (listing every key the mesh looked at named it)."""
    args = ("--model", "llama3-8b", "--global-batch", "48", "--jax-mesh", "ici_fsdp=8,dcn_pipeline=2,dcn_fsdp=2")
    ok = _train(H100, *args, "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert (doc["layout"]["dp"], doc["layout"]["pp"], doc["layout"]["micro_batch"]) == (16, 2, 1)
    assert "micro_batch" not in doc["chosen_by"] and doc["chosen_by"]["remat_policy"] == "jax_mesh"
    text = _train(H100, *args)
    line = next(x for x in text.stdout.splitlines() if x.startswith("chosen by the JAX mesh"))
    assert "micro_batch" not in line and "remat_policy full" in line
