"""Mamba-2's SSD scan as the kernels its training code launches, forward and backward, with their FLOPs and bytes.

Megatron-Core's Mamba mixer trains through ``mamba_ssm``'s ``mamba_split_conv1d_scan_combined`` (NVIDIA/Megatron-LM
``megatron/core/ssm/mamba_mixer.py`` ``_ssm_training`` @d98e8a64), whose SSD is the chunked algorithm of Dao and Gu
2024 (arXiv 2405.21060, sec. 6) in Triton kernels (state-spaces/mamba ``mamba_ssm/ops/triton/ssd_combined.py``
@e9594ce1). Per micro-batch and GPU, with ``T`` tokens, ``H`` heads of dimension ``P``, ``G`` groups of B and C of
state size ``N``, chunks of ``Q`` tokens (``ceil(L / Q)`` of them per sequence of ``L`` tokens, ``T / L``
sequences: ``_mamba_chunk_scan_combined_fwd``'s ``nchunks = math.ceil(seqlen / chunk_size)``, each kernel's grid
over ``batch x nchunks``, its tensors of whole chunks, the last one masked):

- forward (``_mamba_chunk_scan_combined_fwd``), five kernels: the cumulative sum of ``dt A`` per chunk; each
  chunk's state ``B^T x`` (``P x N x Q`` per chunk and head); the pass of the states across chunks; ``C B^T`` per
  chunk and group (``Q x Q x N``); the output ``(C B^T o L) x + C h`` (``Q x P x Q`` and ``Q x P x N`` per chunk
  and head), gated by ``z`` (Megatron's mixer gates inside the scan: ``norm_before_gate = False``);
- backward (``_mamba_chunk_scan_combined_bwd``): the first four forward kernels again (their outputs are not
  saved), then ``dz``, the states' gradient ``C^T dout``, its pass back across chunks, ``dx`` (two products),
  ``dB`` and ``dC`` from the states (one product each), ``d(CB)`` (``Q x Q x P``), ``dB`` and ``dC`` from it
  (``Q x N x Q`` per group, two kernels), the gradient of the decay's cumulative sum (``Q x Q x P``) and of
  ``dt``: eleven kernels, fifteen in all, and seven small PyTorch kernels between them (a copy of ``dt``, the
  reverse cumulative sum of the decay's gradient, two adds).

Forward FLOPs ``T H P (2Q + 4N) + 2 T G Q N``; backward ``T H P (6Q + 10N) + 6 T G Q N`` (the recomputation
included). Bytes count what each kernel reads from and writes to HBM once (operands shared by the heads of a group
read once): ``x``, ``z``, ``dout`` and their gradients in bf16; ``dt`` and ``dA`` cumulative sums, chunk states
before their pass and ``C B^T`` in fp32 (the kernels' ``states_in_fp32=True`` and ``output_dtype=torch.float32``);
passed states in bf16. Each kernel takes the longer of its products (the tile model, BF16) and its bytes (HBM),
and the Triton ones no less than their time on H100's SMs scaled to the GPU's SM cycles a second (SMs x
maximum SM clock, ``gpus.toml`` ``sm_clock_MHz``): they are bound by their SMs, not
HBM (``kernels.toml`` ``[ssd]``; :func:`topo.training.operators.sm_bound_floor_s`). On those SMs the backward's own
kernels with products (``gradient``) run them no faster than measured (``[ssd] backward_products_TFLOPs``: the TFLA
paper's H100 forward + backward of ``mamba_split_conv1d_scan_combined``, Beck et al. 2025, arXiv 2503.14376).
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["Kernel", "ssd_chunks", "ssd_kernels", "ssd_flops"]

BF16, FP32 = 2, 4


class Kernel(NamedTuple):
    """One kernel: its name, the pass it runs in (``forward``, ``backward``), the bytes it moves through HBM, its
    tensor-core products ``(m, n, k, groups)``, its launches (several small kernels may share one entry) and
    whether it is one of mamba_ssm's Triton kernels (False: PyTorch's elementwise kernels between them), and
    whether it is one of the backward's own kernels (``gradient``; False: a forward kernel, run again or not)."""

    name: str
    passes: str
    bytes: float
    dots: tuple
    launches: int = 1
    triton: bool = True
    gradient: bool = False


def ssd_flops(dots) -> float:
    """FLOPs of a kernel's products.

    Parameters
    ----------
    dots : iterable of tuple
        ``(m, n, k, groups)``: ``groups`` products of ``[m, k] x [k, n]``.

    Returns
    -------
    float
        ``sum 2 m n k groups``.
    """
    return sum(2.0 * m * n * k * g for m, n, k, g in dots)


def ssd_chunks(T: float, Q: float, seq_len: float) -> float:
    """Chunks the scan runs over ``T`` tokens in sequences of ``seq_len``: ``ceil(seq_len / Q)`` each, the last
    one partial where ``Q`` does not divide the sequence (state-spaces/mamba@e9594ce1
    ``mamba_ssm/ops/triton/ssd_combined.py`` ``_mamba_chunk_scan_combined_fwd``: ``nchunks = math.ceil(seqlen /
    chunk_size)``; ``ssd_chunk_state.py``'s kernels launch over ``batch * nchunks`` and mask the last chunk's
    ``chunk_size_limit``; the chunk states and ``C B^T`` are allocated per whole chunk).

    Parameters
    ----------
    T, Q, seq_len : float
        Tokens, chunk length and tokens per sequence.

    Returns
    -------
    float
        ``T / seq_len x ceil(seq_len / Q)``.
    """
    return T / seq_len * math.ceil(seq_len / Q)


