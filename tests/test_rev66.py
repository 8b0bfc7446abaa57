"""rev66: review of the later merges of session 2026-12-06g (findings 268-275), each fix with a test seen failing
without it."""

import pytest

from topo.errors import TopoError
from topo.fabric.failures import check_failure
from topo.sweep import study_from_dict

# The bundled specs' tiers (topologies/*.toml): dgx-h100-superpod leaf, spine; meta-llama3-24k rtsw, ctsw, atsw.
TWO_NAMINGS = {"name": "two", "specs": ["dgx-h100-superpod", "meta-llama3-24k"], "compute": ["estimate"],
               "axes": {"collective": ["all_reduce"], "size": ["1G"], "fail": ["FAIL"]}}


def _study(fail: str):
    return study_from_dict({**TWO_NAMINGS, "axes": {**TWO_NAMINGS["axes"], "fail": [fail]}}, source="two.toml")


@pytest.mark.parametrize("fail", ["random:nic-rtsw:0.01", "random:rtsw-ctsw:0.01", "random:nic-leaf:0.01",
                                  "random:leaf-spine:0.01", "random:atsw:0.5"])
def test_a_sweeps_failure_may_name_a_level_of_any_of_its_specs(fail):
    """net66's check named the levels of the union of the specs' tier names as one fabric's (leaf, spine, rtsw,
    ctsw, atsw: nic-leaf, leaf-spine, spine-rtsw, ...), so meta-llama3-24k's own first level, nic-rtsw
    (Fabric.level_names: nic-<first tier>), was refused before any point ran. Each spec's levels are its own."""
    assert _study(fail).axes["fail"] == [fail]


def test_a_level_no_spec_has_is_refused_with_each_specs_own_levels():
    """The refusal lists each spec's levels (none made of two specs' tiers, as spine-rtsw was)."""
    with pytest.raises(TopoError) as got:
        _study("random:spine-rtsw:0.01")
    msg = got.value.message
    assert "unknown level or tier 'spine-rtsw'" in msg
    assert ("levels: nvlink, pcie, nic-leaf, leaf-spine, nic-rtsw, rtsw-ctsw, ctsw-atsw; "
            "tiers: leaf, spine, rtsw, ctsw, atsw") in msg


def test_check_failure_reads_each_fabrics_tiers():
    check_failure("random:nic-tor:0.1", [["leaf", "spine"], ["tor", "agg"]])
    with pytest.raises(TopoError):
        check_failure("random:spine-tor:0.1", [["leaf", "spine"], ["tor", "agg"]])


@pytest.mark.parametrize("argv, key", [
    (("describe", "two-site-h100", "--fail", "\u00b2:leaf0"), "--fail"),
    (("describe", "dgx-h100-superpod", "--set", "fabric.tiers[\u00b2].sharp=true"), "fabric.tiers"),
    (("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "64", "--skip-domains",
      "\u00b2"), "--skip-domains"),
])
def test_a_superscript_digit_is_one_line_not_an_internal_error(argv, key):
    """str.isdigit() is True for '\u00b2' (superscript two), which int() refuses: a site index, a list index in
    --set and --skip-domains each gave 'internal error (ValueError ...)'. isdecimal() is what int() reads."""
    from conftest import run_cli
    proc = run_cli(*argv)
    err = proc.stderr.strip()
    assert proc.returncode != 0 and len(err.splitlines()) == 1, err
    assert "internal error" not in err and key in err, err


@pytest.mark.parametrize("argv", [
    ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "64"),
    ("report", "dgx-h100-superpod", "-o", "never.html"),
])
def test_an_unknown_profile_is_named_by_its_flag(argv, tmp_path):
    """prof66's --profile on train and report: an unknown name said 'profile: ...' (the library's key), where
    estimate and a region's train say '--profile: ...'."""
    from conftest import run_cli
    proc = run_cli(*argv, "--profile", "nope", cwd=tmp_path)
    err = proc.stderr.strip()
    assert proc.returncode != 0 and len(err.splitlines()) == 1, err
    assert err.startswith("error: --profile: 'nope': unknown profile 'nope'; allowed: nccl, ideal"), err
    assert not (tmp_path / "never.html").exists()


@pytest.mark.parametrize("figure", ["fabric", "inventory", "oversubscription", "capex"])
def test_a_report_figure_that_prices_no_collective_refuses_profile(figure, tmp_path):
    """report --format png --figure fabric --profile X wrote the figure, the profile silently unused (as --plan and
    --scenario are refused where their figure does not use them)."""
    from conftest import run_cli
    proc = run_cli("report", "dgx-h100-superpod", "--format", "png", "--figure", figure, "--profile", "ideal",
                   "-o", "f.png", cwd=tmp_path)
    err = proc.stderr.strip()
    assert proc.returncode != 0 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: --profile: prices the report's collectives; --figure {figure} shows none"), err
    assert not (tmp_path / "f.png").exists()


def test_a_region_search_fills_each_share_past_its_first_gpu():
    """tidy66 made a job without dp fill the GPUs from --first-gpu past --skip-domains on one site (its search too)
    and in a region's step, but a region's --search still took each site's every GPU: two-site-h100's 1,536-GPU
    sites from GPU 512 were refused ("the job needs GPUs 512 to 2,047 ... the fabric has 1,536"). Each share is
    now the 1,024 GPUs from GPU 512, as one site's search fills them: 2,048 over the two sites."""
    import json

    from conftest import run_cli
    out = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--global-batch", "768", "--search", "--top", "1",
                  "--first-gpu", "512", "--json", check=True).stdout
    got = json.loads(out)
    assert got["gpus"] == 2048 and got["ranked"][0]["gpus"] == 2048


def test_the_steps_nvls_buffers_are_the_given_profiles(tmp_path):
    """prof66 resolved --profile once per engine; the step's NVLS buffers (memory) read it too
    (nvls_buffers.nvls_buffer_bytes: channels x directions x chunk x steps in flight x heads). A DP all-reduce over
    one DGX H100's 8 GPUs runs NVLS; a profile based on the fabric's own with nvls_channels doubled (Hopper's 16 ->
    32) holds exactly twice the bytes. No test failed when the step read the fabric's default profile here."""
    from topo.fabric.builders import build_fabric
    from topo.spec.load import load_spec
    from topo.training.model import load_model
    from topo.training.parallel import make_layout
    from topo.training.step import estimate_step

    path = tmp_path / "nv.toml"
    path.write_text('[profile]\nkind = "user"\nname = "nv-double"\nbase = "nccl"\n[nvls_channels]\nvalue = 32\n'
                    'source = "a test"\nfitted = true\nfitted_on = "a test log"\n')
    fabric = build_fabric(load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    model = load_model("llama3-8b")
    lay = make_layout(tp=1, dp=8, global_batch=64, dp_sharding="none")
    own = estimate_step(fabric, model, lay)
    mine = estimate_step(fabric, model, lay, profile=str(path))
    assert [c.algorithm for c in own.comm if c.dim == "dp"] == ["nvls"]
    assert own.memory.nvls_bytes > 0 and mine.memory.nvls_bytes == 2 * own.memory.nvls_bytes
