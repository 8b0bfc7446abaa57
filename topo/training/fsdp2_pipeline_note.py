"""The step's note where FSDP2 (``wgrad_output = "fsdp2"`` under ZeRO-3) runs under pipeline parallelism: what
torchtitan does there and topo does not price (walk45, section 453).

torchtitan shards every block and then each stage's whole model part (``fully_shard(model, ...)``,
pytorch/torchtitan@b5bcd76c ``torchtitan/distributed/fsdp.py`` line 368) and, under PP, does not reshard after
forward ("For PP, by default do not reshard after forward to avoid per-microbatch all-gathers", same file lines
129-132). Its stage module being an ``FSDPModule``, PyTorch's pipelining turns resharding and gradient sync off for
every backward until the schedule's last (pytorch/pytorch@01386103 ``torch/distributed/pipelining/stage.py``,
``backward_maybe_with_nosync``: ``set_reshard_after_backward(False)``, ``set_requires_gradient_sync(False)``): each
unit is gathered and reduce-scattered once a step, and the stage's gathered weights and unsharded gradients stay
in memory for the step. topo's ZeRO-3 gathers and reduce-scatters every micro-batch (NeMo AutoModel's stage is not
an ``FSDPModule``, and reduces every micro-batch: docs/calibration-findings.md section 18, "FSDP2's state and dtypes"), so it
says which it priced and leaves the choice to the user; nothing is repriced."""

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
    return ("FSDP2 under pp: priced gathering and reduce-scattering each unit every micro-batch; torchtitan, whose "
            "stage modules are themselves fully_shard-ed, runs PyTorch pipelining's FSDP branch instead: one gather "
            "and one reduce-scatter a step, the stage's gathered weights and unsharded gradients held through it "
            "(not modelled; dp_sharding fsdp_grad_op prices one gather a step with the gradients sharded)")
