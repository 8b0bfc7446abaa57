"""The cuDNN version a run's attention runs: the release -> cuDNN lookup (topo/data/compute/cudnn_releases.toml),
the published table a version reads (kernels.toml [attention.<table>.cudnn]), and attention times at a version
against cuDNN's own published milliseconds (NVIDIA/cudnn-frontend's SDPA benchmark history)."""

import sys
import tomllib
from pathlib import Path

import pytest

from topo.errors import TopoError
from topo.training.cudnn import NEWEST, parse_version, release_cudnn, release_entry, table_version
from topo.training.gpus import gpu_compute
from topo.training.kernels import _table, attention_rate_flops, cudnn_factor
from topo.training.parallel import make_layout

ROOT = Path(__file__).resolve().parent.parent
RELEASES = tomllib.loads((ROOT / "topo" / "data" / "compute" / "cudnn_releases.toml").read_text())["release"]


def test_each_release_names_its_containers_cudnn_with_a_source():
    """NVIDIA-NeMo/Megatron-Bridge@2075a5b8 docs/releases/software-versions.md: NeMo 25.09 cuDNN 9.11.0.98, 25.11
    9.13.1.26, 26.02 9.18.0.50, 26.04 9.20.0.48-1; @067f987d: 26.06 9.21.1.3. A run's software string names the
    release (a patch release reads its release's; MLPerf's "NeMo 25.04 container" its release's); a string that
    names no listed release has none (the layout's default, the newest table)."""
    assert release_cudnn("NeMo 25.09") == "9.11.0.98"
    assert release_cudnn("NeMo 25.11") == "9.13.1.26"
    assert release_cudnn("NeMo 26.02.01") == "9.18.0.50"
    assert release_cudnn("NeMo 26.04") == "9.20.0.48"
    assert release_cudnn("NeMo 26.06 (Megatron-Bridge model card)") == "9.21.1.3"
    assert release_cudnn("MLPerf Training v6.0 (NeMo 26.04 container; Megatron-Bridge 26.04-alpha.rc2)") == "9.20.0.48"
    # before 25.09: 25.09's version as an upper bound
    entry = release_entry("NeMo 25.04.01 (DGXC 25.05.04)")
    assert entry["cudnn"] == "9.11.0.98" and entry["at_most"] and entry["status"] == "bound"
    assert release_cudnn("MLPerf Training v5.0 (NeMo 25.04 container)") == "9.11.0.98"
    for software in ("Megatron-LM dev (commit not stated)", "NeMo AutoModel", "NeMo 26.08", "DeepSeek HAI-LLM",
                     "Megatron-LM main@1e057005", "PyTorch 2.4 (no container)"):
        assert release_cudnn(software) is None, software
    for name, e in RELEASES.items():
        parse_version(e["cudnn"])
        assert e["status"] in ("published", "bound") and e["source"], name
        assert e.get("at_most", False) == (e["status"] == "bound"), name


