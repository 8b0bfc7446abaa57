"""How Transformer Engine issues one pass of a grouped expert GEMM, and the GPU seconds it takes.

Two paths (the layout's ``moe_expert_kernels``), from the sources of the releases the published rows run (NeMo /
Megatron-Bridge 25.09-26.06: Transformer Engine 2.7-2.16, Megatron-Bridge ``docs/releases/software-versions.md``):

- ``multi_stream``: Megatron-Core's ``TEGroupedMLP`` runs TE's ``GroupedLinear``, whose ``general_grouped_gemm``
  calls ``nvte_multi_tensor_gemm``; that takes the CUTLASS grouped kernel only on Hopper, for BF16 and FP16, with
  ``NVTE_USE_CUTLASS_GROUPED_GEMM=1`` (off by default, set by no Megatron-Bridge recipe), else
  ``multi_stream_cublas_gemm``: one cuBLASLt GEMM per local expert, GEMM ``i`` on compute stream ``i mod S``,
  ``S = get_num_compute_streams()`` = 4 (``kernels.toml`` ``[grouped_gemm]``), each planned for the whole GPU
  (``math_sm_count`` 0 unless ``NVTE_EXT_MARGIN_SM``), the streams forked from and joined to the main stream by
  events. The streams run at once, so while the GPU is full the tiles of the GEMMs in flight share its waves (the
  packed time, :func:`.kernels.gemm_s`) and each kernel's launch gap passes behind the other streams' tiles; but a
  stream runs its GEMMs one after another, none faster than alone on the GPU: the pass lasts at least
  ``ceil(G / S)`` of them, each with its gap. Seconds: ``max(T_packed + g, ceil(G / S) (t_1 + g))``.
- ``fused_mlp``: Transformer Engine's op fuser with ``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1`` (SM100, MXFP8; the GB200
  MXFP8 recipes from 26.06 on, ``use_transformer_engine_op_fuser``): one cuDNN CuTe DSL kernel a pass for every
  expert (``ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8``: fc1 with the GLU and fc2's quantisation in its epilogue;
  backward ``grouped_gemm_dglu`` / ``grouped_gemm_quant`` / ``grouped_gemm_wgrad``): ``T_packed + g``. Two of
  the path's MXFP8 casts are no kernels of their own (:data:`EPILOGUE_CASTS`): fc1's kernel writes fc2's input
  already quantised, row- and column-wise (its ``d_tensor`` / ``d_col_tensor`` outputs), and the dGLU kernel
  (fc2's input gradient with the GLU's backward) writes fc1's output gradient so (``d_row_tensor`` /
  ``d_col_tensor``), which fc1's dgrad and wgrad read. fc1's forward input and fc2's output gradient are cast by
  one ``tex.group_quantize`` call each for every expert (:data:`GROUP_QUANTIZE_KERNELS`), where the multi-stream
  path's ``GroupedLinear`` quantises each expert's rows on their own (``split_quantize``). The activation is the
  model's: a GLU (SwiGLU, GPT-OSS's clamped quick-GeGLU) through ``grouped_gemm_glu_wrapper_sm100`` /
  ``grouped_gemm_dglu_wrapper_sm100`` (fc1's N twice the expert width), or squared ReLU (Nemotron's experts,
  ``ScaledSReLU``) through ``GroupedMLP_CuTeGEMMUnary``'s ``grouped_gemm_srelu_wrapper_sm100`` /
  ``grouped_gemm_dsrelu_wrapper_sm100`` (fc1's N the expert width: :attr:`.model.ModelSpec.fc1_width_factor`); the
  same passes, the same two casts in epilogues. The squared-ReLU fusion needs TE 2.17 (``ScaledSReLU`` and the
  kernels: ``GGEMM+srelu kernels for MxFP8 Nemotron``, #2981, 1bd99646 on main, 6f9511d3 on ``release_v2.16.post``
  at b9d690e0; not in v2.16 or v2.16.1), cuDNN frontend >= 1.24.0 (``_cudnn_frontend_supports_grouped_gemm_srelu``)
  and Megatron-Core's ``use_fused_weighted_squared_relu`` with the op fuser (``TEGroupedMLP._is_fused_impl_supported``,
  NVIDIA/Megatron-LM@24bad8e6 ``megatron/core/transformer/moe/experts.py``).

Sources: NVIDIA/TransformerEngine ``transformer_engine/common/util/multi_stream.cpp``,
``common/gemm/cublaslt_gemm.cu`` (``nvte_multi_tensor_gemm``, ``multi_stream_cublas_gemm``) and
``pytorch/cpp_extensions/gemm.py`` at v2.9 (70f53666), v2.12 (5671fd36), v2.14 (f031cf87) and v2.16 (4220403e);
``pytorch/ops/fused/{forward,backward}_grouped_mlp.py`` at v2.14-v2.16.1, ``grouped_mlp.py`` at v2.17-v2.18, and
``common/cast/mxfp8/group_quantize_mxfp8.cuh`` at v2.14, v2.16, v2.17.1 and v2.18 (the grouped cast);
``pytorch/ops/fused/forward_grouped_mlp.py`` and ``backward_grouped_mlp.py`` at v2.16 (the casts in the
epilogues: the same files at 000c2736 and 00a35218; the squared-ReLU path: ``ops/fused/grouped_mlp.py`` at v2.17.1
4329ff84 and 2.18.0.dev e7c550c5, ``validate_grouped_mlp_dims``, ``fuse_srelu_ops``, ``fuser_backward``'s
``d_row_tensor`` / ``d_col_tensor``; NVIDIA's "Boosting MoE Training Throughput with Advanced Fusion
Kernels", 2026-06-15: "GroupGemm + Activation + Quantize/Transpose", "GroupGemm + dActivation + Quantize/Transpose").
"""

