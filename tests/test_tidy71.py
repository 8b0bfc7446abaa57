"""tidy71: the reviews' leftovers (rev69, rev70, plan70), each one rule in one place (findings section 300 of
the session of 2026-12-07a)."""

import copy

import pytest

from topo.cli.main import main
from topo.errors import TopoError
from topo.training import ep_dispatch, ep_internode
from topo.training.ep_dispatch import flex_dispatch_s
from topo.training.ep_internode import internode_call_s
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s


def _copy(gpu):
    km = gpu_compute(gpu).kernels
    return lambda b: memory_s(km, b)


def _edited(monkeypatch, module, loader, edit):
    data = copy.deepcopy(getattr(module, loader)())
    edit(data)
    monkeypatch.setattr(module, loader, lambda: data)


def test_an_edited_dispatcher_table_is_one_line_naming_the_file_the_key_and_the_value(monkeypatch):
    """rev70 Left 3: a dispatcher table's ``api_includes_copy`` that is not a boolean, or a call's rate no longer
    than the copy it says it holds, is the project's error naming the data file, the table's key, the value and what
    is allowed (a ``TopoError``, which the CLI prints as one line), not a plain ``ValueError``."""
    _edited(monkeypatch, ep_dispatch, "_tables", lambda d: d["flex"]["GB200"].update(api_includes_copy="yes"))
    with pytest.raises(TopoError) as err:
        flex_dispatch_s("GB200", 8, 1e8, 2, _copy("GB200"))
    assert str(err.value) == ("ep_dispatch.toml: flex.GB200.api_includes_copy: is 'yes' in a table with a call's "
                              "rate: allowed true or false (whether that rate holds the copy out of the buffer)")
    # GB300 takes GB200's figures: the key named is the table read
    with pytest.raises(TopoError, match="^ep_dispatch.toml: flex.GB200.api_includes_copy: "):
        flex_dispatch_s("GB300", 8, 1e8, 2, _copy("GB300"))


def test_a_call_rate_no_longer_than_its_copy_is_one_line(monkeypatch):
    """DeepEP's GB200 table publishes the call's rate alone; said to hold the copy at a rate of 10,000 GB/s its
    call at the published shape (4,096 tokens x 7,168 x 2 B x the destinations) is shorter than the copy itself."""
    def edit(d):
        d["flex_deepep"]["GB200"].update(api_includes_copy=True, dispatch_GBps=[1e4] * 4, tokens=4096, hidden=7168,
                                         topk=8, local_experts=8)  # route79: the shape states its local experts
    _edited(monkeypatch, ep_dispatch, "_tables", edit)
    with pytest.raises(TopoError) as err:
        flex_dispatch_s("GB200", 32, 1e8, 2, _copy("GB200"), "deepep")
    assert str(err.value).startswith("ep_dispatch.toml: flex_deepep.GB200.dispatch_GBps: a published call of ")
    assert "no longer than the copy it holds" in str(err.value)
    assert "allowed: a rate whose call outlasts that copy, or api_includes_copy = false" in str(err.value)


def test_the_internode_table_names_its_file(monkeypatch):
    _edited(monkeypatch, ep_internode, "_data", lambda d: d["internode"]["H100"].update(api_includes_copy=1))
    with pytest.raises(TopoError, match=r"^ep_internode.toml: internode.H100.api_includes_copy: is 1 in a table"):
        internode_call_s("H100", 16, 1e8, 2, _copy("H100"))


def test_an_unknown_backend_names_the_layout_key():
    with pytest.raises(TopoError, match=r"^ep_flex_backend: is 'nccl': allowed hybridep, deepep$"):
        ep_dispatch.gpu_figures("GB200", "nccl")


def test_train_says_the_edited_table_in_one_line(monkeypatch, capsys):
    """The same through ``topo train``: exit 2 and the one line, no traceback."""
    _edited(monkeypatch, ep_dispatch, "_tables", lambda d: d["flex"]["GB200"].update(api_includes_copy="yes"))
    rc = main(["train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "256",
               "--dp", "8", "--ep", "8", "--layout", "ep_dispatcher=deepep"])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("error: ep_dispatch.toml: flex.GB200.api_includes_copy: is 'yes' in a table with a "
                               "call's rate: allowed true or false (whether that rate holds the copy out of the "
                               "buffer)\n")


REGION = ('name = "mixnet"\ndescription = "an InfiniBand site and a RoCE site (a test region)"\n'
          '[[sites]]\nname = "east"\nspec = "dgx-h100-superpod"\nset = ["cluster.num_units=1"]\n'
          '[[sites]]\nname = "west"\nspec = "dgx-h100-superpod"\nset = ["cluster.num_units=1", '
          '"fabric.technology=roce"]\nprofile = "{west}"\n'
          '[interconnect]\ntopology = "mesh"\ndistance_km = 40\nlatency_per_km = "4.9 us"\nequipment_latency = "50 us"\n'
          'waves = 16\nwave_rate = "800 Gb/s"\nattach = "top"\n')


