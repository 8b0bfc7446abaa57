"""The flex dispatcher (DeepEP / HybridEP) inside one NVLink domain lasts at least its kernel at its authors'
published rate plus the call's fixed part (topo/data/compute/ep_dispatch.toml; issue 29: the dispatch and combine
as Megatron-Core runs them).

deepseek-ai/DeepEP@94a9f8f6 (branch hybrid-ep) docs/README_Hybrid-EP.md, GB200, HybridEP, 32 SMs, 4,096 tokens of
hidden 7,168 per rank, top-8, 8 local experts, uniform routing (GB/s, algorithm bandwidth over the received bytes):
Torch API dispatch BF16 / FP8 / combine 545.71 / 455.35 / 568.94 (8 ranks) ... 479.02 / 361.13 / 447.89 (36);
Kernel Only 764.03 / 713.98 / 737.13 ... 632.31 / 489.27 / 596.99. Its test (tests/test_hybrid_ep.py) counts the
Torch API's call as the kernel, the copy of the received tokens and "misc = device_sync, update_flag, etc.", the
routing handle cached (no preprocessing).
"""

import math
import tomllib

import pytest

import topo
from topo.resources import data_dir
from topo.training.ep_dispatch import FP8_FACTOR, flex_dispatch_s, flex_fixed_s, flex_rates
from topo.training.ep_internode import internode_table
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

API = {8: (545.71, 455.35, 568.94), 16: (523.48, 444.67, 521.55), 24: (507.32, 403.20, 483.76),
       32: (484.22, 392.70, 464.54), 36: (479.02, 361.13, 447.89)}
KERNEL = {8: (764.03, 713.98, 737.13), 16: (706.95, 650.48, 666.26), 24: (665.97, 577.96, 639.80),
          32: (642.23, 538.86, 605.15), 36: (632.31, 489.27, 596.99)}


def _copy(gpu: str = "GB200"):
    km = gpu_compute(gpu).kernels
    return lambda b: memory_s(km, b)


def _test_ranks(ranks: int) -> float:
    """Mean distinct ranks of a token in HybridEP's test: 8 distinct experts of 8 x ranks drawn uniformly
    (deepseek-ai/DeepEP@94a9f8f6 hybrid-ep tests/test_hybrid_ep.py init_tensor: torch.randperm(num_of_experts)[:topk],
    NUM_OF_EXPERTS = 8 local x ranks), N (1 - C(E - 8, 8) / C(E, 8)): the experts cannot repeat, so more ranks than
    N (1 - (1 - 1/N)^8) (8 ranks: 5.433 against 5.251)."""
    return ranks * (1 - math.comb(8 * ranks - 8, 8) / math.comb(8 * ranks, 8))


def _received(ranks: int) -> float:
    """The test's received bytes of one BF16 call: one copy per token and destination rank, 4,096 tokens of
    7,168."""
    return 4096 * _test_ranks(ranks) * 7168 * 2.0


def test_rates_are_the_published_kernel_table():
    # deepseek-ai/DeepEP@94a9f8f6 (hybrid-ep) docs/README_Hybrid-EP.md, GB200, HybridEP, Kernel Only, 32 SMs:
    # 8 ranks: dispatch BF16 764.03, FP8 713.98, combine 737.13 GB/s; 36 ranks: 632.31, 489.27, 596.99;
    # B200 (Only Kernel Time, 16 SMs): 734.95, 599.27, 673.84; H100: Megatron-LM's one figure (368.9)
    assert flex_rates("GB200", 8) == pytest.approx({"dispatch": 764.03e9, "dispatch_fp8": 713.98e9,
                                                    "combine": 737.13e9})
    assert flex_rates("GB200", 12)["dispatch"] == pytest.approx(706.95e9)  # the next published size, 16
    assert flex_rates("GB200", 64)["combine"] == pytest.approx(596.99e9)  # beyond the table: the largest, 36
    assert flex_rates("B200", 8) == pytest.approx({"dispatch": 734.95e9, "dispatch_fp8": 599.27e9,
                                                   "combine": 673.84e9})
    assert flex_rates("H100", 8)["dispatch"] == pytest.approx(368.9e9)
    assert flex_rates("A100", 8) is None
    # H100 publishes no kernel figure: the framework's rate holds the whole call (a BF16 call: half dispatch, half
    # combine), no fixed part on top
    assert flex_dispatch_s("H100", 8, 1e9, 2, _copy("H100")) == pytest.approx(0.5 * (1 / 368.9 + 1 / 368.87))
    assert flex_dispatch_s("A100", 8, 1e9, 2, _copy()) is None


