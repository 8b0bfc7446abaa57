"""Activation offloading's copy time: what a stage's offloaded activations cost beside its compute.

Megatron-Core offloads either whole layers (``cpu_offloading_num_layers``, the layout's ``activation_offload_layers``,
through Transformer Engine's ``get_cpu_offload_context``) or the saved inputs of chosen modules
(``fine_grained_activation_offloading`` with ``offload_modules``). Both copy on side CUDA streams with the copy
engines, not on SMs:

- per module (NVIDIA/Megatron-LM@2a75ac12, the submodule NVIDIA-NeMo/Megatron-Bridge@067f987d pins,
  ``megatron/core/pipeline_parallel/fine_grained_activation_offload.py``): after a module's forward its group's
  saved tensors are copied device to host on ``d2h_stream`` (``on_group_commit_forward``: the stream waits for the
  compute stream, then ``bulk_offload_group``, pinned host buffers, ``non_blocking``); the compute stream does not
  wait for it (``fine_grained_offloading_max_inflight_offloads`` None). In the backward, once a group's backward is
  done the next group to reload is copied host to device on ``h2d_stream`` (``on_group_start_backward`` ->
  ``bulk_reload``), and the compute stream waits for that reload before the group's backward
  (``on_group_commit_backward``: ``wait_reload_event``); a reload waits for its own offload
  (``wait_offload_event``);
- whole layers (NVIDIA/TransformerEngine@d0067d0d ``transformer_engine/pytorch/cpu_offload.py`` lines 287-357):
  one ``offload_stream`` copies each offloaded layer out after its forward and back before its backward
  (``double_buffering`` is accepted and unused, line 698).

So a micro-batch's copies out hide behind its forward and its copies back behind its backward (and the
recomputation in it); what exceeds them is exposed: ``max(0, bytes / rate - window)`` a direction
(:func:`exposed_copy_s`), each direction on its own copy engine at the link's per-direction rate
(``topo/data/compute/host_memory_links.toml``: PCIe Gen5 x16 for H100, NVLink-C2C for GB200). The windows are a
stage's whole forward and backward, not each module's own gap, and the rates are the links' raw ones, so the
exposed time is a lower bound. The copies also read and write HBM beside the compute (at most the link's rate,
a few percent of HBM's); that contention is not charged.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..errors import TopoError
from ..resources import data_dir
from .activation_bytes import block_activation_bytes, block_offload_bytes, fully_recomputed
from .pipeline_layout import END_UNITS

__all__ = ["host_link_Bps", "exposed_copy_s", "offload_exposed_s", "stage_offload_bytes"]


@lru_cache(maxsize=1)
def _links() -> dict:
    return tomllib.loads(data_dir("compute", "host_memory_links.toml").read_text(encoding="utf-8"))["gpus"]


def host_link_Bps(gpu: str) -> float:
    """Bytes/s a direction between GPU model ``gpu`` and its host CPU's memory (``host_memory_links.toml``).

    Raises
    ------
    TopoError
        A GPU the file does not list, naming the ones it does.
    """
    row = _links().get(gpu)
    if row is None:
        raise TopoError(f"no host-memory link for GPU {gpu!r} to offload activations over; known: "
                        f"{', '.join(_links())}", source="topo/data/compute/host_memory_links.toml", key="gpu")
    return float(row["bandwidth_per_direction_Bps"])


def exposed_copy_s(moved_bytes: float, rate_Bps: float, window_s: float) -> float:
    """Seconds of a side-stream copy of ``moved_bytes`` at ``rate_Bps`` that the ``window_s`` of compute beside it
    does not hide: ``max(0, moved_bytes / rate_Bps - window_s)``.

    Examples
    --------
    >>> exposed_copy_s(64e9, 64e9, 0.25)
    0.75
    >>> exposed_copy_s(6.4e9, 64e9, 0.25)
    0.0
    """
    return max(0.0, moved_bytes / rate_Bps - window_s)


def offload_exposed_s(moved_bytes: float, rate_Bps: float, forward_s: float, backward_s: float) -> tuple[float, float]:
    """One micro-batch's exposed offload seconds on a stage: ``(forward, backward)``.

    Parameters
    ----------
    moved_bytes : float
        Bytes the stage's offloaded activations take one way per micro-batch (copied out in the forward and back
        in the backward).
    rate_Bps : float
        The host link's rate a direction (:func:`host_link_Bps`).
    forward_s, backward_s : float
        The stage's forward, and backward with its recomputation, per micro-batch: the windows.

    Returns
    -------
    tuple of float
        Seconds the forward's copies out and the backward's copies back exceed their windows.
    """
    return exposed_copy_s(moved_bytes, rate_Bps, forward_s), exposed_copy_s(moved_bytes, rate_Bps, backward_s)


def stage_offload_bytes(model, lay, units: list, flags: list) -> float:
    """Bytes one micro-batch's offloaded activations take one way on a stage of ``units`` (their BF16 ``flags``,
    as :func:`.operators.pipeline_units` and :func:`.operators.bf16_layers` give them): the whole saved activations
    of its first ``activation_offload_layers`` layers (:func:`.activation_bytes.block_activation_bytes`), or each block's
    ``offload_modules`` (:func:`.activation_bytes.block_offload_bytes`) of each layer not recomputed whole
    (:func:`.activation_bytes.fully_recomputed`: autograd saves nothing inside it to copy); 0 without either."""
    if not (lay.offload_modules or lay.activation_offload_layers):
        return 0.0
    total, layer_i = 0.0, 0
    for u, f in zip(units, flags):
        if u in END_UNITS:
            continue
        if lay.offload_modules:
            total += 0.0 if fully_recomputed(lay, layer_i) else sum(block_offload_bytes(model, lay, k, f)[0]
                                                                    for k in u)
        elif layer_i < lay.activation_offload_layers:
            total += sum(block_activation_bytes(model, lay, k, f) for k in u)
        layer_i += 1
    return total