def test_a_named_ngc_container_reads_its_cudnn():
    """A software string that names an NGC PyTorch / JAX container, a PyTorch base by its NGC banner, or the
    ModelZoo's own Dockerfile reads that container's entry (cudnn_releases.toml). MLPerf Training v5.1's SYSJSON
    (mlcommons/training_results_v5.1@441d65f4): "PyTorch NVIDIA Release 25.01" cuDNN 9.7.0.66 (Nebius
    nebius_h200_n128 llama31_405b), "PyTorch NVIDIA Release 25.08" 9.12.0.46 (HPE XD670 H200 llama31_8b);
    yanring/Megatron-MoE-ModelZoo@798dfb5 dockers/H100.Dockerfile installs 9.11.0.92. JAX 25.10 is bounded by
    9.16.0.29 (JAX-Toolbox's install-cudnn.sh takes the newest cuDNN at build), PyTorch 26.04 by NeMo 26.06's
    9.21.1.3 (Megatron-Bridge@067f987d)."""
    assert release_cudnn("MLPerf Training v5.1 (PyTorch 25.01 container, NeMo v2.4.0)") == "9.7.0.66"
    assert release_cudnn("MLPerf Training v6.0 (PyTorch 25.08 container, NeMo@eddf23fc)") == "9.12.0.46"
    assert release_cudnn("MLPerf Training v5.1 (NVIDIA Release 25.08 NeMo container)") == "9.12.0.46"
    assert release_entry("PyTorch 25.01 container")["status"] == "published"
    assert release_cudnn("Megatron-LM dev (Megatron-MoE-ModelZoo@798dfb50)") == "9.11.0.92"
    # a dated commit: the newest cuDNN released by 2024-04-09 is 9.0.0 (redistrib_9.0.0.json 2024-02-07, 9.1.0's
    # 2024-04-12), older than every Hopper set: it reads 9.1's (cudnn-frontend@b740542, 8K forward 573 TFLOP/s)
    assert release_cudnn("MaxText@efb6d9e4 (2024-04-09; JAX version not stated)") == "9.0.0"
    assert cudnn_factor("", "9.0.0", 8192, False) == pytest.approx(cudnn_factor("", "9.1.0", 8192, False))
    for software, want in (("JAX-Toolbox MaxText (nvcr.io/nvidia/jax:25.10-maxtext)", "9.16.0.29"),
                           ("MLPerf Training v6.0 (PyTorch 26.04 container, Megatron-Bridge)", "9.21.1.3")):
        entry = release_entry(software)
        assert entry["cudnn"] == want and entry["at_most"] and entry["status"] == "bound", software
    # on a H100 a 2025 PyTorch container reads cuDNN 9.4's set (hdim 128 causal 8K backward 461.89 TFLOP/s,
    # NVIDIA/cudnn-frontend@61100c8 benchmark/benchmark_results.csv), not the default's 9.19 (541 at 8K)
    old = cudnn_factor("", release_cudnn("MLPerf Training v6.0 (PyTorch 25.08 container, NeMo@eddf23fc)"), 8192, True)
    assert old == pytest.approx(cudnn_factor("", "9.4.0", 8192, True))
    assert old < 0.9 * cudnn_factor("", NEWEST, 8192, True)


def test_a_version_reads_the_nearest_older_published_table():
    """Between published tables the nearest older one (by major.minor), the oldest below them all, the newest
    above (kernels.toml [attention.blackwell.cudnn]: 9.10, 9.13, 9.17, 9.18, 9.19 and the table's own 9.22)."""
    bw = _table()["attention"]["blackwell"]["cudnn"]
    published = [*bw["versions"], bw["newest"]]
    assert table_version("9.11.0.98", published) == "9.10"
    assert table_version("9.13.1.26", published) == "9.13"
    assert table_version("9.18.0.50", published) == "9.18"
    assert table_version("9.20.0.48", published) == "9.19"
    assert table_version("9.21.1.3", published) == "9.19"
    assert table_version("9.22", published) == "9.22"
    assert table_version("9.25.0", published) == "9.22"
    assert table_version("9.8.0", published) == "9.10"  # older than every table: the oldest
    gb300 = _table()["attention"]["GB300"]["cudnn"]
    assert table_version("9.11.0.98", [*gb300["versions"], gb300["newest"]]) == "9.13"
    # the layout's default is the newest table of every generation that has versions
    assert bw["newest"] == gb300["newest"] == NEWEST == make_layout(tp=1, dp=1, global_batch=1).cudnn_version


