"""Which ``recompute_modules`` a layout really recomputes: none under full recomputation, the layout's otherwise.

One rule, read by the step (:mod:`.operators`, :mod:`.step`), the saved activations (:mod:`.activation_bytes`,
which re-exports it) and :func:`.parallel.check_layout`'s offload refusal. It imports nothing of topo, so
:mod:`.parallel` can read it without a cycle (tidy122, section 445; the rule itself is tidy121's, section 443).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .parallel import ParallelLayout

__all__ = ["modules_recomputed"]


def modules_recomputed(lay: ParallelLayout) -> tuple[str, ...]:
    """The modules recomputed on their own (``recompute_modules``) in the layers not recomputed whole: none under
    ``recompute = "full"``, the layout's modules otherwise. The one place the step, its traffic, the memory and
    the layout's checks read them from.

    Megatron-Core reads ``recompute_modules`` only under selective granularity: each module's checkpoint is gated on
    ``recompute_granularity == 'selective'`` (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/
    transformer_layer.py`` line 473, layernorm and mlp; ``attention.py`` lines 393-394, core_attn;
    ``moe/moe_layer.py`` lines 248-255, moe and shared_experts; ``moe/experts.py`` lines 270-271, moe_act;
    ``multi_latent_attention.py`` lines 172-173, mla_up_proj), and ``transformer_config.py`` ``__post_init__``
    checks them only there (lines 1943-2012), its offload rule too ("Cannot offload ... while recomputing the
    entire MoE layer" only when ``recompute_granularity == "selective" and "moe" in self.recompute_modules``, lines
    2165-2175). Under full granularity with the ``block`` method the layers past ``recompute_num_layers`` run with
    no checkpoint at all (``megatron/core/recompute.py`` lines 167-181: ``chunk_runner(layer_idx, layer_idx + 1,
    use_checkpoint)``, ``use_checkpoint`` false past the first N), so they keep every activation and replay
    nothing; ``validate_args`` accepts the pair (``megatron/training/arguments.py`` lines 1409-1428 refuse only a
    method under selective).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    tuple of str
    """
    return () if lay.recompute == "full" else tuple(lay.recompute_modules)
