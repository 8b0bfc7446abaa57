"""The options of a layout search from ``topo train``'s flags (one site or across sites)."""

from __future__ import annotations

from ..errors import TopoError
from ..training.parallel import layout_fields, make_layout
from ..training.remat import RematPolicyError, remat_settings

__all__ = ["SEARCH_CHOICES", "SEARCH_SIZES", "search_options", "layout_for_search"]

SEARCH_CHOICES = ("recompute", "dp_sharding", "micro_batch", "rank_order", "etp")
"""Layout fields a search enumerates (narrowed to the one a flag gives); the other layout flags are fixed for it."""

SEARCH_SIZES = ("tp", "cp", "pp", "dp", "ep", "vpp", "pipeline_layout")
"""Layout fields that set the sizes the search picks (``pipeline_layout`` fixes pp and vpp): refused with it."""


def layout_for_search(path: str, layout_options: dict) -> tuple[dict, int | None]:
    """The layout options of a search with ``--layout``'s fields held fixed where no flag gives them (flags win,
    as without ``--search``), and the layout's ``global_batch`` (None if it has none).

    Parameters
    ----------
    path : a layout TOML file or ``key=value`` pairs (:func:`topo.training.parallel.layout_fields`).
    layout_options : the layout options the flags give (None where not given).

    Returns
    -------
    tuple of (dict, int or None)
        ``layout_options`` with the layout's validated non-size fields filled in where no flag gives them, and
        the layout's ``global_batch``.

    Raises
    ------
    TopoError
        A size field in the layout (the search picks sizes), or a bad value (named by the layout's source and key,
        or by the flag when a flag's value is the bad one).
    """
    data, source = layout_fields(path)
    where = "--layout" if source == "layout" else source
    sizes = [k for k in SEARCH_SIZES if k in data]
    if sizes:
        what = "fixes pp and vpp" if sizes[0] == "pipeline_layout" else "is a size"
        raise TopoError(f"{data[sizes[0]]!r} {what}, and --search picks tp, cp, pp, dp, ep and vpp itself; allowed "
                        "with --search: a layout of the other fields (recompute, dp_sharding, overlap_*, cp_comm_type, "
                        "...), which every layout it tries then carries; or drop --search to evaluate this layout",
                        source=where, key=sizes[0])
    given = {k: v for k, v in layout_options.items() if v is not None}
    try:  # the fields' values and their rules together with the flags' (global_batch: any, to validate the rest)
        lay = make_layout(source=source, **{**data, **given, "global_batch": data.get("global_batch", 1)})
    except TopoError as exc:
        name = (exc.key or "").split(".")[0]
        raise TopoError(exc.message, source=where if name in data or name not in given else None,
                        key=exc.key) from None
    fixed = {k: getattr(lay, k) for k in data if k != "global_batch" and k not in given}
    return {**layout_options, **fixed}, data.get("global_batch")


def search_options(args, layout_options: dict) -> dict:
    """The options of a layout search (:func:`topo.training.search.search_layouts`) from ``topo train``'s flags
    (and ``--layout``'s fields, :func:`layout_for_search`, in ``layout_options``): the layout fields given are
    fixed, the choices it enumerates narrowed to those given; the sizes it chooses
    (``--tp --cp --pp --dp --ep --vpp``) are refused, not silently replaced."""
    sizes = [f"--{d}" for d in ("tp", "cp", "pp", "dp", "ep", "vpp") if getattr(args, d, None) is not None]
    if sizes:
        raise TopoError(f"the search chooses tp, cp, pp, dp, ep and vpp itself; drop {', '.join(sizes)} (or --search, "
                        "to evaluate that layout)", key="--search")
    out = {k: v for k, v in layout_options.items() if v is not None and k not in SEARCH_CHOICES}
    if layout_options.get("recompute"):
        out["recompute"] = (layout_options["recompute"],)
    if layout_options.get("remat_policy"):  # the policy sets the recomputation: the search does not enumerate it
        if layout_options.get("recompute") or layout_options.get("recompute_modules"):
            raise TopoError(f"{layout_options['remat_policy']!r} sets recompute and recompute_modules itself; give "
                            "one or the other", key="--remat-policy")
        try:
            out["recompute"] = (remat_settings(layout_options["remat_policy"])["recompute"],)
        except RematPolicyError as exc:
            raise TopoError(str(exc), key="--remat-policy") from None
    if layout_options.get("dp_sharding"):
        out["dp_sharding"] = (layout_options["dp_sharding"],)
    if layout_options.get("micro_batch"):
        out["micro_batches"] = (layout_options["micro_batch"],)
    orders = args.rank_orders or layout_options.get("rank_order")
    if orders:
        out["rank_orders"] = tuple(o.strip() for o in orders.split(",") if o.strip())
    if layout_options.get("etp"):
        out["etps"] = (layout_options["etp"],)
    return out
