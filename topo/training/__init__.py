"""Training jobs on the fabric: a model + a parallel layout -> one step's compute, communication, memory, MFU.

One idea per module: :mod:`.model` (model files), :mod:`.parallel` (the parallel layout and its checks),
:mod:`.mapping` (dimensions onto GPU ids, group matrices), :mod:`.flops` (FLOP counts and conventions),
:mod:`.gpus` (peaks and achievable efficiency per generation), :mod:`.memory` (memory per GPU),
:mod:`.comm` (the only door to the collective engine, cached), :mod:`.step` (one step's time),
:mod:`.tier_bytes` (the step's bytes per tier), :mod:`.search` (ranking layouts), :mod:`.result` (result types).

``topo.training.predict_mfu`` (:func:`topo.training.mfu.predict_mfu`) and ``parse_layout`` are imported on first use (a module
``__getattr__``, PEP 562): ``topo plan`` needs it only with ``--model``, and it imports the whole step model (about
8% of the instructions of ``topo plan``'s imports, callgrind), so the planner's command reads it from here.
"""

import importlib

# how a job spans a region's sites (topo.training.multisite.estimate_across_sites' ``across``): here, with no import,
# so that topo train and topo plan take the same words for the way across the sites without loading the step model
# (test_startup)
ACROSS_SITES = ("dp", "pp", "outer")

_LAZY = {"predict_mfu": ".mfu", "predict_step": ".mfu", "parse_layout": ".mfu", "layout_fields": ".parallel",
         "free_gpus": ".mapping", "job_gpus": ".mapping", "default_placement": ".mapping", "load_model": ".model", "SHARES": ".multisite",
         "DEFAULT_SHARES": ".multisite", "estimate_across_sites": ".multisite",
         "region_layout": ".multisite_layout"}  # name -> the module that defines it


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