def test_b200_attention_at_cudnn_9_13_is_its_published_time():
    """NVIDIA/cudnn-frontend@0b1577c benchmark/sdpa_benchmark_training/artifacts/
    sdpa_fp8_benchmark_results_NVIDIA_B200.csv, bf16 rows (cuDNN 9.13.1 through the frontend's graph, B200, batch 1,
    128 / 8 heads, hdim 128, causal): 4,096 tokens forward 0.482 ms (1,141 TFLOP/s), backward 1.650 ms (833).
    A B200 at cuDNN 9.13.1 runs them at those rates times its sustained clock: the GB200 9.22 table's fraction
    times the version's ratio at hdim 128 causal, which is the published rate itself."""
    b = gpu_compute("B200").kernels
    s = b.sustained
    fwd_flops = 4 * 1 * 128 * 4096 ** 2 / 2 * 128  # FlashAttention's convention: causal half of 4 b h s^2 d
    assert fwd_flops / 0.482e-3 == pytest.approx(1141e12, rel=2e-3)  # the convention on the source's own time
    fwd = fwd_flops / attention_rate_flops(b, 128, 4096, True, False, cudnn="9.13.1.26")
    bwd = 2.5 * fwd_flops / attention_rate_flops(b, 128, 4096, True, True, cudnn="9.13.1.26")
    assert fwd * s == pytest.approx(0.482e-3, rel=3e-3)
    assert bwd * s == pytest.approx(1.650e-3, rel=3e-3)
    # 9.10.2 at 8,192 (NVIDIA/cudnn-frontend@9793df5, the same file: 1,248 / 988 TFLOP/s)
    assert attention_rate_flops(b, 128, 8192, True, False, cudnn="9.10") == pytest.approx(1248e12 * s)
    assert attention_rate_flops(b, 128, 8192, True, True, cudnn="9.11.0.98") == pytest.approx(988e12 * s)
    # the default is the newest table: unchanged
    assert attention_rate_flops(b, 128, 4096, True, False) == attention_rate_flops(b, 128, 4096, True, False,
                                                                                   cudnn=NEWEST)


def test_the_versions_gain_carries_to_other_shapes_and_not_to_hopper():
    """Other head dims and the full mask take the version's hdim-128 causal ratio at the same length and pass
    (assumption); GB200 at 9.18 (NVIDIA/cudnn-frontend@b8c0656 results/gb200_918_only_cudnn, llama3.1: forward causal
    2,048 1,022, backward causal 16,384 1,371 TFLOP/s) against the table's 1,097 / 1,328; GB300 reads its own
    versions (9.13.1 at 4,096: forward 1,445 against 1,703); Hopper reads its own sets (test below)."""
    gb = gpu_compute("GB200").kernels
    s = gb.sustained
    assert attention_rate_flops(gb, 128, 2048, True, False, cudnn="9.18.0.50") == pytest.approx(1022e12 * s)
    assert attention_rate_flops(gb, 128, 16384, True, True, cudnn="9.18.0.50") == pytest.approx(1371e12 * s)
    ratio = 1022 / 1097
    assert attention_rate_flops(gb, 192, 2048, False, False, cudnn="9.18") == pytest.approx(
        attention_rate_flops(gb, 192, 2048, False, False) * ratio)
    # between lengths: linear in log2 of the length; outside them flat (a 128-key window takes 2,048's ratio)
    assert cudnn_factor("blackwell", "9.18", 2048 * 2 ** 0.5, False) == pytest.approx(
        (1022 / 1097 + 1297 / 1408) / 2)
    assert cudnn_factor("blackwell", "9.18", 128, True) == pytest.approx(824 / 885)
    g3 = gpu_compute("GB300").kernels
    assert attention_rate_flops(g3, 128, 4096, True, False, cudnn="9.13.1") == pytest.approx(1445e12 * g3.sustained)


def test_the_layout_carries_the_version_into_the_step():
    """``cudnn_version`` reaches the fused attention op's time (operators.op_passes_s): a GB200 step at 9.13.1
    spends more on attention than at 9.22, a H100 step at 9.1.0 more than at 9.22 (its sets 9.1 and 9.19)."""
    from topo.training.model import load_model
    from topo.training.operators import block_ops, op_passes_s

    model = load_model("llama3-8b")
    for gpu, old in (("GB200", "9.13.1"), ("H100", "9.1.0"), ("A100", "9.1.0")):
        g = gpu_compute(gpu)
        t = {}
        for v in (old, NEWEST):
            lay = make_layout(tp=1, dp=8, global_batch=8, seq_len=4096, cudnn_version=v)
            op = next(o for o in block_ops(model, lay, "*") if o.kind == "attention")
            t[v] = sum(op_passes_s(op, g, lay))
        assert (t[old] > t[NEWEST] * 1.05) == (gpu != "A100"), gpu  # Ampere: one table