def test_deepep_has_its_own_published_rates():
    """DeepEP (``ep_flex_backend = "deepep"``) is priced at its own figures, not HybridEP's. GB200, 24 SMs, Torch
    API (deepseek-ai/DeepEP@94a9f8f6 hybrid-ep docs/README_Hybrid-EP.md, "DeepEP Performance Results"): 8 ranks
    dispatch BF16 512.72, FP8 350.97, combine 425.95 GB/s; 24 ranks 450.22, 351.05, 163.62. EP32 over MNNVL
    (NVIDIA/Megatron-LM@1d9edcf8 docs/discussions/deepseek-v3-gb200-optimization sec. 2.2.1): "about 400 GB/s"
    dispatch and "about 190 GB/s" combine, 24 SMs. B200, 8 ranks, 24 SMs: 494 / 349 / 420. A GPU without DeepEP
    figures (H100) takes HybridEP's; GB300 takes its twin GB200's (``same_as``) for either backend; a GPU without
    any (A100) none."""
    assert flex_rates("GB200", 8, "deepep") == pytest.approx({"dispatch": 512.72e9, "dispatch_fp8": 350.97e9,
                                                              "combine": 425.95e9})
    assert flex_rates("GB200", 24, "deepep")["combine"] == pytest.approx(163.62e9)
    assert flex_rates("GB200", 32, "deepep") == pytest.approx({"dispatch": 400e9, "dispatch_fp8": 351.05e9,
                                                               "combine": 190e9})
    assert flex_rates("GB200", 64, "deepep")["combine"] == pytest.approx(190e9)  # the largest published, 32
    assert flex_rates("B200", 8, "deepep") == pytest.approx({"dispatch": 494e9, "dispatch_fp8": 349e9,
                                                             "combine": 420e9})
    assert flex_rates("H100", 8, "deepep") == flex_rates("H100", 8, "hybridep")
    assert flex_rates("GB300", 32, "deepep") == flex_rates("GB200", 32, "deepep")
    assert flex_rates("A100", 32, "deepep") is None and flex_rates("A100", 32) is None
    # only the call through the framework is published: it holds the whole call, no fixed part. The study's EP32
    # call of 1 GB (BF16): half a dispatch at 400 GB/s, half a combine at 190 GB/s
    assert flex_fixed_s("GB200", 32, _copy(), "deepep") == {k: 0.0 for k in ("dispatch", "dispatch_fp8", "combine")}
    assert flex_dispatch_s("GB200", 32, 1e9, 2, _copy(), "deepep") == pytest.approx(0.5 * (1 / 400 + 1 / 190))
    with pytest.raises(ValueError, match="ep_flex_backend: is 'nccl'"):
        flex_rates("GB200", 32, "nccl")


def test_deepep_in_a_rack_is_slower_than_hybridep_at_ep32(nvl72):
    """The Megatron-LM GB200 study's EP32 DeepEP (about 400 / 190 GB/s, 24 SMs) against HybridEP's kernel at 32
    ranks (642.23 / 605.15 GB/s, 32 SMs, plus the call's fixed part): the same layout with ``ep_flex_backend =
    "deepep"`` takes each BF16 expert all-to-all at the mean of its bytes at 400 and at 190 GB/s, above the fabric's
    time, so DeepEP's step is the slower one."""
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=32, dp=32, etp=1, global_batch=128, micro_batch=4, seq_len=4096, precision="fp8",
                      ep_dispatcher="deepep")
    steps = {b: estimate_step(nvl72, model, lay.model_copy(update={"ep_flex_backend": b}), contention=False)
             for b in ("hybridep", "deepep")}
    (a2a,) = [c for c in steps["deepep"].comm if c.dim == "ep" and c.collective == "alltoall"]
    assert a2a.algorithm == "flex dispatcher rate"
    assert a2a.time_s / a2a.calls_per_step == pytest.approx(0.5 * a2a.size_bytes * (1 / 400e9 + 1 / 190e9), rel=1e-9)
    assert steps["deepep"].breakdown_s["ep"] > steps["hybridep"].breakdown_s["ep"]


