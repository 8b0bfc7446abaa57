"""Per-module precision inside an FP8 / FP4 layout, as Megatron-Core's ``quant_recipe`` runs it.

Megatron-Bridge's Nemotron 3 Super NVFP4 recipes hand the model a Transformer Engine quantisation recipe whose
matchers pick modules by their Megatron names and give each a recipe of its own, the rest keeping the layout's
(NVIDIA-NeMo/Megatron-Bridge@4ab94dfa ``src/megatron/bridge/perf_recipes/nemotronh/te_quant.cfg``: ``*.linear_qkv``,
``*.linear_proj``, ``*mlp.fc[12]_latent_proj`` and ``mtp.*`` in BF16, ``*mixer.out_proj`` in MXFP8; set as
``cfg.model.quant_recipe`` by ``perf_recipes/nemotronh/{gb300,gb200,b300,b200}/nemotronh.py``). The layout says
it as ``module_recipes``, entries ``name=recipe`` with Megatron's module names, which :data:`MODULE_OPS` maps to
topo's operators (``(module, op name)`` of :func:`.operators.block_ops`) in one place.
"""

from __future__ import annotations

from .kernels import quantised_copy_bytes

MODULE_OPS: dict[str, tuple[tuple[str, str], ...]] = {
    "linear_qkv": (("attention", "qkv"),),
    "linear_proj": (("attention", "out_proj"),),
    "mixer.in_proj": (("mamba", "in_proj"),),
    "mixer.out_proj": (("mamba", "out_proj"),),
    "mlp.linear_fc1": (("mlp", "fc1"),),
    "mlp.linear_fc2": (("mlp", "fc2"),),
    "experts.linear_fc1": (("moe", "fc1"),),
    "experts.linear_fc2": (("moe", "fc2"),),
    "shared_experts.linear_fc1": (("shared_experts", "fc1"),),
    "shared_experts.linear_fc2": (("shared_experts", "fc2"),),
    "fc1_latent_proj": (("moe", "fc1_latent_proj"),),
    "fc2_latent_proj": (("moe", "fc2_latent_proj"),),
    "mtp": (("mtp", "mtp_proj"),),
}
"""Megatron-Core module name -> topo's operators it holds. ``mtp`` (``mtp.*``): every multi-token-prediction
module, its layers whole (:func:`.operators.bf16_layers`) and its projection (``eh_proj``: topo's ``mtp_proj``)."""

MODULE_RECIPES = ("bf16", "mxfp8", "nvfp4")
"""What a module's recipe may be: BF16 (TE's recipe with no quantisation, ``training_recipe: {}``), MXFP8 or NVFP4."""

TP_LINEARS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "*": (("attention", "qkv"), ("attention", "out_proj")),
    "-": (("mlp", "fc1"), ("mlp", "fc2")),
    "M": (("mamba", "in_proj"), ("mamba", "out_proj")),
    "E": (("shared_experts", "fc1"), ("shared_experts", "fc2")),
}
"""A tensor-parallel block (its layer-pattern character; an MoE block's TP linears are its shared experts', its
routed experts gather over ETP) -> its column-parallel linear (whose input is all-gathered under sequence
parallelism) and its row-parallel linear (whose output gradient is), as ``(module, op name)`` of
:func:`.operators.block_ops`."""

WHOLE_LAYER_MODULES = ("mtp",)
"""Modules that are whole layers: BF16 only (a layer is run in BF16 as :func:`.operators.bf16_layers` runs one)."""


def parse_module_recipes(entries: tuple[str, ...]) -> dict[str, str]:
    """The layout's ``module_recipes`` as ``{module: recipe}``; entries already checked by
    :func:`module_recipes_error` (malformed ones are skipped here).

    Parameters
    ----------
    entries : tuple of str
        ``name=recipe`` strings.

    Returns
    -------
    dict
        Megatron module name -> recipe.
    """
    pairs = (e.split("=", 1) for e in entries if "=" in e)
    return {name.strip(): recipe.strip() for name, recipe in pairs}


def entries_at(entries: tuple[str, ...], recipe: str) -> tuple[str, ...]:
    """The ``module_recipes`` entries (``name=recipe``) that run ``recipe``, as written.

    Parameters
    ----------
    entries : tuple of str
        ``name=recipe`` strings.
    recipe : str
        A recipe of :data:`MODULE_RECIPES`.

    Returns
    -------
    tuple of str
        The entries at ``recipe``, in order.
    """
    return tuple(e for e in entries if e.split("=", 1)[-1].strip() == recipe)


