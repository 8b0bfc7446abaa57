"""A JAX mesh's ICI part inside an NVLink domain (walk44, section 447).

``jax.experimental.mesh_utils.create_hybrid_device_mesh``, which MaxText's ``create_device_mesh`` calls with its
``ici_parallelism`` / ``dcn_parallelism``, lays the ICI mesh over one granule's devices and the DCN mesh across
granules, and MaxText asserts the ICI sizes multiply to a slice's devices. On an A3 Mega / A4 VM (8 GPUs on NVLink)
``ici_fsdp=16,dcn_fsdp=16`` cannot be built, and ``ici_data=8,dcn_fsdp=32`` puts each fsdp group one GPU per VM.
topo multiplied ICI x DCN per axis and placed both as ``ici_fsdp=8,dcn_fsdp=32``: a different job, silently.
"""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.jax_mesh import check_mesh_placement, parse_mesh, parse_mesh_parts


def test_parts_keep_ici_and_dcn_apart_and_their_product_is_the_axis():
    ici, dcn = parse_mesh_parts("ici_fsdp_parallelism=8,dcn_fsdp=4,dcn_data=2")
    assert (ici["fsdp"], dcn["fsdp"], ici["data"], dcn["data"]) == (8, 4, 1, 2)
    assert parse_mesh("ici_fsdp_parallelism=8,dcn_fsdp=4,dcn_data=2")["fsdp"] == 8 * 4


@pytest.mark.parametrize("mesh, domain", [
    ("ici_fsdp=8,dcn_fsdp=32", 8),                     # gpu-recipes' A4 Llama 3.1 70B mesh
    ("ici_fsdp=8,dcn_pipeline=4,dcn_fsdp=8", 8),
    ("ici_tensor=2,ici_fsdp=4,dcn_fsdp=4,dcn_data=8", 8),
    ("ici_expert=8,dcn_fsdp=16", 8),
    ("ici_fsdp=4,dcn_data=2", 8),                      # fewer than a domain: not refused (a slice may be smaller)
    ("ici_fsdp=72", 72),                               # one NVL72 rack
    ("ici_pipeline=8,dcn_fsdp=32", 8),                 # tidy123: placed in tp-cp-ep-pp-dp, stages inside a VM
])
def test_meshes_topo_places_as_jax_does_pass(mesh, domain):
    check_mesh_placement(mesh, domain)


@pytest.mark.parametrize("mesh, domain, needle", [
    ("ici_fsdp=16,dcn_fsdp=16", 8, "ici_fsdp=16 multiply to 16 GPUs, more than the 8"),
    ("ici_tensor=4,ici_fsdp=4,dcn_data=16", 8, "multiply to 16 GPUs, more than the 8"),
    ("ici_fsdp=8,dcn_fsdp=32", 4, "more than the 4"),
    ("ici_data=8,dcn_fsdp=32", 8, "ici_data=8 with dcn_fsdp=32"),
    ("ici_pipeline=4,ici_fsdp=2,dcn_data=4", 8, "ici_pipeline=4 with dcn_data=4"),
    ("ici_fsdp=2,dcn_tensor=2,dcn_fsdp=4", 8, "ici_fsdp=2 with dcn_tensor=2"),
])
def test_meshes_topo_would_place_differently_are_refused(mesh, domain, needle):
    with pytest.raises(TopoError) as e:
        check_mesh_placement(mesh, domain, source="--jax-mesh")
    assert needle in str(e.value) and "allowed:" in str(e.value)


@pytest.mark.parametrize("mesh, needle", [
    ("ici_fsdp=16,dcn_fsdp=2", "more than the 8 the job uses of an NVLink domain"),
    ("ici_data=8,dcn_fsdp=4", "ici_data=8 with dcn_fsdp=4"),
])
def test_cli_refuses_on_one_line(mesh, needle):
    bad = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64",
                  "--jax-mesh", mesh)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and bad.stdout == "" and len(lines) == 1, bad.stderr
    assert lines[0].startswith("error: --jax-mesh: ") and needle in lines[0]