@pytest.mark.parametrize("ranks", [8, 16, 24, 32, 36])
def test_at_the_published_shape_the_call_and_the_copy_are_the_published_api_time(ranks):
    """Megatron-Core's permute replaces the API's copy (priced with the MoE block): the call plus the copy at HBM
    rate is the published Torch API time, the mean of a BF16 dispatch and a combine, or an FP8 dispatch."""
    copy, received = _copy(), _received(ranks)
    api = 0.5 * (received / (API[ranks][0] * 1e9) + received / (API[ranks][2] * 1e9))
    assert flex_dispatch_s("GB200", ranks, received, 2, copy) + copy(2 * received) == pytest.approx(api, rel=1e-9)
    fp8 = received * FP8_FACTOR  # the published rate's bytes: 1 per element and a 4-byte scale per 128
    api_fp8 = fp8 / (API[ranks][1] * 1e9)
    assert flex_dispatch_s("GB200", ranks, received / 2, 1, copy) + copy(2 * fp8) == pytest.approx(api_fp8, rel=1e-9)


@pytest.mark.parametrize("ranks", [8, 16, 32, 36])
def test_the_fixed_part_inside_a_domain_does_not_scale_with_the_bytes(ranks):
    """As across domains (tests/test_training_ep_internode_call.py): an FP8 dispatch moves about half a BF16 one's
    bytes, yet once the copy is taken out the two leave the same part to 10% (8 ranks: 0.076 / 0.082 ms); 24 ranks,
    whose FP8 column is out of line in the table (-21% against 16 ranks' -4% at 16 SMs), differ by 27% and are left
    out. So the call's fixed part is a per-call cost, counted inside a domain as across (rev37)."""
    fixed = flex_fixed_s("GB200", ranks, _copy())
    assert fixed["dispatch_fp8"] == pytest.approx(fixed["dispatch"], rel=0.10)
    assert 0.03e-3 < min(fixed.values()) and max(fixed.values()) < 0.13e-3


def test_the_framework_call_is_the_kernel_and_the_copy_topo_prices_apart():
    """HybridEP's call through the framework (Torch API) is its kernel plus the copy of the received tokens out of
    its registered buffer (docs/Hybrid-EP_Implementation.md sec. 7.2; Megatron-Core's dispatch_with_permute makes
    that copy the permutation into the experts' order), which topo prices as the MoE block's ``permute``: at the
    published shape (GB200, 8 ranks, 32 SMs; 4,096 tokens of hidden 7,168, top-8, 8 local experts) the kernel's
    time plus topo's permutation fit inside the Torch API's time, so pricing the call at the Torch API rate besides
    the permutation counts the copy twice (issue 29, bw30)."""
    from topo.training.gpus import gpu_compute
    from topo.training.model import MoeSpec
    from topo.training.operators import block_ops, op_time_s
    base = load_model("deepseek-v3-671b")
    moe = MoeSpec.model_validate({**base.moe.model_dump(), "experts": 64, "shared_experts": 0,
                                  "max_nodes_per_token": None})
    model = type(base).model_validate({**base.model_dump(), "moe": moe})
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=8, seq_len=4096, precision="bf16", ep_dispatcher="deepep")
    gpu = gpu_compute("GB200")
    (permute,) = [op for op in block_ops(model, lay, "E") if op.name == "permute"]
    copy_s = op_time_s(permute, gpu, "bf16") / 2  # the dispatch's half (the combine's unpermute is the other)
    dests = 8 * (1 - math.comb(56, 8) / math.comb(64, 8))  # ranks a token reaches, its own included
    received = 4096 * dests * 7168 * 2
    kernel_s, torch_s = received / 764.03e9, received / 545.71e9
    assert kernel_s + copy_s < torch_s
    assert copy_s > 0.4 * (torch_s - kernel_s)  # the copy is most of what the framework's call adds


@pytest.fixture(scope="module")
def nvl72():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=1"]))


