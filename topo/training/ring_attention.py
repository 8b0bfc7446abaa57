"""Context-parallel attention as the frameworks run it: the kernel calls, the merge kernels and the K/V exchange.

A sequence of ``s`` tokens is cut into ``2 cp`` chunks and rank ``r`` holds chunks ``r`` and ``2 cp - 1 - r``
(load balancing of the causal mask), ``s / cp`` tokens. Two exchanges (the layout's ``cp_comm_type``):

- ``p2p`` (ring attention; Megatron-Core's default ``cp_comm_type``, Transformer Engine's
  ``AttnFuncWithCPAndKVP2P`` in ``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``,
  NVIDIA/TransformerEngine@d0067d0): ``cp`` steps, each one flash-attention call of its own. Step 0 is the diagonal
  (the rank's ``s / cp`` queries on its own ``s / cp`` keys, causal); every later step is a rectangle without a
  mask: all ``s / cp`` queries on the first half (``s / 2cp``) of the received keys (``lower-triangle``) or the
  second half (``s / 2cp``) of the queries on all ``s / cp`` received keys (``upper-triangle``). Every step
  computes ``(s / cp)^2 / 2`` query-key pairs. While a step computes, the K/V chunk for the next one travels to
  the next rank of the ring (``flash_attn_p2p_communicate``, ``batch_isend_irecv``): ``cp - 1`` sends forward;
  backward each step sends K/V and the partial dK/dV together (``p2p_comm_buffers = [kv, dkv]``; step 0 K/V only,
  the last step dK/dV only): ``2 (cp - 1)`` chunks over ``cp`` steps. A step's exchange is exposed where it
  outlasts the step's attention. After each step the output and the log-sum-exp are merged
  (``flash_attn_fwd_softmax_lse_correction``, ``flash_attn_fwd_out_correction``: the step's output and the
  merged output read, the merged output written, in the activations' dtype); backward, each step's dQ, dK and
  dV are added into their buffers
  (``dq.add_``, ``dk.add_``, ``dv.add_``: two reads, one write each);
- ``all_gather`` (Meta's Llama 3, arXiv 2407.21783 sec. 3.3.2, paraphrased: K and V are all-gathered, then each
  rank computes the attention of its local Q chunks, and the all-gather's latency is exposed on the critical path;
  Transformer Engine's ``AttnFuncWithCPAndKVAllGather``): one call per local chunk, chunk ``j``'s
  ``s / 2cp`` queries on the ``(j + 1) s / 2cp`` keys before and at it (causal). Backward, Transformer Engine
  keeps only the rank's own K and V and gathers them again (``AttnFuncWithCPAndKVAllGather.backward``:
  ``k_ag, _ = gather_along_first_dim(k, ctx.cp_group)``, the same for ``v``, NVIDIA/TransformerEngine@d0067d0 and
  ``v2.8``), then reduce-scatters dK and dV (``reduce_scatter_along_first_dim``): per layer and pass two
  all-gathers (forward, backward) and one reduce-scatter, all exposed (each blocks the kernels after it). Meta's
  paper names only the forward gather; its backward is taken to be Transformer Engine's (assumption).

- ``a2a`` (DeepSpeed-Ulysses, arXiv 2309.14509; Transformer Engine's ``AttnFuncWithCPAndQKVOA2A``, same file,
  NVIDIA/TransformerEngine@d0067d0; Megatron-Core's ``--cp-comm-type a2a``): an all-to-all over the CP group
  trades the rank's ``s / cp`` tokens of all its heads for all ``s`` tokens of ``1 / cp`` of them, one
  ``all_to_all_single`` each for Q, K and V before the kernel (``flash_attn_a2a_communicate(..., before_attn=True,
  a2a_input_names=["q", "k", "v"])``) and one for the output after it (``["out"]``); backward one for dO before and
  one each for dQ, dK and dV after (``["dout"]``, ``["dq", "dk", "dv"]``): four per pass, each blocking the kernel
  after it (their ``async_op`` overlaps only the next tensor's reordering). The kernel is one causal call over the
  whole sequence at ``heads / cp`` heads: ``s^2 / 2`` pairs of ``1 / cp`` of the heads, ``s^2 / (2 cp)`` per head
  of the rank's, at block ``s``. TE asserts ``num_heads % cp_size == 0`` for Q and for K and V
  (``cp_comm_type='a2a' requires num_heads % cp_size == 0``): with few K/V heads (GQA: Llama 3 405B's 8 over TP8
  leave one a rank) a2a cannot run, which is why Meta gathers K and V instead (arXiv 2407.21783 sec. 3.3.2).
  Not built: ``a2a+p2p`` (TE's ring over one level of ``hierarchical_context_parallel_sizes`` after an a2a over
  the other); no published row runs it ("No checked-in Bridge recipe sets cp_comm_type=a2a+p2p",
  NVIDIA-NeMo/Megatron-Bridge@067f987d ``skills/nemo-mbridge-perf-hierarchical-context-parallel/card.yaml``).

Each call's rate is the fused kernel's at the call's block (:func:`topo.training.kernels.attention_rate_flops`):
a causal square at its side, a rectangle at its shorter side (assumption: the published tables are square;
the ring's ranks run a step in lockstep, the lower- and upper-triangle ranks each have one side ``s / 2cp``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AttentionCall", "cp_attention_calls", "p2p_merge_bytes", "ring_sends", "a2a_exchanges",
           "a2a_heads_error", "CP_COMM_TYPES"]

CP_COMM_TYPES = ("p2p", "all_gather", "a2a")


@dataclass(frozen=True)
class AttentionCall:
    """Fused-attention work of one kind, per layer and micro-batch sequence on one rank: ``pairs`` query-key pairs
    (the mask's area) in ``launches`` kernels, timed at block length ``block`` with or without the causal mask."""

    name: str
    launches: int
    pairs: float
    block: float
    causal: bool


def cp_attention_calls(seq: float, cp: int, comm_type: str = "p2p") -> list[AttentionCall]:
    """The attention kernels one rank runs per layer and sequence under context parallelism (see the module doc).

    Parameters
    ----------
    seq : float
        Sequence length ``s`` in tokens.
    cp : int
        Context-parallel ranks (> 1).
    comm_type : str
        ``p2p`` (ring), ``all_gather`` or ``a2a`` (Ulysses).

    Returns
    -------
    list of AttentionCall
        Their pairs add up to ``s^2 / (2 cp)``: the causal square split evenly over the ranks.
    """
    side = seq / cp  # the rank's tokens
    half = side / 2  # one chunk
    if comm_type == "p2p":
        return [AttentionCall("diagonal", 1, side * side / 2, side, True),
                AttentionCall("ring_steps", cp - 1, (cp - 1) * side * half, half, False)]
    if comm_type == "all_gather":
        # chunks r and 2cp-1-r (two kernels): their causal squares and, in the same kernels, the keys before them
        return [AttentionCall("chunk_diagonals", 2, 2 * half * half / 2, half, True),
                AttentionCall("chunk_prefixes", 0, (2 * cp - 1) * half * half, half, False)]
    if comm_type == "a2a":  # the whole sequence, causal, at 1/cp of the heads: s^2/2 pairs of 1/cp of them
        return [AttentionCall("full_sequence", 1, seq * seq / (2 * cp), seq, True)]
    raise ValueError(f"unknown cp_comm_type {comm_type!r}; allowed: {', '.join(CP_COMM_TYPES)}")


def p2p_merge_bytes(cp: int, q_elems: float, kv_elems: float,
                    bytes_per_elem: float = 2.0) -> tuple[float, float, int, int]:
    """HBM bytes and kernels of ring attention's merges, forward and backward, per layer and micro-batch on one
    rank.

    Forward: each of the ``cp`` steps' outputs (``q_elems`` = tokens x heads x value dimension) merged into the
    output, in the activations' dtype (``flash_attn_fwd_out_correction``: the step's output and the output read,
    the output written: ``3 x 2`` bytes per element; the log-sum-exp's merge, one float per token and head, left
    out of the bytes), one fused kernel each for the output and the log-sum-exp (``jit_fuser``). Backward: each
    later step's dQ, dK and dV added into their buffers (``dq.add_``, ``dk.add_``, ``dv.add_``: two reads and a
    write per element of Q and of K and V, ``kv_elems``), three kernels a step.

    Parameters
    ----------
    cp : int
        Context-parallel ranks.
    q_elems, kv_elems : float
        Elements of the rank's output (or Q) and of its K and V together.
    bytes_per_elem : float
        The activations' bytes (bf16: 2).

    Returns
    -------
    tuple of float
        ``(forward_bytes, backward_bytes, forward_kernels, backward_kernels)``.
    """
    forward = cp * 3 * bytes_per_elem * q_elems
    backward = (cp - 1) * 3 * bytes_per_elem * (q_elems + kv_elems)
    return forward, backward, 2 * cp - 1, 3 * (cp - 1)


def ring_sends(cp: int) -> dict[str, tuple[float, int]]:
    """The sends of one rank per layer and micro-batch in the ring, by phase (see the module doc). Forward:
    ``cp - 1`` sends of K/V; backward: K/V and dK/dV together in the ``cp - 2`` middle steps, one chunk in the
    first (K/V) and the last (dK/dV): ``2 (cp - 1)`` chunks in all.

    Parameters
    ----------
    cp : int
        Context-parallel ranks (> 1).

    Returns
    -------
    dict of str to (float, int)
        Phase (``cp_ring_forward``, ``cp_ring_backward``, ``cp_ring_backward_ends``) -> ``(chunks per send,
        sends)``, a chunk the rank's ``s / cp`` tokens of K and V.
    """
    return {"cp_ring_forward": (1.0, cp - 1), "cp_ring_backward": (2.0, cp - 2), "cp_ring_backward_ends": (1.0, 2)}


def a2a_exchanges(q_bytes: float, k_bytes: float, v_bytes: float, out_bytes: float) -> dict[str, list[float]]:
    """The all-to-alls of Ulysses CP (``a2a``, see the module doc) per layer and micro-batch on one rank, by pass:
    each one ``all_to_all_single`` of the rank's whole tensor (``s / cp`` tokens of its heads) over the CP group,
    ``(cp - 1) / cp`` of it leaving the rank. K and V are apart: under MLA a key head is ``qk_nope + qk_rope``
    wide and a value head ``v_head_dim`` (DeepSeek-V3: 192 and 128).

    Parameters
    ----------
    q_bytes, k_bytes, v_bytes, out_bytes : float
        Bytes of the rank's Q, K, V and output, before the exchange (dQ, dK, dV and dO backward: the same sizes).

    Returns
    -------
    dict of str to list of float
        ``forward`` (Q, K, V before the kernel, the output after) and ``backward`` (dO before, dQ, dK, dV after):
        the size of each call.
    """
    return {"forward": [q_bytes, k_bytes, v_bytes, out_bytes],
            "backward": [out_bytes, q_bytes, k_bytes, v_bytes]}


def a2a_heads_error(cp: int, q_heads: int, kv_heads: int) -> str | None:
    """Why Ulysses CP cannot split a rank's heads over ``cp`` ranks (Transformer Engine asserts ``num_heads %
    cp_size == 0`` for Q and for K and V, ``AttnFuncWithCPAndQKVOA2A.forward``), or None when it can.

    Parameters
    ----------
    cp : int
        Context-parallel ranks.
    q_heads, kv_heads : int
        Query heads and key/value heads a tensor-parallel rank holds.

    Returns
    -------
    str or None
        The reason, naming the allowed values, or None.
    """
    if q_heads % cp == 0 and kv_heads % cp == 0:
        return None
    divisors = [d for d in range(2, min(q_heads, kv_heads) + 1) if q_heads % d == 0 and kv_heads % d == 0]
    allowed = (f"cp {', '.join(map(str, divisors))}, or p2p or all_gather" if divisors
               else "p2p or all_gather (no cp > 1 divides both)")
    return (f"a2a splits each tensor-parallel rank's {q_heads} query and {kv_heads} key/value heads over the "
            f"{cp} CP ranks and needs both divisible by cp; allowed: {allowed}")
