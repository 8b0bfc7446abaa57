"""Cluster specs: the typed model and the loader."""

from .load import DEFAULT_SPEC, apply_overrides, bundled_dir, bundled_specs, load_spec, spec_from_dict
from .model import ClusterSpec, FabricSpec, ScaleUpSpec, ServerSpec, Spec, TierSpec

__all__ = ["Spec", "ScaleUpSpec", "ServerSpec", "ClusterSpec", "FabricSpec", "TierSpec", "load_spec",
           "spec_from_dict", "apply_overrides", "bundled_specs", "bundled_dir", "DEFAULT_SPEC"]