def test_a_bad_version_is_one_line_naming_the_key():
    for bad, why in (("8.9", "is not a cuDNN 9 version"), ("9.x", "is not a cuDNN 9 version"),
                     (9.1, "9.1 is a number; write the version as text"),
                     (True, "True is not text; write the version as text")):  # rev53: a boolean was "a number"
        with pytest.raises(TopoError) as exc:
            make_layout(tp=1, dp=1, global_batch=1, cudnn_version=bad)
        assert exc.value.key == "cudnn_version" and why in str(exc.value) and "\n" not in str(exc.value)


def test_the_benchmark_sets_each_rows_container_cudnn():
    """benchmarks/training_accuracy.py reads each row's cuDNN from its software string (no per-row setting)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    model = training_accuracy._row_model({"model": "llama3-70b", "run_id": "nemo2504_x"})
    for software, want in (("NeMo 25.04", "9.11.0.98"), ("NeMo 25.11", "9.13.1.26"),
                           ("Megatron-LM dev (commit not stated)", None)):
        row = {"run_id": "nemo_x", "software": software, "precision": "bf16", "fsdp": "0", "model": "llama3-70b",
               "gpu": "GB200", "note": "", "published_date": "unknown"}
        kw = dict(pp=1, vpp=1, dp=8)
        training_accuracy._framework_kw(row, model, kw)
        assert kw.get("cudnn_version") == want, software


def test_the_ring_attention_step_reads_the_version_too():
    """A context-parallel ring's step after the diagonal (operators.ring_step_s, what each K/V send hides behind) is
    cuDNN's fused attention as well: at 9.13.1 on a GB200 each pass is the 9.22 one over the version's ratio at the
    step's block length (rev53: dropping the version from either pass failed no test)."""
    from topo.training.model import load_model
    from topo.training.operators import _attention_ops, ring_step_s

    model = load_model("llama3-8b")
    g = gpu_compute("GB200")
    lay = {v: make_layout(tp=1, cp=4, dp=2, global_batch=2, seq_len=16384, cudnn_version=v) for v in ("9.13.1", NEWEST)}
    op = next(o for o in _attention_ops(model, lay[NEWEST]) if o.name == "core_attention_ring_steps")
    old, new = ring_step_s(model, lay["9.13.1"], g), ring_step_s(model, lay[NEWEST], g)
    for i, backward in enumerate((False, True)):
        gap = new[i] - op.flops * (2.5 if backward else 1.0) / op.launches / attention_rate_flops(
            g.kernels, op.head_dim, op.block_seq, op.causal, backward, op.window)
        ratio = cudnn_factor("blackwell", "9.13.1", op.block_seq, backward)
        assert ratio < 0.95  # 9.13.1 is slower than 9.22 at every published length
        assert old[i] - gap == pytest.approx((new[i] - gap) / ratio, rel=1e-9), backward