def test_mesh_micro_batch_is_maxtexts_no_accumulation():
    """MaxText trains per_device_batch_size x devices x gradient_accumulation_steps (1 by default) sequences, a
    pipelined replica's in as many micro-batches as stages (pyconfig's calculate_global_batch_sizes and
    set_and_validate_pipeline_config). gpu-recipes' A4 Llama 3.1 70B: per_device_batch_size 8 on 256 B200, global
    2,048: one micro-batch of 8, not topo's default 8 of 1."""
    from topo.training.jax_mesh import maxtext_micro_batch
    assert maxtext_micro_batch(2048, 256) == 2048 // 256
    assert maxtext_micro_batch(256, 64, pp=4) == 1          # 4 stages: 4 micro-batches of 1 per replica
    assert maxtext_micro_batch(512, 64, pp=4) == 2
    assert maxtext_micro_batch(100, 256) is None


def test_cli_mesh_runs_maxtexts_batch_unless_micro_batch_is_given():
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--remat-policy", "full",
            "--jax-mesh", "ici_fsdp=8,dcn_fsdp=4"]

    def header(proc):
        assert proc.returncode == 0, proc.stderr
        return next(line for line in proc.stdout.splitlines() if " on dgx-h100-superpod: " in line)

    assert "1 micro-batch of 4" in header(run_cli(*base, "--global-batch", "128"))  # 128 / 32 replicas
    assert "4 micro-batches of 1" in header(run_cli(*base, "--global-batch", "128", "--micro-batch", "1"))
    assert "1 micro-batch of 4" in header(run_cli(*base, "--layout", "global_batch=128"))
    assert "2 micro-batches of 2" in header(run_cli(*base, "--layout", "global_batch=128,micro_batch=2"))


def test_cli_mesh_recomputes_as_maxtexts_default_unless_told():
    """MaxText's base.yml sets remat_policy: 'full' (AI-Hypercomputer/maxtext@315ebb59 MaxText/configs/base.yml); a
    mesh without a recompute flag ran with nothing recomputed, and Llama 3 70B on 256 H100 'did not fit' (194 GB)."""
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "32",
            "--jax-mesh", "ici_fsdp=8,dcn_fsdp=4"]

    def header(*extra):
        proc = run_cli(*base, *extra)
        assert proc.returncode == 0, proc.stderr
        return next(line for line in proc.stdout.splitlines() if " on dgx-h100-superpod: " in line)

    assert ", remat full," in header()
    assert ", remat minimal," in header("--remat-policy", "minimal")
    assert "remat" not in header("--recompute", "none") and "recompute" not in header("--recompute", "none")
    assert "recompute mlp" in header("--layout", "recompute_modules=[\"mlp\"]") and "remat" not in header(
        "--layout", "recompute_modules=[\"mlp\"]")


def test_an_unmodelled_axis_at_size_one_splits_nothing_and_is_taken():
    """MaxText's base.yml lists every axis, most at 1 (ici_sequence_parallelism: 1, ...): pasted whole, the mesh was
    refused for an axis that splits nothing. At any other size it is still refused by name."""
    ici, dcn = parse_mesh_parts("ici_fsdp=8,ici_sequence_parallelism=1,dcn_tensor_sequence=1,dcn_fsdp=4")
    assert (ici["fsdp"], dcn["fsdp"]) == (8, 4) and all(v == 1 for a, v in ici.items() if a != "fsdp")
    with pytest.raises(TopoError) as e:
        parse_mesh_parts("ici_fsdp=8,ici_sequence=2")
    assert "does not model the sequence axis" in str(e.value)
    with pytest.raises(TopoError) as e:
        parse_mesh_parts("ici_sequence=x")
    assert "does not model the sequence axis" in str(e.value)
