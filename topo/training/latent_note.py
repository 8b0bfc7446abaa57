"""The step's note on a LatentMoE ``latent_size`` at least as wide as the model's ``hidden`` (walk43's section 440,
Left 1; tidy121, section 443). Megatron-Core accepts any positive ``moe_latent_size`` with experts: ``validate_args``
asserts only "MoE latent projection dimension has to be greater than zero." and that the model has experts
(NVIDIA/Megatron-LM@d98e8a64 ``megatron/training/arguments.py`` lines 1979-1982; ``transformer_config.py`` line 952
has no check), so topo prices it as given and says what it is: a "latent projection" that does not shrink the
token, its two ``hidden x latent_size`` linears added to the dispatch's width, not taken from it."""

from __future__ import annotations

from .model import ModelSpec

__all__ = ["latent_size_note"]


def latent_size_note(model: ModelSpec) -> str | None:
    """The note when ``[moe] latent_size`` is not below ``hidden``, else None.

    Parameters
    ----------
    model : ModelSpec

    Returns
    -------
    str or None
    """
    latent = model.moe.latent_size if model.moe is not None else None
    if latent is None or latent < model.hidden:
        return None
    return (f"moe latent_size {latent:,} is not below hidden {model.hidden:,}: the latent projections widen the "
            f"routed tokens instead of narrowing them (is it a typo?); Megatron-Core accepts it (it asserts only "
            f"latent_size > 0 with experts: NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py lines "
            f"1979-1982), priced as given")