@pytest.mark.parametrize("west, said", [
    ("hopper+infiniband_ndr", "site west: 'hopper+infiniband_ndr' is a profile of infiniband_ndr, but the site's "
                              "network is roce"),
    ("nosuch", "site west: "),
    ("missing.toml", "site west: missing.toml: "),
])
def test_a_site_profile_key_refused_names_the_region_file_and_the_entry(tmp_path, west, said):
    """rev70 Left 5: a site's ``profile`` key refused is named as a spec's errors are: the region file, then the
    ``[[sites]]`` entry's key (``sites[1].profile``, as ``sites[1].power_limit_MW``), then the site; a missing
    profile file named after the site."""
    from topo.fabric.region import build_region
    from topo.engine.region_estimate import check_region_profile
    path = tmp_path / "mixnet.toml"
    path.write_text(REGION.replace("{west}", west))
    with pytest.raises(TopoError) as err:
        check_region_profile(build_region(str(path)), None)
    assert str(err.value).startswith(f"{path}: sites[1].profile: {said}"), str(err.value)


def test_a_peer_of_another_profile_bounds_nvls_with_its_own():
    """rev70 Left 2: a peer search of an equal spec shared ``nvls_bounds``, whose values read the profile
    (:func:`~topo.training.nvls_buffers.nvls_bound_bytes`: channels x directions x chunk x steps x heads); since reg70
    two equal-spec sites may have different profiles. A peer whose profile runs twice the NVLS channels bounds the
    same layout with its own figure (twice the first's, the closed form's one factor); a peer of the same profile
    still shares the cache."""
    import dataclasses

    import topo
    from topo.engine.profiles import resolve_profile
    from topo.training.comm import CommEngine
    from topo.training.model import load_model
    from topo.training.parallel import make_layout
    from topo.training.search import _keys, _Search
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    assert fabric.spec.nvls
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    own = resolve_profile(None, fabric)
    wide = dataclasses.replace(own, nvls_channels=2 * own.nvls_channels)
    s = _Search(fabric, load_model("llama3-8b"), CommEngine(fabric, profile=own), gpu, 5,
                dict(convention="6n", efficiency=None), None, None)
    same, other = s.peer(fabric, None, own), s.peer(fabric, None, wide)
    assert same.nvls_bounds is s.nvls_bounds and same.mem_cache is s.mem_cache is other.mem_cache
    lay = make_layout(tp=8, dp=4, global_batch=32, micro_batch=1, sequence_parallel=False)  # TP all-reduces
    for x in (s, other):
        x.bound_of(lay, _keys(lay))
    (first,), (second,) = s.nvls_bounds.values(), other.nvls_bounds.values()
    assert first > 0 and second == 2 * first


def test_site_ready_takes_every_sites_compute():
    """rev70 Left 6: ``SiteReady.computes_s`` defaulted to ``()``, which ``_pp`` zips with the steps into nothing and
    ``max()``es; it is now required and of one length with the steps and windows."""
    from topo.training.multisite import SiteReady
    with pytest.raises(TypeError):
        SiteReady((1.0,), (0.5,))
    with pytest.raises(ValueError, match="one entry a site"):
        SiteReady((1.0, 2.0), (0.5, 0.5), (0.8,))
    assert SiteReady((1.0, 2.0), (0.5, 0.5), (0.8, 1.6)).last_ready_s == 1.5


def test_plan_without_collectives_names_the_cut(capsys):
    """rev69 Left (d): ``topo plan meta-llama3-24k --fail pod:0 --no-collectives`` said its network figures are
    the failed fabric's (bisection 66 of 88 TB/s, right as a cut) but not that
    pod 0's 3,072 GPUs reach none of the other 21,504 (24,576 - 3,072); the note now says so, in the words of
    ``topo.fabric.cut`` (one rule with describe, estimate and the report)."""
    rc = main(["plan", "meta-llama3-24k", "--fail", "pod:0", "--no-collectives"])
    out = capsys.readouterr().out
    assert rc == 0
    assert ("note: with failed parts (pod:0): GPUs 0 to 3,071 (pod 0) are cut off: no working path joins them to the "
            "other 21,504 GPUs; the network figures (bisection, cross-pod collectives) are those of the failed "
            "fabric") in out, out[-1500:]
    main(["plan", "meta-llama3-24k", "--fail", "ctsw3", "--no-collectives"])  # a failure that cuts nothing off
    assert "note: with failed parts (ctsw3): the network figures" in capsys.readouterr().out


