"""The step's note where FSDP2 (``wgrad_output = "fsdp2"`` under ZeRO-3) runs under pipeline parallelism: which of
the two published ways of running it the step priced (``ParallelLayout.fsdp_pipeline_sync``; walk45, section 453;
fsdp2pp128, section 457).

torchtitan shards every block and then each stage's whole model part (``fully_shard(model, ...)``,
pytorch/torchtitan@b5bcd76c ``torchtitan/distributed/fsdp.py`` line 368) and, under PP, does not reshard after
forward ("For PP, by default do not reshard after forward to avoid per-microbatch all-gathers", same file lines
129-132). Its stage module being an ``FSDPModule``, PyTorch's pipelining turns resharding and gradient sync off for
every backward until the schedule's last (pytorch/pytorch@01386103 ``torch/distributed/pipelining/stage.py``,
``backward_maybe_with_nosync``: ``set_reshard_after_backward(False)``, ``set_requires_gradient_sync(False)``): each
unit is gathered and reduce-scattered once a step, and the stage's gathered weights and unsharded gradients stay
in memory for the step (``fsdp_pipeline_sync = "step"``). NeMo AutoModel's stage is not an ``FSDPModule``: it
gathers and reduces every micro-batch (docs/calibration-findings.md section 18, "FSDP2's state and dtypes"),
topo's default (``microbatch``). The note says which was priced and names the other."""

from __future__ import annotations

__all__ = ["fsdp2_pipeline_note"]


def fsdp2_pipeline_note(lay) -> str | None:
    """The note for FSDP2 under pipeline parallelism, else None.

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    str or None
    """
    if lay.pp == 1 or lay.zero_stage != 3 or lay.wgrad_output != "fsdp2":
        return None
    if lay.fsdp_pipeline_sync == "step":
        return ("FSDP2 under pp: priced as PyTorch pipelining runs a fully_shard-ed stage module (torchtitan): each "
                "unit gathered once a schedule run, its gradients accumulated unsharded in the reduce dtype and "
                "reduce-scattered after the stage's last backward, behind no compute (fsdp_pipeline_sync step; "
                "NeMo AutoModel's per-micro-batch way: microbatch)")
    return ("FSDP2 under pp: priced gathering and reduce-scattering each unit every micro-batch (NeMo AutoModel); "
            "torchtitan, whose stage modules are themselves fully_shard-ed, runs PyTorch pipelining's FSDP branch "
            "instead: one gather and one reduce-scatter a schedule run, the stage's gathered weights and unsharded "
            "gradients held through it (fsdp_pipeline_sync step, with fsdp_reshard_after_forward false)")
