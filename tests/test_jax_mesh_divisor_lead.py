"""A JAX mesh's ICI groups never straddle two NVLink domains (rev107 Left 2, section 456).

MaxText asserts that the ICI sizes multiply to a slice's devices (AI-Hypercomputer/maxtext@e591f30c
``fill_unspecified_mesh_axes``; ``create_hybrid_device_mesh`` lays the ICI mesh over one granule). A product that
does not divide the GPUs the job uses of a domain (``ici_fsdp=36`` at 64 of each NVL72 rack, ``ici_fsdp=3`` on an
8-GPU VM) would put some ICI groups across two domains: a mesh JAX cannot build, which topo had run with a
"spans 2 NVLink domains" note only.
"""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.jax_mesh import check_mesh_placement


@pytest.mark.parametrize("mesh, domain", [
    ("ici_fsdp=36,dcn_data=2", 64),
    ("ici_fsdp=3,dcn_data=8", 8),
    ("ici_tensor=2,ici_fsdp=3,dcn_fsdp=4", 8),
])
def test_an_ici_product_that_does_not_divide_the_domain_is_refused(mesh, domain):
    with pytest.raises(TopoError) as e:
        check_mesh_placement(mesh, domain, source="--jax-mesh")
    assert f"does not divide the {domain}" in str(e.value) and "allowed:" in str(e.value)


@pytest.mark.parametrize("mesh, domain", [("ici_fsdp=32,dcn_data=2", 64), ("ici_fsdp=4,dcn_data=2", 8),
                                          ("ici_fsdp=64,dcn_data=7", 64)])
def test_a_divisor_passes(mesh, domain):
    check_mesh_placement(mesh, domain)


def test_cli_refuses_on_one_line():
    bad = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "24", "--global-batch", "48",
                  "--jax-mesh", "ici_fsdp=3,dcn_data=8")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and bad.stdout == "" and len(lines) == 1, bad.stderr
    assert lines[0].startswith("error: --jax-mesh: ") and "does not divide the 8" in lines[0]
