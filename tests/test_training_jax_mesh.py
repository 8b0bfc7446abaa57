"""A JAX mesh (MaxText's ici_*/dcn_* parallelism) as a layout, and hybrid sharding (issue 29: "a JAX mesh mapped
onto tp/fsdp/dp"). MaxText shards the weights over its fsdp axis only and replicates them over its data axis
(AI-Hypercomputer/maxtext MaxText/configs/base.yml): with both, that is hybrid sharding (HSDP)."""

import numpy as np
import pytest

import topo
from conftest import run_cli
from topo.errors import TopoError
from topo.training.jax_mesh import layout_from_mesh
from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout
from topo.training.step import estimate_step, step_traffic


@pytest.mark.parametrize("mesh, want", [
    ("ici_fsdp=8,dcn_data=4", dict(tp=1, cp=1, pp=1, ep=1, dp=32, dp_sharding="zero3", dp_shard=8)),
    ("ici_tensor_parallelism=4,dcn_fsdp_parallelism=2", dict(tp=4, cp=1, pp=1, ep=1, dp=2, dp_sharding="zero3")),
    ("ici_data=8", dict(tp=1, cp=1, pp=1, ep=1, dp=8, dp_sharding="none")),
    # walk21: a dense weight is sharded over fsdp x expert (MaxText's 'embed' rule), so no data axis: all of dp
    ("ici_expert=8,ici_fsdp=2,dcn_pipeline=2", dict(tp=1, cp=1, pp=2, ep=8, dp=16, dp_sharding="zero3")),
    ("ici_context=2,ici_tensor=2,dcn_fsdp=4,dcn_data=2", dict(tp=2, cp=2, pp=1, ep=1, dp=8, dp_sharding="zero3",
                                                              dp_shard=4)),
])
def test_mesh_axes_become_layout_sizes(mesh, want):
    assert layout_from_mesh(mesh) == want


@pytest.mark.parametrize("mesh, needle", [
    ("ici_sequence=4", "does not model the sequence axis"),
    ("ici_bogus=4", "unknown mesh axis 'ici_bogus'"),
    ("fsdp=4", "write ici_<axis>=n or dcn_<axis>=n"),
    ("ici_fsdp=-1", "must be a whole number >= 1, got '-1'"),
    ("", "is empty, got ''"),  # walk3: an empty mesh was every size 1, one GPU, with no word
    (" , ", "is empty"),
])
def test_a_mesh_topo_cannot_take_is_named(mesh, needle):
    with pytest.raises(TopoError) as e:
        layout_from_mesh(mesh)
    assert needle in str(e.value)


def test_hybrid_sharding_shards_over_the_group_and_reduces_across_replicas():
    """dp 32 sharded over groups of 8: each GPU keeps 1/8 of the optimizer state (12 bytes per parameter); the
    gradient is reduce-scattered in its group and the 1/8 shard all-reduced over the 4 replicas."""
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model("llama3-8b")
    lay = make_layout(dp=32, global_batch=64, dp_sharding="zero1", dp_shard=8)
    check_layout(m, lay, gpus=32)
    r = estimate_step(f, m, lay)
    params = m.total_params
    assert r.memory.optimizer_bytes == pytest.approx(params * 12 / 8, rel=1e-6)
    full = estimate_step(f, m, make_layout(dp=32, global_batch=64, dp_sharding="zero1"))
    assert full.memory.optimizer_bytes == pytest.approx(params * 12 / 32, rel=1e-6)
    # a step's bytes: the per-bucket calls x their size
    t = {(x["collective"], x["groups"]): x["size_bytes"] * x["calls"]
         for x in step_traffic(m, lay) if x["dim"] == "dp"}
    assert t[("reduce_scatter", "dps")] == pytest.approx(params * 4, rel=1e-6)  # fp32 gradients
    assert t[("all_reduce", "dpr")] == pytest.approx(params * 4 / 8, rel=1e-6)
    g = map_layout(lay, 8, 1024)
    assert g.groups("dps").shape == (4, 8) and g.groups("dpr").shape == (8, 4)
    assert np.array_equal(g.groups("dps")[0], np.arange(8)) and np.array_equal(g.groups("dpr")[0], [0, 8, 16, 24])


def test_a_shard_group_that_does_not_divide_dp_or_shards_nothing_is_refused():
    m = load_model("llama3-8b")
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(dp=32, global_batch=64, dp_sharding="zero3", dp_shard=5), gpus=32)
    assert e.value.key == "dp_shard" and "does not divide dp 32" in str(e.value)
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(dp=32, global_batch=64, dp_sharding="none", dp_shard=8), gpus=32)
    assert e.value.key == "dp_shard" and "shards nothing" in str(e.value)


def test_cli_mesh_runs_and_conflicts_get_one_line():
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64"]
    ok = run_cli(*base, "--jax-mesh", "ici_fsdp=8,dcn_data=4")
    assert ok.returncode == 0, ok.stderr
    head = next(line for line in ok.stdout.splitlines() if " on dgx-h100-superpod: " in line)  # walk44: MaxText's
    assert "dp=32 ep=1 zero3 over groups of 8 (hybrid)" in head  # 1 micro-batch of 2 does not fit: line 2
    for extra, needle in ((["--tp", "2"], "drop --tp"), (["--search"], "drop --search")):
        bad = run_cli(*base, "--jax-mesh", "ici_fsdp=8,dcn_data=4", *extra)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --jax-mesh: "), bad.stderr
        assert needle in lines[0]