from __future__ import annotations

import math
import tomllib
from functools import lru_cache

from ..resources import data_dir
from .kernels import KernelModel, gemm_s

__all__ = ["CPP_LOOP_PATHS", "EPILOGUE_CASTS", "EXPERT_KERNELS", "GROUP_QUANTIZE_KERNELS", "compute_streams",
           "epilogue_cast", "expert_host_ops", "expert_python_calls", "grouped_pass_s", "input_cast_kernels"]

EXPERT_KERNELS = ("multi_stream", "fused_mlp")
"""How a grouped expert GEMM pass is issued (the layout's ``moe_expert_kernels``; see the module doc)."""

EPILOGUE_CASTS = {"fused_mlp": {"fc1": "backward", "fc2": "forward"}}
"""Per issue path, the expert GEMM (``fc1``, ``fc2``) whose pass (``forward`` / ``backward``) takes its FP8 input
from the epilogue of the kernel before it, so casts nothing itself: the fused grouped MLP's fc1 kernel writes fc2's
forward input quantised, its dGLU kernel fc1's output gradient (module doc)."""


CPP_LOOP_PATHS = ("multi_stream",)
"""Issue paths whose pass is one Python call that launches every local expert's kernels from C++: ``GroupedLinear``
calls ``general_grouped_gemm`` once a GEMM pass (forward; dgrad and wgrad backward) and ``tex.split_quantize`` once
a cast (NVIDIA/TransformerEngine ``pytorch/module/grouped_linear.py`` at v2.14 f031cf87: ``split_quantize`` lines
151 and 356-363, ``general_grouped_gemm`` lines 207, 411 (dgrad) and 487 (wgrad); the same calls at v2.12 5671fd36
and v2.16 4220403e), whose C++ loops over the
experts (``common/gemm/cublaslt_gemm.cu`` ``multi_stream_cublas_gemm``, line 986 at v2.14:
``nvte_cublas_gemm_v2`` per GEMM; ``pytorch/csrc/extensions/cast.cpp`` ``multi_tensor_quantize_impl``, line 358 at
v2.14: ``quantize`` per expert). A GEMM loop without a grouped path (``moe_grouped_gemm = false``: Megatron-Core's
``SequentialMLP``) calls one ``Linear`` per expert from Python, the fused grouped MLP one kernel a call."""