def test_an_expert_all_to_all_in_one_domain_runs_at_the_slower_of_fabric_and_call(nvl72):
    """Qwen3-30B-A3B on GB200 (one NVL72 rack, MBS 4): at EP 8 HybridEP's kernel (764 / 737 GB/s) plus the call's
    fixed part (0.076 / 0.038 ms) is about NVLink5's all-to-all of the 352 MB a call (0.527 against 0.525 ms), so
    the call lasts no less than that bound; at EP 32 the bound binds: a BF16 call at the kernel rates (642.23 /
    605.15 GB/s) plus the fixed part (0.868 ms against the fabric's 0.775), an FP8 dispatch at the kernel's FP8 rate
    (538.86 GB/s, its scales counted) plus its fixed part."""
    model = load_model("qwen3-30b-a3b")
    copy = _copy()

    def bound(ranks, size, api, kernel):  # the mean of a BF16 dispatch and a combine, closed form
        rec = _received(ranks)
        fixed = [rec * (1 / (a * 1e9) - 1 / (k * 1e9)) - copy(2 * rec) for a, k in zip(api, kernel)]
        return 0.5 * (size / (kernel[0] * 1e9) + size / (kernel[1] * 1e9) + sum(fixed))

    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, micro_batch=4, seq_len=4096, precision="fp8",
                      ep_dispatcher="deepep")
    (a2a,) = [c for c in estimate_step(nvl72, model, lay, contention=False).comm
              if c.dim == "ep" and c.collective == "alltoall"]
    assert a2a.time_s / a2a.calls_per_step >= bound(8, a2a.size_bytes, (545.71, 568.94), (764.03, 737.13)) * (1 - 1e-9)
    lay32 = make_layout(ep=32, dp=32, etp=1, global_batch=128, micro_batch=4, seq_len=4096, precision="fp8",
                        ep_dispatcher="deepep", ep_dispatch_bytes=1)
    r = estimate_step(nvl72, model, lay32, contention=False)
    a2as = sorted((c for c in r.comm if c.dim == "ep" and c.collective == "alltoall"), key=lambda c: c.size_bytes)
    fp8, bf16 = a2as  # the forward's FP8 dispatch: half the BF16 calls' bytes
    assert bf16.size_bytes == pytest.approx(2 * fp8.size_bytes)
    assert fp8.algorithm == bf16.algorithm == "flex dispatcher rate"
    assert bf16.time_s / bf16.calls_per_step == pytest.approx(
        bound(32, bf16.size_bytes, (484.22, 464.54), (642.23, 605.15)), rel=1e-9)
    r32 = _received(32) * FP8_FACTOR
    fixed32 = r32 * (1 / 392.70e9 - 1 / 538.86e9) - copy(2 * r32)
    with_scales = fp8.size_bytes * 2 * FP8_FACTOR  # topo's 1 byte an element, the rate's scales added
    assert fp8.time_s / fp8.calls_per_step == pytest.approx(with_scales / 538.86e9 + fixed32, rel=1e-9)
    plain = estimate_step(nvl72, model, lay32.model_copy(update={"ep_dispatcher": "alltoall"}), contention=False)
    assert not [c for c in plain.comm if c.algorithm == "flex dispatcher rate"]


def test_across_domains_the_in_domain_rate_does_not_apply():
    """EP 16 on DGX H100 (two NVLink domains): the in-domain rate does not apply; the call across domains has its
    own bound (tests/test_training_ep_internode_call.py)."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    lay = make_layout(ep=16, dp=16, etp=1, global_batch=64, seq_len=4096, precision="fp8", ep_dispatcher="deepep")
    r = estimate_step(fab, load_model("qwen3-30b-a3b"), lay, contention=False)
    (a2a,) = [c for c in r.comm if c.dim == "ep" and c.collective == "alltoall"]
    assert a2a.algorithm != "flex dispatcher rate" and a2a.domains_per_group == 2


def test_the_search_bound_reads_the_same_rate(nvl72):
    """The search's refinement from routed collectives (exposed_routed) gives the step's EP term with the
    dispatcher's rate, so a bound never exceeds the step it bounds."""
    from topo.training.comm import CommEngine
    from topo.training.gpus import gpu_compute
    from topo.training.mapping import default_placement, map_layout
    from topo.training.operators import stage_compute
    from topo.training.step import exposed_routed
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, micro_batch=4, seq_len=4096, precision="fp8",
                      ep_dispatcher="deepep")
    lay, _ = default_placement(lay, nvl72.spec.gpus_per_domain, nvl72.layout.num_gpus)
    eng = CommEngine(nvl72)
    r = estimate_step(nvl72, model, lay, engine=eng, contention=False)
    mapping = map_layout(lay, nvl72.spec.gpus_per_domain, nvl72.layout.num_gpus)
    sc = stage_compute(model, lay, gpu_compute(nvl72.spec.gpu))
    assert r.breakdown_s["ep"] > 0
    assert exposed_routed(eng, model, lay, mapping, sc)["ep"] == pytest.approx(r.breakdown_s["ep"], rel=1e-9)


