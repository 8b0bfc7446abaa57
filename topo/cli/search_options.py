"""The options of a layout search from ``topo train``'s flags (one site or across sites)."""

from __future__ import annotations

from ..errors import TopoError
from ..training.remat import RematPolicyError, remat_settings

__all__ = ["SEARCH_CHOICES", "search_options"]

SEARCH_CHOICES = ("recompute", "dp_sharding", "micro_batch", "rank_order", "etp")
"""Layout fields a search enumerates (narrowed to the one a flag gives); the other layout flags are fixed for it."""


def search_options(args, layout_options: dict) -> dict:
    """The options of a layout search (:func:`topo.training.search.search_layouts`) from ``topo train``'s flags:
    the layout fields given are fixed, the choices it enumerates narrowed to those given; the sizes it chooses
    (``--tp --cp --pp --dp --ep --vpp``) are refused, not silently replaced."""
    sizes = [f"--{d}" for d in ("tp", "cp", "pp", "dp", "ep", "vpp") if getattr(args, d, None) is not None]
    if sizes:
        raise TopoError(f"the search chooses tp, cp, pp, dp, ep and vpp itself; drop {', '.join(sizes)} (or --search, "
                        "to evaluate that layout)", key="--search")
    out = {k: v for k, v in layout_options.items() if v is not None and k not in SEARCH_CHOICES}
    if args.recompute:
        out["recompute"] = (args.recompute,)
    if layout_options.get("remat_policy"):  # the policy sets the recomputation: the search does not enumerate it
        if args.recompute or layout_options.get("recompute_modules"):
            raise TopoError(f"{layout_options['remat_policy']!r} sets recompute and recompute_modules itself; give "
                            "one or the other", key="--remat-policy")
        try:
            out["recompute"] = (remat_settings(layout_options["remat_policy"])["recompute"],)
        except RematPolicyError as exc:
            raise TopoError(str(exc), key="--remat-policy") from None
    if args.dp_sharding:
        out["dp_sharding"] = (args.dp_sharding,)
    if args.micro_batch:
        out["micro_batches"] = (args.micro_batch,)
    orders = args.rank_orders or args.rank_order
    if orders:
        out["rank_orders"] = tuple(o.strip() for o in orders.split(",") if o.strip())
    if args.etp:
        out["etps"] = (args.etp,)
    return out
