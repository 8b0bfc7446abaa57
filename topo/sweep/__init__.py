"""Studies: many points (designs, options, failure draws, seeds) computed on Dask, one tidy row per point.

>>> import topo.sweep as sw
>>> study = sw.study_from_dict({"spec": "dgx-h100-superpod", "axes": {"collective": ["all_reduce", "alltoall"],
...                                                                    "gpus": 16, "size": "1MiB"}})
>>> len(study.points())
2
>>> df = sw.sweep(study, scheduler="serial")
>>> list(df["collective"]), bool(df["error"].isna().all())
(['all_reduce', 'alltoall'], True)

``topo.sweep`` is this package and can be called as the function: ``topo.sweep("failures-100k", "out.parquet")``
is :func:`topo.sweep.sweep`.

One module per idea: :mod:`.study` (study files, points, hashes), :mod:`.point` (one point, the only door to
the engine), :mod:`.store` (the Parquet output folder), :mod:`.run` (batches on Dask, resumption),
:mod:`.summary` (uncertainty per design).
"""

import sys
import types

from .run import SweepRun, sweep
from .store import read_results
from .study import Study, bundled_studies, load_study, study_from_dict
from .summary import summarize

__all__ = ["sweep", "SweepRun", "Study", "load_study", "study_from_dict", "bundled_studies", "summarize",
           "read_results"]


class _CallableModule(types.ModuleType):
    """The package, callable as :func:`sweep` (so ``topo.sweep(...)`` runs a study and ``topo.sweep.summarize`` is
    still the package's function)."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