def test_an_axis_given_twice_is_refused_not_multiplied():
    """``ici_fsdp=8,ici_fsdp=128`` was read as fsdp 1,024 (the sizes multiplied); MaxText's config has one value per
    key, so a repeat is a typo (ici_fsdp and ici_fsdp_parallelism are the same key)."""
    for mesh in ("ici_fsdp=8,ici_fsdp=128", "ici_fsdp=8,ici_fsdp_parallelism=4"):
        with pytest.raises(TopoError) as e:
            layout_from_mesh(mesh)
        assert "ici_fsdp is given twice" in str(e.value)
    assert layout_from_mesh("ici_fsdp=8,dcn_fsdp=4")["dp"] == 32  # ICI x DCN of one axis still multiply


def test_cli_mesh_errors_name_the_mesh_and_regions_refuse_it():
    """A size the mesh set is named as --jax-mesh (it was named --dp, a flag the user never gave); across sites the
    mesh was silently ignored (the layout came from --tp/--pp/--dp), now it is refused in one line."""
    bad = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "1024", "--global-batch", "256",
                  "--jax-mesh", "ici_fsdp=8,dcn_data=4")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1, bad.stderr
    assert lines[0].startswith("error: --jax-mesh: ici_fsdp=8,dcn_data=4 multiplies to 8 x 4 = 32 GPUs, not the "
                               "1,024 of --gpus")  # walk21: was "dp: tp x cp x pp x dp = ...", no mesh axis named
    for extra in ([], ["--search"]):
        bad = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--global-batch", "768", *extra,
                      "--jax-mesh", "ici_tensor=8,dcn_data=192")
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --jax-mesh: "), bad.stderr
        assert "not --jax-mesh yet" in lines[0] and bad.stdout == ""


def test_cli_an_empty_mesh_is_an_error_not_no_mesh():
    """walk3: ``--jax-mesh ''`` ran as if no mesh was given (the layout's sizes from --dp or the default)."""
    bad = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--global-batch", "8", "--jax-mesh", "")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and bad.stdout == "" and len(lines) == 1
    assert lines[0].startswith("error: --jax-mesh: is empty"), bad.stderr


def test_cli_mesh_takes_a_layout_of_the_other_fields():
    """rev41: --jax-mesh refused --layout outright, so a JAX run could not say what its framework keeps (MaxText's
    base.yml weight_dtype float32: fp32 weights as the master copy, no bf16 copy, fp32 moments: 4 + 4 + 8 bytes per
    parameter). The mesh gives the sizes and sharding, the layout the rest; a size in both is one line.
    jaxmem48: MaxText's state is now the mesh's default; a layout (or --grad-bytes) still overrides it."""
    import json
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "64",
            "--jax-mesh", "ici_fsdp=8,dcn_data=4", "--json"]
    fp32 = json.loads(run_cli(*base, check=True).stdout)
    bf16 = json.loads(run_cli(*base, "--layout", "weight_bytes=2,optimizer_bytes_per_param=12", check=True).stdout)
    flag = json.loads(run_cli(*base, "--grad-bytes", "2", check=True).stdout)
    assert (fp32["layout"]["dp"], fp32["layout"]["dp_sharding"], fp32["layout"]["dp_shard"]) == (32, "zero3", 8)
    n = 8.03e9  # Llama 3 8B's parameters, sharded over the 8 fsdp ranks
    mem, mem0 = fp32["memory"], bf16["memory"]
    assert mem["weights_bytes"] == pytest.approx(4 * n / 8, rel=0.01)
    assert mem["gradients_bytes"] == pytest.approx(4 * n / 8, rel=0.01)
    assert mem["optimizer_bytes"] == pytest.approx(8 * n / 8, rel=0.01)
    assert mem0["weights_bytes"] == pytest.approx(2 * n / 8, rel=0.01)
    assert mem0["optimizer_bytes"] == pytest.approx(12 * n / 8, rel=0.01)
    assert flag["memory"]["gradients_bytes"] == pytest.approx(2 * n / 8, rel=0.01)  # a flag overrides it too
    assert mem["buffers_bytes"] == pytest.approx(mem0["buffers_bytes"])  # the gathered layers are bf16 either way
    assert fp32["step_time_s"] == pytest.approx(bf16["step_time_s"], rel=1e-9)  # so are the gathers: no step move
    text = run_cli(*base[:-1], check=True).stdout
    line = next(x for x in text.splitlines() if x.startswith("memory per GPU"))
    assert "state 4 + 4 + 8 B/param, MaxText's" in line and "gathers 2 B/param" in line
    for pairs, field in (("tp=2,weight_bytes=4", "tp"), ("dp_sharding=zero1", "dp_sharding")):
        bad = run_cli(*base[:-1], "--layout", pairs)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and lines == [f"error: --jax-mesh: gives {field} itself; drop {field} from "
                                                 f"--layout (or the mesh)"]