def module_recipes_error(entry: str) -> str:
    """Why ``entry`` of ``module_recipes`` is refused ("" when it is good): the form ``name=recipe``, a name of
    :data:`MODULE_OPS`, a recipe of :data:`MODULE_RECIPES` (BF16 only for a whole-layer module)."""
    if "=" not in entry:
        return f"{entry!r} is not name=recipe; e.g. linear_qkv=bf16"
    name, recipe = (s.strip() for s in entry.split("=", 1))
    if name not in MODULE_OPS:
        return f"module {name!r} is not known; allowed: {', '.join(MODULE_OPS)}"
    allowed = ("bf16",) if name in WHOLE_LAYER_MODULES else MODULE_RECIPES
    if recipe not in allowed:
        return f"recipe {recipe!r} for {name} is not allowed; allowed: {', '.join(allowed)}"
    return ""


def duplicate_module_entries(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The well-formed ``module_recipes`` entries whose module an earlier entry names too (each with that first
    entry), in order; empty when every module is named once.

    Parameters
    ----------
    entries : tuple of str
        ``name=recipe`` strings.

    Returns
    -------
    tuple of str
        The clashing entries, the first naming of each module before its repeats.
    """
    first: dict[str, str] = {}
    out: list[str] = []
    for entry in (e for e in entries if "=" in e):
        name = entry.split("=", 1)[0].strip()
        if name in first:
            out.extend(e for e in (first[name], entry) if e not in out)
        else:
            first[name] = entry
    return tuple(out)


def op_recipes(entries: tuple[str, ...]) -> dict[tuple[str, str], str]:
    """``{(module, op name): recipe}`` of topo's operators that ``module_recipes`` entries name (:data:`MODULE_OPS`).

    Parameters
    ----------
    entries : tuple of str
        The layout's ``module_recipes``.

    Returns
    -------
    dict
        Empty when none is given.
    """
    return {op: recipe for name, recipe in parse_module_recipes(entries).items() for op in MODULE_OPS.get(name, ())}


def module_precision(recipe: str, precision: str, fp8_recipe: str | None) -> tuple[str, str | None]:
    """The precision and FP8 recipe a linear module runs at: ``recipe`` its own (``module_recipes``; ``bf16``
    unquantised, as Transformer Engine runs a module its quantisation recipe leaves in high precision), "" the
    layout's ``precision`` and ``fp8_recipe``; a BF16 layout or layer (``precision`` not ``fp8``) stays BF16.

    Parameters
    ----------
    recipe : str
        The module's own recipe (``bf16``, ``mxfp8``, ``nvfp4``) or "".
    precision : str
        The layout's (or its BF16 layer's) ``precision``.
    fp8_recipe : str or None
        The layout's ``fp8_recipe``.

    Returns
    -------
    tuple
        ``(precision, fp8_recipe)``.
    """
    if not recipe or precision != "fp8":
        return precision, fp8_recipe
    return ("bf16", None) if recipe == "bf16" else ("fp8", recipe)


def module_copy_bytes(recipe: str, precision: str, fp8_recipe: str | None) -> float:
    """Bytes an element of a linear module's quantised copy of a tensor takes at the precision it runs at
    (:func:`module_precision`): the recipe's data and scales (:func:`.kernels.quantised_copy_bytes`: 1 per tensor,
    1 + 1/32 MXFP8, 1 + 4/128 block-wise, 0.5625 NVFP4), 2 (BF16, unquantised) for a BF16 module or layer. What
    Transformer Engine saves of the module's input for its weight gradient (:func:`.memory.block_activation_bytes`)
    and all-gathers of it over TP without userbuffers (:func:`.step.tp_gather_elem_bytes`).

    Parameters
    ----------
    recipe : str
        The module's own recipe (``module_recipes``) or "" (the layout's).
    precision : str
        The layout's ``precision``, ``bf16`` for a layer kept in BF16.
    fp8_recipe : str or None
        The layout's ``fp8_recipe``.

    Returns
    -------
    float
        Bytes per element.
    """
    precision, fp8_recipe = module_precision(recipe, precision, fp8_recipe)
    return quantised_copy_bytes(fp8_recipe) if precision == "fp8" else BF16_BYTES


BF16_BYTES = 2.0
"""Bytes an element of a tensor a module keeps unquantised (BF16)."""


def mtp_in_bf16(entries: tuple[str, ...]) -> bool:
    """Whether ``module_recipes`` keeps the multi-token-prediction modules (their layers whole) in BF16."""
    return parse_module_recipes(entries).get("mtp") == "bf16"