def test_a_gpu_without_its_own_figures_takes_its_twins():
    """B300 and GB300 publish no HybridEP figures; each takes those of the GPU whose dispatcher path it shares
    (ep_dispatch.toml ``same_as``: B300 on B200's HGX baseboard, NVLink5, the same SM at 1,965 MHz, openxla/xla@4336d12e
    specs b200 / b300.txtpb; GB300 on GB200's NVL72), not the fabric's all-to-all alone; a GPU with neither (A100)
    stays unbounded. B200 Only Kernel Time, 16 SMs: 734.95 / 599.27 / 673.84 GB/s (deepseek-ai/DeepEP@94a9f8f6
    hybrid-ep docs/README_Hybrid-EP.md)."""
    assert flex_rates("B300", 8) == pytest.approx({"dispatch": 734.95e9, "dispatch_fp8": 599.27e9,
                                                   "combine": 673.84e9})
    assert flex_rates("GB300", 36)["combine"] == pytest.approx(596.99e9)
    copy = _copy("B300")
    assert flex_fixed_s("B300", 8, copy)["dispatch"] > 0
    assert flex_dispatch_s("B300", 8, 1e9, 2, copy) > 1e9 / 734.95e9
    assert flex_rates("A100", 8) is None


def test_both_dispatcher_files_name_a_gpus_twin_in_one_shape():
    """One rule for a GPU without its own figures (issue 29, rev58's review): each dispatcher data file names its
    twins once, in a file-level ``[same_as]`` table (``gpus``, with its status and source), read by one function
    (:func:`topo.training.ep_dispatch.figures_for`) for every backend's table. ep_dispatch.toml: B300 -> B200,
    GB300 -> GB200, for HybridEP's and DeepEP's tables alike; ep_internode.toml: H100 -> H800 (DeepEP V1's figures
    were measured on H800, deepseek-ai/DeepEP@567632dd README.md), while HybridEP's own H100 table stands, and
    B200 -> H100 (DGX B200 scales out on DGX H100's ConnectX-7 400 Gb/s a GPU: diff95, findings 395)."""
    files = {"ep_dispatch.toml": {"B300": "B200", "GB300": "GB200"},
             "ep_internode.toml": {"H100": "H800", "B200": "H100"}}
    for name, twins in files.items():
        data = tomllib.loads((data_dir("compute") / name).read_text(encoding="utf-8"))
        assert data["same_as"]["gpus"] == twins, name
        assert data["same_as"]["status"] == "assumption" and data["same_as"]["source"].strip(), name
        for section, table in data.items():
            assert not any(k.startswith("same_as") for k in table), (name, section)  # no second form
            for gpu, figures in table.items():
                assert not (isinstance(figures, dict) and "same_as" in figures), (name, section, gpu)
    assert flex_rates("GB300", 24, "deepep") == flex_rates("GB200", 24, "deepep") != flex_rates("GB200", 24)
    assert internode_table("H100", 32, "deepep") == internode_table("H800", 32, "deepep") is not None
    assert internode_table("H100", 32)["dispatch"] != internode_table("H100", 32, "deepep")["dispatch"]
    assert internode_table("H800", 32) is None and internode_table("B300", 32, "deepep") is None