def ssd_kernels(T: float, H: float, G: float, P: float, N: float, Q: float, gated: bool = True,
                seq_len: float | None = None) -> list[Kernel]:
    """The SSD's kernels for ``T`` tokens, ``H`` heads of dimension ``P``, ``G`` groups of state size ``N`` and
    chunks of ``Q`` tokens (see the module doc), forward then backward.

    Parameters
    ----------
    T, H, G, P, N, Q : float
        Tokens, heads, B/C groups, head dimension, state size and chunk length on this GPU.
    seq_len : float, optional
        Tokens of each sequence the scan runs over (``T / seq_len`` sequences, a fraction where context
        parallelism gives each rank whole sequences of ``1 / cp`` of the heads: ``T`` then counts ``s / cp`` tokens
        of every head). Each sequence is ``ceil(seq_len / Q)`` chunks (:func:`ssd_chunks`). Default: ``T``, one
        sequence.
    gated : bool
        ``z`` gates the scan (Megatron-Core's mixer): the forward's output kernel reads ``z`` and writes the gated
        output besides the ungated one, and the backward starts with ``dz``. False (``z=None``, as
        ``mamba_split_conv1d_scan_combined`` runs when handed the RMSNorm's weight, which then gates): the output
        kernel reads ``x`` and writes ``out`` only, and ``_mamba_chunk_scan_combined_bwd`` runs no ``dz`` kernel
        (state-spaces/mamba ``ssd_combined.py``@e9594ce1: ``if z is not None: ... _chunk_scan_bwd_dz``).

    Returns
    -------
    list of Kernel
    """
    C = ssd_chunks(T, Q, T if seq_len is None else seq_len)
    x = T * H * P  # elements of x (and z, out, dout, dx, dz)
    bc = T * G * N  # elements of B (and C)
    st = C * H * P * N  # elements of the chunk states
    cb = C * G * Q * Q  # elements of C B^T
    th = T * H  # elements of dt, dA's cumulative sum
    chunk_state = ((P, N, Q, C * H),)
    cb_dot = ((Q, Q, N, C * G),)
    scan = ((Q, P, Q, C * H), (Q, P, N, C * H))
    fwd = [
        Kernel("ssd_cumsum", "forward", BF16 * th + 2 * FP32 * th, ()),
        Kernel("ssd_chunk_state", "forward", BF16 * (bc + x) + 2 * FP32 * th + FP32 * st, chunk_state),
        Kernel("ssd_state_pass", "forward", (FP32 + BF16) * st, ()),
        Kernel("ssd_bmm", "forward", BF16 * 2 * bc + FP32 * cb, cb_dot),
        Kernel("ssd_chunk_scan", "forward", FP32 * cb + BF16 * ((4 if gated else 2) * x + bc + st) + 2 * FP32 * th,
               scan),
    ]
    recompute = [k._replace(name=k.name + "_recompute", passes="backward") for k in fwd[:4]]
    grad = [
        *([Kernel("ssd_bwd_dz", "backward", BF16 * 6 * x, ())] if gated else []),
        Kernel("ssd_bwd_dstates", "backward", BF16 * (bc + x) + FP32 * th + FP32 * st, ((P, N, Q, C * H),)),
        Kernel("ssd_bwd_state_pass", "backward", (FP32 + 3 * BF16) * st, ()),
        Kernel("ssd_bwd_dx", "backward", BF16 * (3 * x + st + bc) + FP32 * (cb + 3 * th), scan),
        Kernel("ssd_bwd_db", "backward", BF16 * (x + st + bc) + FP32 * (3 * th + bc), ((Q, N, P, C * H),)),
        Kernel("ssd_bwd_dc", "backward", BF16 * (x + st + bc) + FP32 * (2 * th + bc), ((Q, N, P, C * H),)),
        Kernel("ssd_bwd_dcb", "backward", BF16 * 2 * x + FP32 * (2 * th + cb), ((Q, Q, P, C * H),)),
        Kernel("ssd_bwd_bmm_db", "backward", BF16 * 2 * bc + FP32 * (cb + bc), ((Q, N, Q, C * G),)),
        Kernel("ssd_bwd_bmm_dc", "backward", BF16 * 2 * bc + FP32 * (cb + bc), ((Q, N, Q, C * G),)),
        Kernel("ssd_bwd_ddacs", "backward", BF16 * 2 * x + FP32 * (cb + 3 * th), ((Q, Q, P, C * H),)),
        Kernel("ssd_bwd_cumsum", "backward", FP32 * 2 * th + BF16 * 2 * th, ()),
    ]
    bwd = [
        *(k._replace(gradient=True) for k in grad),
        # PyTorch between them: dt.clone(), the reverse cumulative sum of ddA (flip, cumsum, flip) and two adds
        Kernel("ssd_bwd_torch", "backward", 2 * BF16 * th + 3 * 2 * FP32 * th + 2 * 3 * FP32 * th, (), 7, False),
    ]
    return fwd + recompute + bwd