def test_h100_attention_at_its_containers_cudnn_is_the_published_time():
    """NVIDIA/cudnn-frontend@df73764 benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/
    llama3.1_20260227_034703.csv (cuDNN 9.19, NVIDIA H200, batch 1, 64 / 8 heads, hdim 128, top-left causal,
    bfloat16): 8,192 tokens forward 1.708 ms, backward 5.083 ms. NeMo 26.04's container ships cuDNN 9.20.0.48
    (NVIDIA-NeMo/Megatron-Bridge@2075a5b8 docs/releases/software-versions.md), which reads the 9.19 set: a H100 (the
    H200's die, 989 TFLOP/s either) runs that attention in those times over its sustained clock. NeMo 25.11's
    9.13.1.26 reads 9.4's (@61100c8 benchmark/benchmark_results.csv: causal 8,192 forward 645.95, backward 461.89
    TFLOP/s); NeMo 25.04's bound (9.11) the same. On main every version read FlashAttention-3's July-2024 table
    (529 / 446 at 8K)."""
    h = gpu_compute("H100").kernels
    s = h.sustained
    flops = 4 * 1 * 64 * 8192 ** 2 / 2 * 128  # FlashAttention's convention: causal half of 4 b h s^2 d
    v = release_cudnn("NeMo 26.04")
    fwd = flops / attention_rate_flops(h, 128, 8192, True, False, cudnn=v)
    bwd = 2.5 * flops / attention_rate_flops(h, 128, 8192, True, True, cudnn=v)
    assert fwd * s == pytest.approx(1.708e-3, rel=3e-3)
    assert bwd * s == pytest.approx(5.083e-3, rel=3e-3)
    for release in ("NeMo 25.11", "NeMo 25.04"):
        v = release_cudnn(release)
        assert attention_rate_flops(h, 128, 8192, True, False, cudnn=v) == pytest.approx(645.95e12 * s, rel=1e-3)
        assert attention_rate_flops(h, 128, 8192, True, True, cudnn=v) == pytest.approx(461.89e12 * s, rel=2e-3)
    # 9.1.0 (@b740542, the same file's causal rows): 16,384 forward 586.8; older versions read the oldest set
    assert attention_rate_flops(h, 128, 16384, True, False, cudnn="9.0") == pytest.approx(586.8e12 * s, rel=1e-3)
    # no version: the table's own (FlashAttention-3's cuDNN bars, 529 at 8K causal forward)
    assert attention_rate_flops(h, 128, 8192, True, False) == pytest.approx(529e12 * s)


def test_a_hopper_set_keeps_its_own_lengths_inside_the_tables():
    """Hopper's sets were measured at 4K-16K (9.1, 9.4) and 2K-16K (9.19) against a 512-16K table: each ratio is
    the set over the table's own hdim-128 causal curve at the set's lengths, flat outside them (9.1 at 2,048 takes
    4,096's ratio: 542 / 518). A set measured where the table has no rate is refused, naming it."""
    assert cudnn_factor("", "9.1", 2048, False) == pytest.approx(542 / 518)
    assert cudnn_factor("", "9.19", 2048, True) == pytest.approx(370 / 381)
    import topo.training.kernels as kernels

    table = _table()
    bad = {**table, "attention": {**table["attention"], "cudnn": {"versions": {
        "9.19": {**table["attention"]["cudnn"]["versions"]["9.19"], "seq": [4096, 8192, 16384, 32768]}}}}}
    try:
        kernels._table = lambda: bad
        kernels.cudnn_factor.cache_clear()
        with pytest.raises(ValueError, match=r"attention.\(hopper\).cudnn.versions.9.19: seq .* outside"):
            cudnn_factor("", "9.19", 8192, False)
    finally:
        kernels._table = _table
        kernels.cudnn_factor.cache_clear()


def test_the_ngc_banner_reads_the_framework_it_names():
    """Every NGC container prints the banner "{framework} NVIDIA Release yy.mm" (MLPerf v5.1's SYSJSON prints the
    PyTorch base's as "PyTorch NVIDIA Release 25.01", mlcommons/training_results_v5.1@441d65f4): a JAX container's
    banner reads JAX's entry, never PyTorch's of the same month (rev72: "JAX NVIDIA Release 25.08" read 9.12.0.46)."""
    assert release_entry("JAX NVIDIA Release 25.08") is None  # no JAX 25.08 entry: the default, not PyTorch 25.08's
    assert release_entry("MaxText (JAX NVIDIA Release 25.01)") is None
    assert release_entry("TensorFlow NVIDIA Release 25.01") is None
    assert release_cudnn("JAX NVIDIA Release 25.10") == "9.16.0.29"  # JAX 25.10's bound
    assert release_cudnn("PyTorch NVIDIA Release 25.01") == "9.7.0.66"
    assert release_cudnn("MLPerf Training v5.1 (NVIDIA Release 25.08 NeMo container)") == "9.12.0.46"  # no framework