def test_a_b300_nodes_expert_all_to_all_is_bound_by_b200s_call():
    """Nemotron 3 Nano's recipe on one DGX B300 (EP8 in the node, MBS 4, 8,192 tokens, HybridEP with 16 SMs:
    NVIDIA-NeMo/Megatron-Bridge v0.5.0 recipes/nemotronh/nemotron_3_nano.py line 107): each BF16 call lasts at least
    B200's kernel rates plus the call's fixed part (the dispatch and combine's mean), the closed form below; before
    the twin the call was the fabric's alone and faster than that."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["gpu=B300", "scale_up.bandwidth_per_gpu=900 GB/s",
                                                                 "cluster.num_units=1"]))
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, micro_batch=4, seq_len=8192, precision="fp8",
                      ep_dispatcher="deepep")
    r = estimate_step(fab, load_model("nemotron-3-nano-30b-a3b"), lay, contention=False)
    (a2a,) = [c for c in r.comm if c.dim == "ep" and c.collective == "alltoall"]
    copy, rec = _copy("B300"), _received(8)  # B200's published shape
    fixed = [rec * (1 / (a * 1e9) - 1 / (k * 1e9)) - copy(2 * rec) for a, k in ((535.94, 734.95), (530.86, 673.84))]
    bound = 0.5 * (a2a.size_bytes / 734.95e9 + a2a.size_bytes / 673.84e9 + sum(fixed))
    assert a2a.algorithm == "flex dispatcher rate"
    assert a2a.time_s / a2a.calls_per_step == pytest.approx(bound, rel=1e-9)


def test_h100_in_one_node_is_a_kernel_rate_so_the_copy_is_charged_once():
    """NVIDIA/Megatron-LM@1d9edcf8 docs/discussions/deepseek-v3-gb200-optimization images/image6.png, DGX H100, 16
    CUDA blocks: 368.9 / 368.87 GB/s. The image's other panels, same harness, read against DeepEP's README at
    94a9f8f6 (docs/README_Hybrid-EP.md): GB200 NVL36, 32 blocks, 714.66 / 657.72 GB/s, above the README's 36-rank,
    32-SM Kernel Only 632.31 / 596.99 and far above its Torch API 479.02 / 447.89 (which hold the copy); 4x DGX
    H100, 8 blocks, algorithm over NIC bus bandwidth 121.3 / 44.2 = 2.74, the test's received bytes over its
    remote-node RDMA bytes at 32 ranks, 256 experts, top-8 (2.68). So the H100 figure is a kernel's rate: no copy in
    it, the copy charged once, as the permutation; no fixed part known."""
    assert 714.66 > KERNEL[36][0] > API[36][0] and 657.72 > KERNEL[36][2] > API[36][2]
    ranks = 32 * (1 - math.comb(248, 8) / math.comb(256, 8))  # distinct destination ranks of a token: 7.27
    nodes = 4 * (1 - math.comb(192, 8) / math.comb(256, 8))  # distinct destination nodes: 3.61, 3/4 of them remote
    assert 121.3 / 44.2 == pytest.approx(ranks / (nodes * 3 / 4), rel=0.03)
    t = tomllib.loads((data_dir("compute") / "ep_dispatch.toml").read_text())["flex"]["H100"]
    assert t["kernel_dispatch_GBps"] == [368.9] and t["kernel_combine_GBps"] == [368.87]
    assert "dispatch_GBps" not in t  # no Torch API figure on H100 in one node
    assert flex_fixed_s("H100", 8, _copy("H100")) == {k: 0.0 for k in ("dispatch", "dispatch_fp8", "combine")}


def test_every_call_rate_says_whether_it_holds_the_copy():
    """Each table with a call's (Torch API) rate states ``api_includes_copy``: HybridEP's yes ("dispatch =
    dispatch_kernel + d2d + misc", deepseek-ai/DeepEP@94a9f8f6 tests/test_hybrid_ep.py), DeepEP's no (its kernel
    writes the output itself). A call's rate alone that holds the copy is priced with the copy taken out:
    1 GB at 500 GB/s is 2 ms; less a 0.5 ms copy, 1.5 ms, i.e. 666.7 GB/s."""
    from topo.training.ep_dispatch import rate_and_fixed_s
    for name in ("ep_dispatch.toml", "ep_internode.toml"):
        data = tomllib.loads((data_dir("compute") / name).read_text())
        for section, table in data.items():
            for gpu, t in table.items():
                if isinstance(t, dict) and any(k in t for k in ("dispatch_GBps", "combine_GBps")):
                    assert isinstance(t.get("api_includes_copy"), bool), (name, section, gpu)
                    assert t["api_includes_copy"] == (section in ("flex", "internode")), (name, section, gpu)
    assert rate_and_fixed_s(1e9, 500e9, None, 0.5e-3) == pytest.approx((1e9 / 1.5e-3, 0.0))
    assert rate_and_fixed_s(1e9, 500e9, None, 0.0) == pytest.approx((500e9, 0.0))
    # with the kernel's rate: the fixed part is the call less the kernel less the copy it holds
    assert rate_and_fixed_s(1e9, 500e9, 1000e9, 0.5e-3) == pytest.approx((1000e9, 0.5e-3))
    with pytest.raises(ValueError, match="api_includes_copy"):
        rate_and_fixed_s(1e9, 500e9, None, 3e-3)