GROUP_QUANTIZE_KERNELS = {"fused_mlp": 1}
"""Per issue path, the kernels of one pass's input cast that quantises every local expert's rows at once; a path
not named casts each expert's rows on their own (TE ``GroupedLinear``'s ``split_quantize``). The fused grouped MLP
casts fc1's forward input and fc2's output gradient with ``tex.group_quantize`` (TransformerEngine v2.14-v2.16.1
``pytorch/ops/fused/forward_grouped_mlp.py`` "Group-quantize input tensor", ``backward_grouped_mlp.py``; v2.17-v2.18
``ops/fused/grouped_mlp.py`` ``_group_quantize_for_grouped_mlp``, MXFP8 branch), i.e. ``nvte_group_quantize``: one
``group_quantize_mxfp8_kernel`` launch, with no ``update_tma_descriptors`` launch before it because the experts'
rows share their last dimension (``VARYING_FIRST_DIM`` is treated as a single tensor:
``common/cast/mxfp8/group_quantize_mxfp8.cuh``, v2.14-v2.18). Experts with biases take ``bgrad_group_quantize`` for
fc2's output gradient, which adds a ``grouped_reduce_dbias`` kernel; topo prices their bias gradients with
:func:`.operators._expert_bias_ops` and does not count that kernel."""


def input_cast_kernels(path: str, groups: float, per_cast: float) -> float:
    """Kernels that quantise one pass's FP8 input of a grouped expert GEMM (not a pass cast in an epilogue).

    Parameters
    ----------
    path : str
        The layout's ``moe_expert_kernels``.
    groups : float
        Local experts.
    per_cast : float
        Kernels of one expert's cast under the recipe (:func:`.kernels.quantize_kernels`).

    Returns
    -------
    float
        :data:`GROUP_QUANTIZE_KERNELS` of ``path``, else ``groups x per_cast``.
    """
    return float(GROUP_QUANTIZE_KERNELS[path]) if path in GROUP_QUANTIZE_KERNELS else groups * per_cast


EXPERT_HOST_CASTS = ("bf16", "fp8_per_tensor", "fp8_block")
"""How a ``GroupedLinear`` pass treats its input, as :func:`expert_host_ops` keys it: no FP8, per-tensor FP8 scaling
(current or delayed: ``split_quantize`` allocates each expert's output on its own) or block-scaled FP8 (MXFP8,
blockwise: one bulk allocation, a view an expert tensor)."""


@lru_cache(maxsize=None)
def _expert_host_table() -> dict:
    return tomllib.loads((data_dir("compute") / "te_grouped_linear_host.toml").read_text(encoding="utf-8"))


def expert_host_ops(path: str, cast: str, backward: bool = False) -> tuple[float, float, float]:
    """The host work one local expert adds to a grouped expert module's pass outside its launches: PyTorch ops
    entered from Python, tensors ATen makes from C++, and pure-Python calls (``te_grouped_linear_host.toml``,
    counted from Transformer Engine's ``GroupedLinear`` at v2.12, v2.14 and v2.16).

    Parameters
    ----------
    path : str
        The layout's ``moe_expert_kernels``; only :data:`CPP_LOOP_PATHS` (``GroupedLinear``) has a table, any other
        path none.
    cast : str
        One of :data:`EXPERT_HOST_CASTS`.
    backward : bool
        The backward (dgrad and wgrad), else the forward.

    Returns
    -------
    tuple of float
        ``(torch ops from Python, tensors from C++, Python calls)`` an expert.
    """
    return _per_expert("per_expert", path, cast, backward)


def expert_python_calls(path: str, cast: str, backward: bool = False) -> tuple[float, float, float]:
    """The pure-Python and pybind part of :func:`expert_host_ops`, one local expert's, by kind
    (``te_grouped_linear_host.toml [python_kinds]``, counted from the same source).

    Parameters
    ----------
    path : str
        The layout's ``moe_expert_kernels``; only :data:`CPP_LOOP_PATHS` has a table, any other path none.
    cast : str
        One of :data:`EXPERT_HOST_CASTS`.
    backward : bool
        The backward (dgrad and wgrad), else the forward.

    Returns
    -------
    tuple of float
        ``(Python-level calls, Python objects converted to C++ by a bound call, Python objects built from C++)``
        an expert, which sum to :func:`expert_host_ops`' third.
    """
    return _per_expert("python_kinds", path, cast, backward)