def test_rate_scale_is_an_assumption_and_the_reconciliation_says_the_scale(capsys):
    """rev69 Left (e)/(f): ``plan.reliability.rate_scale`` is a user's knob, not a published figure (status
    assumption); with it at 2 the reconciliation line's network row is twice Llama 3's (35 interruptions in 54 days
    on 16,384 GPUs: 35 / 54 x 1,024 / 16,384 = 0.0405/day on dgx-h100-superpod's 1,024 GPUs, 0.0810 at x 2), and
    the line says so."""
    from topo.plan.catalog import load_catalog
    scale = load_catalog().reliability.rate_scale
    assert scale.status == "assumption" and scale.value == 1
    main(["plan", "dgx-h100-superpod", "--no-collectives", "--set", "plan.reliability.rate_scale=2"])
    out = capsys.readouterr().out
    assert f"Llama 3's network row x 2 (plan.reliability.rate_scale) gives {2 * 35 / 54 * 1024 / 16384:.1f}/day" \
        in out, out
    main(["plan", "dgx-h100-superpod", "--no-collectives"])
    assert f"; Llama 3's network row gives {35 / 54 * 1024 / 16384:.1f}/day here" in capsys.readouterr().out


def test_report_plan_shows_the_jobs_idle_gpus(tmp_path, capsys):
    """plan70 Left (c): ``topo report --plan --train M --layout L`` planned without the job, so its goodput row did
    not say that a 512-GPU job on dgx-h100-superpod's 1,024 GPUs leaves 504 idle beside its 8 hot spares (one server,
    plan70's figure); it now plans with the job as ``topo plan --model`` does, and the row says the words ``plan``
    prints."""
    out = tmp_path / "r.html"
    assert main(["report", "dgx-h100-superpod", "--plan", "--train", "llama3-8b", "--layout",
                 "tp=8,dp=64,global_batch=256", "-o", str(out)]) == 0
    page = out.read_text()
    assert "on the job&#x27;s 512 GPUs (8 held as hot spares, 504 idle)" in page
    main(["plan", "dgx-h100-superpod", "--model", "llama3-8b", "--layout", "tp=8,dp=64,global_batch=256",
          "--no-collectives"])
    text = capsys.readouterr().out
    assert "FLOP effective on the job's 512 GPUs (8 held as hot spares, 504 idle)" in text
    goodput = text.split("goodput   ")[1].split("%")[0]
    assert f"goodput</td><td>{goodput}% (sync checkpoints)" in page  # the job's goodput, not the cluster's


def test_it_power_says_a_count_sized_without_the_jobs_step(capsys):
    """plan70 Left (d): with ``--it-power --model``, a count the job's layout does not fit is sized with the
    catalog's MFU, silently. h100-100k at 49.5 MW, llama3-8b as tp=8, global batch 8,960: 20 pods (35,840 GPUs, dp
    4,480, 8,960 = 2 x 4,480) fit, 21 pods (37,632 GPUs) would run dp 4,704, which 8,960 sequences do not fill,
    so "21 would draw" is the catalog's MFU 0.35's figure (workload.toml: SemiAnalysis), not the job's 0.228: the
    note says so."""
    main(["plan", "h100-100k", "--it-power", "49.5MW", "--model", "llama3-8b", "--layout", "tp=8,global_batch=8960",
          "--no-collectives"])
    out = capsys.readouterr().out
    assert ("the budget binds: 21 would draw 52.01 MW (at MFU 0.35, plan.workload.mfu: the job's layout does not "
            "fit 21 pods, so that count has no step of the job to size with)") in out, out[-2000:]


def test_a_blockwise_weight_is_held_and_gathered_as_one_tensor_kind_on_blackwell():
    """rev69 Left (a): on Blackwell the memory priced a blockwise recipe's kept weight as an MXFP8Tensor (2.0625
    B/param) while the gather carried it as a Float8BlockwiseQTensor. Transformer Engine at the pinned
    d0067d0da6cb01811b8072a7d304f0e00344ce2b keeps the blockwise tensor on Blackwell and converts only its scales for
    each GEMM (pytorch/csrc/extensions/gemm.cpp:312-322, "Emulate the FP8 block scaling recipe with MXFP8 on Blackwell
    and newer"; extensions/swizzle.cpp:303-357 convert_block_scaling_to_mxfp8_tensor: the MXFP8 view takes the same
    data pointer, its swizzled E8M0 scales allocated for the GEMM only; PR #2157), and Float8BlockQuantizer keeps its
    row- and column-wise data whatever the GPU (csrc/quantizer.cpp:1061, no non-TN test). So one kind on both
    generations: 1 + 1 + 2 x 4 / (128 x 128) = 2.00048828125 B/param, gathered at 1 byte."""
    from topo.training.fp8_params import fp8_param_bytes, gathers_in_fp8
    from topo.training.parallel import make_layout
    lay = make_layout(tp=1, dp=8, global_batch=64, precision="fp8", fp8_recipe="blockwise", fp8_param_gather=True)
    assert fp8_param_bytes(lay, "blackwell") == fp8_param_bytes(lay, "hopper") == 1 + 1 + 2 * 4 / (128 * 128)
    assert gathers_in_fp8(lay)
    mx = lay.model_copy(update={"fp8_recipe": "mxfp8"})
    assert fp8_param_bytes(mx, "blackwell") == 1 + 1 + 2 / 32 and not gathers_in_fp8(mx)
