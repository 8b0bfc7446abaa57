"""The map from the estimate options' library names to the command-line flags that set them.

Its own module, with no imports, so that :mod:`topo.cli.main` can name ``--fail`` in an error of any command
without importing ``topo estimate`` and the engine behind it.
"""

from __future__ import annotations

__all__ = ["FLAGS"]

# option (library name) -> the flag that sets it: library errors name the option, the CLI names the flag; the one
# map of flags (a traffic mix refuses the per-member ones by it, topo.cli.main names --fail by it)
FLAGS = {"gpus": "--gpus", "ranks": "--ranks", "placement": "--placement", "rail": "--rail", "groups": "--groups",
         "group_layout": "--group-layout", "rank_order": "--rank-order", "algorithm": "--algorithm", "op": "-o",
         "choose": "--choose", "protocol": "--protocol", "channels": "--channels", "chunks": "--chunks",
         "stages": "--stages", "ecmp": "--ecmp", "subflows": "--subflows", "hash_seed": "--hash-seed",
         "sharing": "--sharing", "pxn": "--no-pxn", "profile": "--profile", "collective": "--collective",
         "sizes": "--size", "min_bytes": "-b", "max_bytes": "-e", "factor": "-f", "step_bytes": "-i", "fail": "--fail",
         "gpus_per_process": "--gpus-per-process"}