def _per_expert(table: str, path: str, cast: str, backward: bool) -> tuple[float, float, float]:
    """One expert's three counts of ``te_grouped_linear_host.toml``'s ``table`` for a pass; none off
    :data:`CPP_LOOP_PATHS` (:func:`expert_host_ops`, :func:`expert_python_calls`)."""
    if path not in CPP_LOOP_PATHS:
        return 0.0, 0.0, 0.0
    counts = _expert_host_table()[table][cast]["backward" if backward else "forward"]
    return float(counts[0]), float(counts[1]), float(counts[2])


def epilogue_cast(path: str, gemm: str) -> str:
    """The pass of expert GEMM ``gemm`` whose FP8 input an earlier kernel's epilogue casts under issue path
    ``path`` (:data:`EPILOGUE_CASTS`).

    Parameters
    ----------
    path : str
        The layout's ``moe_expert_kernels`` (or empty: not a grouped pass).
    gemm : str
        ``fc1`` or ``fc2``.

    Returns
    -------
    str
        ``forward``, ``backward`` or empty (every pass casts its own input).
    """
    return EPILOGUE_CASTS.get(path, {}).get(gemm, "")


@lru_cache(maxsize=1)
def compute_streams() -> int:
    """Transformer Engine's compute streams for a multi-stream grouped GEMM (``kernels.toml``
    ``[grouped_gemm] streams``).

    Returns
    -------
    int
        4 (TE's ``num_compute_streams``, v2.9-v2.16).
    """
    t = tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))
    return int(t["grouped_gemm"]["streams"])


def grouped_pass_s(km: KernelModel, M: float, N: float, K: float, precision: str, groups: float, path: str,
                   gap_s: float, time_ratio: float = 1.0, out_bytes: float = 2.0, m_sd: float = 0.0) -> float:
    """GPU seconds of one pass of a grouped GEMM (``groups`` GEMMs ``[M, K] x [K, N]``), its launch gaps included.

    Parameters
    ----------
    km : KernelModel
        The GPU's kernel model.
    M, N, K : float
        One expert's GEMM (rows, output columns, reduction).
    precision : str
        ``bf16`` or ``fp8``.
    groups : float
        Local experts (GEMMs of the pass).
    path : str
        ``multi_stream`` or ``fused_mlp`` (:data:`EXPERT_KERNELS`).
    gap_s : float
        GPU-side gap of one kernel (eager, or a CUDA graph node's).
    time_ratio : float
        The FP8 recipe's GEMM time against per-tensor scaling (:func:`.kernels.fp8_recipe_costs`).
    out_bytes, m_sd : float
        As :func:`.kernels.gemm_s`.

    Returns
    -------
    float
        ``T_packed + g`` (``fused_mlp``), or ``max(T_packed + g, ceil(G / S) (t_1 + g))`` (``multi_stream``; ``S``:
        :func:`compute_streams`, at most ``G``).
    """
    if path not in EXPERT_KERNELS:
        raise ValueError(f"moe_expert_kernels {path!r}; allowed: {', '.join(EXPERT_KERNELS)}")
    if M <= 0 or N <= 0 or K <= 0 or groups <= 0:
        return 0.0
    packed = time_ratio * gemm_s(km, M, N, K, precision, groups, True, out_bytes=out_bytes, m_sd=m_sd)
    if path == "fused_mlp":
        return packed + gap_s
    g = max(1, round(groups))
    alone = time_ratio * gemm_s(km, M, N, K, precision, 1.0, True, out_bytes=out_bytes, m_sd=m_sd)
    chain = math.ceil(g / min(compute_streams(), g)) * (alone + gap_s) * groups / g
    return max(packed + gap_s, chain)
