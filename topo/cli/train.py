"""``topo train``: a training step of a model on the fabric (step time, breakdown, memory, MFU), or a search."""

from __future__ import annotations

import argparse
import functools
import math
import re
import sys
from collections.abc import Callable

from ..errors import TopoError
from ..inputs import is_input_file
from ..units import (UnitError, format_count, format_in, format_size, format_suffixed_count, format_time,
                     parse_count)
from ..plan.blast import INTERRUPTING_CAUSE
from ..training.flops import CONVENTIONS, six_n_params
from ..training.framework_names import other_framework_hint
from ..training.fp8_amax import sp_amax_reduced
from ..training.gpus import gpu_compute
from ..training.jax_mesh import (MAXTEXT_DP_OVERLAP, MAXTEXT_FP8_AMAX, MAXTEXT_REMAT, MAXTEXT_STATE,
                                 RECOMPUTE_FIELDS, check_mesh_placement, global_batch_per_device,
                                 layout_from_mesh, maxtext_micro_batch, mesh_rank_order, parse_mesh)
from ..training.kernels import fp8_backward_published, host_launch_price
from ..training.mapping import FEWER_GPUS, job_gpus, placed_gpus_used
from ..training.multisite import DEFAULT_SHARES, SHARES
from ..training.result import SHOWN_WHERE_RUN
from ..training.ring_attention import CP_COMM_TYPES
from ..training.parallel import (DEFAULT_ORDER, DP_SHARDING, PIPELINE_SCHEDULES, RECOMPUTE, RECOMPUTE_MODULES,
                                 check_layout, delayed_scaling, ParallelLayout, layout_fields, load_layout, make_layout)
from ..training.model import ATTENTION_BLOCKS, Block, bundled_models, load_model
from ..training.search import PP_OVERLAP_NOTE, search_layouts
from ..training.op_table import step_op_table, step_stage_table, unmatched_module_recipes
from ..training.comm import CommEngine
from ..training.step import estimate_step
from ..training.tp_overlap_trade import tp_overlap_trade
from ..training.tp_overlap import userbuffers_built
from .across import add_across_arguments
from .common import GivenOnce, add_spec_arguments, fabric_from_args
from .estimate_args import add_profile_argument, profile_notes
from .layout_dp import filled_dp, layout_dp, placed_by, sized_by, skip_way_dp
from .search_options import layout_for_search, search_options
from .region import is_region_args
from .region_train import run_region_train
from .output import emit, emit_json, mfu_text, note, table
from .train_ops import print_op_table, print_stage_table
from .train_text import (bias_text, command_options, dispatcher_cell, dispatcher_searched, gb, given_flags, model_flag,
                         gpu_hours_text, memory_line, tight_memory_note, not_fit_line, recompute_cell, row_flags, runs_on,
                         span_line, uncertainty_line, activation_table, toml_value as _toml)


def register(sub) -> None:
    p = sub.add_parser(
        "train", help="a training step of a model on the fabric: step time, breakdown, memory, MFU; --search",
        description="Map a model's parallel layout (tp, cp, pp, dp, ep) onto the fabric's GPUs and estimate one "
        "training step: compute, pipeline bubble and each dimension's exposed communication (every group at "
        "once, through the collective engine), memory per GPU, tokens/s, TFLOPs per GPU and MFU. "
        f"Bundled models: {', '.join(bundled_models())}.")
    add_spec_arguments(p)
    _job_arguments(p)
    _memory_arguments(p)
    _placement_arguments(p)
    _output_arguments(p)
    p.set_defaults(func=run, command_options=command_options(p))  # after every option: what #1's line repeats


def _job_arguments(p) -> None:
    """The model, its layout, the batch and sequence."""
    p.add_argument("--model", required=True, help="a bundled model name or a model TOML file of the same keys (layers, "
                   "hidden, ffn_hidden, heads, kv_heads, vocab, seq_len, mlp; [attention], [moe], [mamba] tables; "
                   "a hybrid's layer_pattern: README 'Training jobs', topo/training/model.py)")
    p.add_argument("--layout", action=GivenOnce, default=None, metavar="L",
                   help="a layout TOML file (keys: tp, cp, pp, dp, ep, vpp, global_batch, recompute, ...), or the "
                        "same keys as pairs, tp=8,pp=16,dp=64,global_batch=2048 (as topo plan and topo report take "
                        "it); options given on the command line win; how the framework runs the step: "
                        "fp8_recipe=delayed|current|blockwise|mxfp8|nvfp4 (the last two Blackwell only) with --precision fp8 "
                        "(default: per-tensor scaling), fp8_param_gather=true (FP8 recipes), "
                        "mamba_mixer=megatron|mamba_ssm, "
                        "recompute_early_stop=true (full recomputation under PyTorch's non-reentrant checkpoint: "
                        "a layer's replay stops at its last saved tensor), "
                        "cross_entropy=fused|te|te_fp32_grad|torch_bf16|megatron_unfused, "
                        "expert_bias_eager=fc2|fc1_fc2|none, expert_clamp_eager=true|false, "
                        "attention_bias_eager=true|false, "
                        "rope_kernel=megatron|te_fused, ep_flex_backend=hybridep|deepep, cp_comm_type=p2p|all_gather|a2a, "
                        "dp_outer_sharding=optim with dp_sharding zero3 and dp_shard / expert_dp_shard (Megatron-FSDP's "
                        "HSDP outer_dp_sharding_strategy: the optimizer state sharded across the replica groups too, "
                        "their gradients reduce-scattered and weights gathered once a step; default no_shard), "
                        "moe_expert_kernels=multi_stream|fused_mlp (fused_mlp: MXFP8 experts), "
                        "wgrad_output=main_grad|fsdp2|copied|param_dtype|autograd, loss_scaling=true (FP16's gradient scaler), offload_modules=[\"expert_fc1\"] (Megatron-Core's fine-grained activation offloading: core_attn, attn_proj, expert_fc1, moe_act, fused_group_mlp), cudnn_version=\"9.13.1\" (the container's cuDNN: "
                        "Blackwell attention at that version's published rates; default the newest, 9.22); "
                        "te_version=\"1.8\" (the container's Transformer Engine: 2.x copies a row-parallel FP8 layer's "
                        "output gradient into userbuffers' buffer, 1.x casts it there; default the newest, 2.14); "
                        "attention_fp8=fp8|mxfp8 with --precision fp8 (TE's fp8_dpa; mxfp8 on Blackwell: the backward computes "
                        "the whole causal square, a sliding window's too, at cuDNN's FP8 rate, on GB200 / GB300 at "
                        "head dim 64); "
                        "an MoE recipe's: ep_dispatcher=alltoall|deepep, "
                        "overlap_ep=true, moe_grouped_gemm=true|false, moe_capacity_factor=1.0, "
                        "moe_router_fusion=true, ep_dispatch_bytes=1 (FP8 dispatch); a list as TOML writes it, "
                        "its words quoted: cuda_graph_scope=[\"attn\",\"moe_router\"]; an FP8 recipe's BF16 "
                        "layers: num_layers_at_start_in_bf16=2; an unknown key's error lists every key; "
                        "with --search, a layout "
                        "without sizes, held in every layout tried; on a region, the whole job's layout (dp counts "
                        "every site's replicas)")
    p.add_argument("--gpus", type=int, default=None, help="GPUs of the job (default: tp x cp x pp x dp)")
    for d in ("tp", "cp", "pp", "dp", "ep", "vpp"):
        p.add_argument(f"--{d}", type=int, default=None)
    p.add_argument("--etp", type=int, default=None, help="expert-tensor parallelism (default: tp); EP may span "
                   "tensor and data ranks, e.g. --tp 2 --ep 64 --etp 1")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--global-batch", type=int, default=None, help="sequences per step")
    p.add_argument("--per-device-batch", default=None, metavar="N",
                   help="with --jax-mesh: MaxText's per_device_batch_size, sequences per GPU, may be fractional "
                        "(0.5); the global batch is exactly it x GPUs (a whole number; --global-batch, if given, "
                        "must agree)")
    p.add_argument("--micro-batch", type=int, default=None, help="sequences per micro-batch (default 1)")


def _named(field: str, choices) -> Callable[[str], str]:
    """An argparse type for a flag of fixed ``choices``: another framework's name for one of them (torchtitan's
    ``Interleaved1F1B``, torchao's ``tensorwise``) is refused with what topo calls it or that topo does not model it
    (:func:`~topo.training.framework_names.other_framework_hint`); any other value goes on to argparse's choices."""
    def parse(value: str) -> str:
        hint = None if value in choices else other_framework_hint(field, value)
        if hint:
            raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(choices)}; {hint}")
        return value
    parse.__name__ = field
    return parse


def _memory_arguments(p) -> None:
    """Recomputation, activation offload and the pipeline's layers."""
    p.add_argument("--recompute", choices=RECOMPUTE, type=_named("recompute", RECOMPUTE), default=None)
    p.add_argument("--recompute-modules", default=None, metavar="A,B",
                   help=f"modules recomputed ({', '.join(RECOMPUTE_MODULES)})")
    p.add_argument("--remat-policy", default=None, metavar="POLICY",
                   help="a JAX remat policy (MaxText's remat_policy: minimal, save_dot_except_mlpwi, full...) in place "
                        "of --recompute and --recompute-modules")
    p.add_argument("--recompute-num-layers", type=int, default=None,
                   help="with --recompute full: only the first N layers of each stage")
    p.add_argument("--activation-offload-layers", type=int, default=None, metavar="N",
                   help="offload the saved activations of the first N layers to host memory (Megatron-Core's "
                        "cpu_offloading_num_layers; pp 1, no recomputation)")
    p.add_argument("--pipeline-embedding", action="store_true",
                   help="count the embedding and the loss as pipeline layers (126 layers on pp16 x vpp8)")
    p.add_argument("--pipeline-layout", default=None, metavar="LAYOUT",
                   help="layers per pipeline chunk in Megatron-Core's notation, e.g. 'Et*4|(t*4|)*14tmL' "
                        "(E embedding, t layer, m MTP, L loss; default: an even split)")
    p.add_argument("--cp-comm-type", choices=CP_COMM_TYPES, default=None,
                   help="how context parallelism exchanges K and V: p2p (default; ring attention, Megatron-Core's "
                        "default), all_gather (K/V gathered before the attention, exposed: Meta's Llama 3) or a2a "
                        "(Ulysses' all-to-alls: each TP rank's query and key/value heads divide by cp)")
    p.add_argument("--pipeline-schedule", choices=PIPELINE_SCHEDULES, default=None,
                   type=_named("pipeline_schedule", PIPELINE_SCHEDULES),
                   help="1f1b (default; interleaved with --vpp) or DeepSeek's dualpipe: rank i runs stages i and "
                        "pp-1-i, half the micro-batches from each end (even pp, no --vpp)")


def _placement_arguments(p) -> None:
    """How the layout lands on the GPUs and the fabric: domains, gradients, sharding, meshes, rank order, overlap."""
    p.add_argument("--gpus-per-domain-used", type=int, default=None, metavar="N",
                   help="use only N GPUs of each NVLink domain (64 of an NVL72 rack's 72)")
    p.add_argument("--grad-bytes", type=float, default=None,
                   help="bytes per gradient kept (default 4: fp32 main_grad, Megatron's bf16 default)")
    p.add_argument("--grad-reduce-bytes", type=float, default=None,
                   help="bytes per gradient in the data-parallel reduction (default: --grad-bytes)")
    p.add_argument("--no-contention", action="store_true",
                   help="time each dimension's collectives alone instead of as one traffic mix")
    add_profile_argument(p, "the step's collectives (each site's in a region; every layout's with --search)")
    p.add_argument("--dp-sharding", choices=DP_SHARDING, type=_named("dp_sharding", DP_SHARDING), default=None,
                   help="default zero1 (Megatron's distributed optimizer: the optimizer state sharded); zero3 or "
                        "fsdp: FSDP (weights, gradients and optimizer state sharded)")
    p.add_argument("--dp-shard", type=int, default=None, metavar="N",
                   help="hybrid sharding: shard what --dp-sharding shards over groups of N data-parallel ranks, "
                        "replicate it across the dp / N groups. Alone (zero1) that is the optimizer state only, "
                        "Megatron-Core's num_distributed_optimizer_instances = dp / N, not FSDP; for FSDP's HSDP "
                        "(torchtitan's data_parallel_shard_degree) give --dp-sharding zero3 too")
    p.add_argument("--jax-mesh", default=None, metavar="AXES",
                   help="a JAX mesh as MaxText writes it, e.g. ici_fsdp=8,dcn_data=4 (axes data, fsdp, tensor, "
                        "context, expert, pipeline) in place of --tp --cp --pp --dp --ep --dp-sharding; MaxText's "
                        "state bytes and XLA's latency-hiding scheduler (dp_overlap_policy xla_lhs) unless --layout "
                        "sets them")
    p.add_argument("--precision", choices=("bf16", "fp8"), type=_named("precision", ("bf16", "fp8")), default=None)
    p.add_argument("--no-sequence-parallel", action="store_true")
    p.add_argument("--no-flash-attention", action="store_true")
    p.add_argument("--rank-order", default=None, help=f"dimensions fastest first (default {DEFAULT_ORDER})")
    p.add_argument("--tp-across-domains", action="store_true", help="allow TP groups to span NVLink domains")
    p.add_argument("--first-gpu", type=int, default=None,
                   help="the job's first GPU id (default 0; without --dp or --gpus the job fills the GPUs from it, "
                   "past any --skip-domains)")
    p.add_argument("--skip-domains", action="append", default=None, metavar="N[,N...]",
                   help="NVLink domains (racks: nvswitchN's N) the job's placement passes over, e.g. a failed rack "
                   "(repeatable, as --fail: --skip-domains 5 --skip-domains 17 is 5,17); "
                   "a region: indices within a site (0 to its domains - 1), the same in every site's share, since "
                   "every site runs the same share (--fail SITE:nvswitchN names the failed one); topo plan and topo "
                   "report take it as --layout ...,skip_domains=[5,17]")
    p.add_argument("--overlap", action="append", default=[], metavar="DIM=on|off[,...]",
                   help="overlap rule per dimension, e.g. --overlap tp=on,dp=off or --overlap tp=on --overlap dp=off "
                        "(defaults: dp on, cp on, tp off, ep off, pp on with --vpp above 1 and off at vpp 1, as "
                        "Megatron-LM and NeMo set it)")


def _output_arguments(p) -> None:
    """The FLOP convention, efficiency, tokens, --search and its options, regions, --json."""
    p.add_argument("--flops", choices=CONVENTIONS, default="6n",
                   help="FLOP convention of TFLOPs/GPU and MFU: 6n (6N + attention, PaLM/Llama 3; default), "
                        "megatron (SC21 eq. 3: 4 passes, counts full recomputation), megatron-lm (what "
                        "Megatron-LM logs today: 3 passes, causal attention, padded vocabulary) or megatron-bridge "
                        "(what Megatron-Bridge logs: megatron-lm's count with sliding-window layers at their "
                        "window)")
    p.add_argument("--efficiency", type=float, default=None,
                   help="large-GEMM fraction of the BF16 peak at the sustained clock (default: the GPU's, from data/compute/kernels.toml)")
    p.add_argument("--tokens", default=None, help="also report the time to train this many tokens: 15T, 2.5B, "
                   "15e12, at the step without failures or restarts (topo plan --model --layout --tokens: with the "
                   "plan's goodput)")
    p.add_argument("--search", action="store_true", help="rank every valid layout that fits by step time")
    p.add_argument("--top", type=int, default=None, help="rows of the search table (default 10)")
    p.add_argument("--rank-orders", default=None, metavar="A,B",
                   help="with --search: rank orders to try, e.g. tp-cp-ep-dp-pp,tp-cp-ep-pp-dp")
    add_across_arguments(p)
    p.add_argument("--shares", choices=SHARES, default=DEFAULT_SHARES,
                   help="a region of sites of different sizes: each site's replicas of the job in proportion to its "
                   "GPUs (by-size, the default: with dp left out, the most replicas the sites' GPUs and the global "
                   "batch allow) or the same share on every site (equal: the smallest site's); --across pp runs "
                   "equal shares")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--ops", action="store_true",
                   help="also each block's operators as the model prices them: GPU forward/backward, the host's "
                        "launches, kernels (one micro-batch on one GPU; in --json, the key block_ops), and each "
                        "pipeline rank's compute (stage_compute)")
    p.add_argument("--memory", action="store_true",
                   help="also the activations per GPU by what holds them: one micro-batch's attention, MLP, MoE and "
                        "Mamba-2 layers, the logits and the pipeline's further micro-batches in flight (in --json "
                        "always: memory.activations_by_kind_bytes)")


_OVERLAP_DIMS = ("tp", "cp", "pp", "dp", "ep")  # what --overlap DIM=on|off sets (overlap_DIM)
_OVERLAP_FIELDS = tuple(f"overlap_{d}" for d in _OVERLAP_DIMS)  # not overlap_param_gather, a --layout field


def _overlaps(items) -> dict:
    """``{overlap_DIM: bool}`` of the ``--overlap`` values: each a comma-separated list of ``DIM=on|off`` (as
    ``--layout`` takes a list), the flag repeatable; a later item wins. A bad item raises naming it (and the value
    it came in, when that held more)."""
    out = {}
    for given in items:
        for it in given.split(","):
            k, _, v = it.partition("=")
            k, v = k.strip().lower(), v.strip().lower()
            if k not in _OVERLAP_DIMS or v not in ("on", "off"):
                where = f" in {given!r}" if it != given else ""
                raise TopoError(f"cannot read {it.strip()!r}{where}; write DIM=on or DIM=off (a comma-separated "
                                f"list for several) with DIM one of {', '.join(_OVERLAP_DIMS)}", key="--overlap")
            out[f"overlap_{k}"] = v == "on"
    return out


def _check_numbers(args) -> None:
    """Numbers the parser accepts but no job has: one clear line each."""
    if args.efficiency is not None and not 0 < args.efficiency <= 1:
        raise TopoError(f"must be a fraction of the GPU's peak in (0, 1], got {args.efficiency:g}",
                        key="--efficiency")
    if args.tokens is not None:  # inf printed "inf days"; walk26: 15T was "invalid float value"
        try:
            args.tokens = parse_count(args.tokens, "number of tokens")
        except UnitError as exc:
            raise TopoError(str(exc), key="--tokens") from None
    if args.top is not None and args.top < 1:
        raise TopoError(f"must be a whole number >= 1, got {args.top}", key="--top")
    for name in ("gpus", "tp", "cp", "pp", "dp", "ep", "etp", "vpp", "seq", "global_batch", "micro_batch",
                 "recompute_num_layers", "gpus_per_domain_used", "dp_shard"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise TopoError(f"must be a whole number >= 1, got {v}", key="--" + name.replace("_", "-"))
    if args.activation_offload_layers is not None and args.activation_offload_layers < 0:
        raise TopoError(f"must be a whole number >= 0, got {args.activation_offload_layers}",
                        key="--activation-offload-layers")


def _skip_domains(given: list[str] | None) -> tuple[int, ...] | None:
    """``--skip-domains``: NVLink domain indices, comma-separated, every flag's in order (None when not given; rev65:
    a repeated flag kept only the last one's)."""
    if not given:
        return None
    text = ",".join(x.strip().removeprefix("[").removesuffix("]") for x in given)  # the layout's list too
    parts = [x.strip() for x in text.split(",")]
    if not all(x.isdecimal() for x in parts):
        raise TopoError(f"must be NVLink domain indices (whole numbers >= 0, comma-separated, e.g. 5 or 5,17), got "
                        f"{text!r}", key="--skip-domains")
    return tuple(int(x) for x in parts)


def _layout_options(args) -> dict:
    """The layout's options the flags give (None where not given)."""
    modules = tuple(x.strip() for x in args.recompute_modules.split(",") if x.strip()) \
        if args.recompute_modules else None
    return dict(seq_len=args.seq, recompute=args.recompute, dp_sharding=args.dp_sharding, dp_shard=args.dp_shard,
                recompute_modules=modules, recompute_num_layers=args.recompute_num_layers,
                remat_policy=args.remat_policy,
                activation_offload_layers=args.activation_offload_layers,
                pipeline_embedding=True if args.pipeline_embedding else None,
                pipeline_layout=args.pipeline_layout, pipeline_schedule=args.pipeline_schedule,
                cp_comm_type=args.cp_comm_type,
                gpus_per_domain_used=args.gpus_per_domain_used, grad_bytes=args.grad_bytes,
                grad_reduce_bytes=args.grad_reduce_bytes, etp=args.etp,
                precision=args.precision, rank_order=args.rank_order, first_gpu=args.first_gpu,
                skip_domains=_skip_domains(args.skip_domains),
                micro_batch=args.micro_batch,
                sequence_parallel=False if args.no_sequence_parallel else None,
                flash_attention=False if args.no_flash_attention else None,
                tp_across_domains=True if args.tp_across_domains else None, **_overlaps(args.overlap))


def _check_applies(args) -> None:
    """Options that apply only to a region, or only to --search: given elsewhere, an error, not silently dropped."""
    if not is_region_args(args):
        for flag, value in (("--across", args.across), ("--outer-every", args.outer_every)):
            if value is not None:
                raise TopoError("applies to a region of several sites (a spec with [[sites]], e.g. two-site-h100)",
                                key=flag)
    if args.ops and (args.search or is_region_args(args)):
        raise TopoError("prints one layout's operators on one site; not with --search or a region of several "
                        "sites", key="--ops")
    if args.memory and (args.search or is_region_args(args)):
        raise TopoError("prints one layout's activations by kind on one site; not with --search or a region of "
                        "several sites", key="--memory")
    if args.rank_orders is not None and not args.search:
        raise TopoError("lists the rank orders --search tries; without --search give one order, --rank-order",
                        key="--rank-orders")
    if args.top is not None and not args.search:  # walk16: printed one layout, exit 0
        raise TopoError("sets the rows of --search's table; without --search there is one layout", key="--top")
    args.top = 10 if args.top is None else args.top
    if args.tokens is not None and args.search:  # walk16: no line, no key, exit 0
        raise TopoError("reports one layout's time to train; not with --search (give the layout it ranks, without "
                        "--search)", key="--tokens")


def run(args) -> int:
    """``topo train``: one step, a search or a region's job; a failed GPU's line names its placement as flags."""
    try:
        return _run(args)
    except TopoError as exc:
        if exc.key == "fail" and not exc.source:  # the library names the layout field (first_gpu), not its flag
            raise TopoError(note_flags(exc.message), key=exc.key) from None
        raise


def _run(args) -> int:
    _check_numbers(args)
    _check_applies(args)
    if args.jax_mesh is not None and is_region_args(args):
        raise TopoError("across sites, train takes the layout as flags (--tp --pp --dp --vpp --global-batch), as "
                        "--layout, or searches it (--search); not --jax-mesh yet", key="--jax-mesh")
    if is_region_args(args):
        try:
            return run_region_train(args, _layout_options(args), note_flags)
        except TopoError as exc:
            if exc.key == "skip_domains":  # place64: one rule, said where a region user meets it
                exc = TopoError(f"{exc.message} (in a region, indices within a site: every site's share is placed "
                                f"alike)", source=exc.source, key=exc.key)
            raise _as_flags(args, exc) from None
    fabric = fabric_from_args(args)
    if args.gpus is not None and args.gpus > fabric.layout.num_gpus:  # before the layout's own rules (walk8: a
        # global batch that did not split into 100,000 ranks was named, not the 2,304-GPU fabric)
        raise TopoError(f"{args.gpus:,} GPUs asked, but the fabric has {fabric.layout.num_gpus:,}{FEWER_GPUS}",
                        key="--gpus")
    try:
        engine = CommEngine(fabric, profile=args.profile)  # the one place the command's profile enters the engine
    except TopoError as exc:  # an unknown name: --profile, as estimate names it
        raise _as_flags(args, exc) from None
    for msg in profile_notes(args.profile, [fabric]):
        note(msg)
    model = load_model(args.model)
    common = _layout_options(args)
    if args.jax_mesh is not None and args.search:
        raise TopoError("gives the layout's sizes; drop --search (or the mesh)", key="--jax-mesh")
    _per_device_batch(args)
    if args.layout and not args.search:
        return _run_layout(args, fabric, model, common, engine)
    held: dict = {}  # the fields --layout holds fixed in every layout --search tries
    if args.search and args.layout:  # its fields held fixed in every layout tried; its global batch if no flag
        try:
            merged, layout_batch = layout_for_search(args.layout, common)
        except TopoError as exc:
            raise _as_flags(args, exc) from None
        held = {k: v for k, v in merged.items() if v is not None and common.get(k) is None}
        common = merged
        args.global_batch = args.global_batch or layout_batch
    if args.global_batch is None:
        what = "--search ranks layouts for a global batch" if args.search else "a step needs a global batch"
        raise TopoError(f"is required ({what}): sequences per optimizer step, e.g. --global-batch 1024",
                        key="--global-batch")
    if args.search:
        return _run_search(args, fabric, model, common, held, engine)
    sizes = {d: getattr(args, d) for d in ("tp", "cp", "pp", "dp", "ep", "vpp")}
    if args.jax_mesh is not None:  # an empty mesh is an error, not no mesh
        _apply_mesh(args, sizes, common, fabric, moe=model.moe is not None)
    filled = sizes["dp"] is None and args.gpus is None
    if sizes["dp"] is None:  # --gpus, else from the first GPU past the skipped domains (one rule: layout_dp)
        known = (sizes["tp"] or 1) * (sizes["cp"] or 1) * (sizes["pp"] or 1)
        sizes["dp"] = filled_dp(known, fabric, {f"--{d}": getattr(args, d) for d in ("tp", "cp", "pp")}, args.gpus,
                                common)
    try:
        lay = make_layout(global_batch=args.global_batch, **sizes, **common)
        check_layout(model, lay, gpus=args.gpus, gpus_per_domain=fabric.spec.gpus_per_domain)
    except TopoError as exc:
        raise _as_flags(args, exc) from None
    return _finish(args, _flags_step(args, fabric, model, lay, engine, filled), model, fabric, lay, engine)


def _flags_step(args, fabric, model, lay, engine: CommEngine, filled: bool):
    """The step of a layout the flags gave, its errors named by the flags (``filled``: dp filled the GPUs)."""
    try:
        return estimate_step(fabric, model, lay, convention=args.flops, efficiency=args.efficiency,
                             contention=not args.no_contention, engine=engine)
    except TopoError as exc:  # a job larger than the fabric: named by --gpus or --dp when that flag sized it
        if filled:  # a skip past a failure that the filled dp would refuse names dp (walk29 Left 6)
            exc = skip_way_dp(exc, fabric, lay.tp * lay.cp * lay.pp, lay.first_gpu,
                              gpus_per_domain_used=lay.gpus_per_domain_used,
                              batch=lay.global_batch // lay.micro_batch)
        if sized_by(exc, args.gpus, args.dp) is not exc:
            raise sized_by(exc, args.gpus, args.dp) from None
        if exc.source == "layout" and exc.key == "first_gpu":  # the flag's own: a layout gives none here
            raise TopoError(exc.message, key="--first-gpu") from None
        if exc.source == "layout" and _given_as_flag(args, exc.key):  # --skip-domains 999: not 'layout: ...'
            raise _as_flags(args, exc) from None
        raise exc from None


def _run_layout(args, fabric, model, common: dict, engine: CommEngine) -> int:
    """One step of the layout ``--layout`` gives (pairs or a TOML file), its errors named by flag or path."""
    sizes = {d: getattr(args, d) for d in ("tp", "cp", "pp", "dp", "ep", "vpp")}
    if args.jax_mesh is not None:  # the mesh gives the sizes and sharding; the layout the rest (memory, overlap)
        fields, _ = layout_fields(args.layout)
        clash = [k for k in _MESH_FIELDS if k in fields]
        if clash:
            raise TopoError(f"gives {', '.join(clash)} itself; drop {', '.join(clash)} from --layout (or the mesh)",
                            key="--jax-mesh")
        _apply_mesh(args, sizes, common, fabric, layout_keys=fields, moe=model.moe is not None)
    try:  # the step's own checks (an FP8 recipe the GPU lacks) are the layout's too
        if args.jax_mesh is None and sizes["dp"] is None:
            sizes["dp"] = layout_dp(args.layout, fabric, sizes, args.gpus, common)
        lay = load_layout(args.layout, global_batch=args.global_batch, **sizes, **common)
        check_layout(model, lay, gpus=args.gpus, gpus_per_domain=fabric.spec.gpus_per_domain, source=args.layout)
        result = estimate_step(fabric, model, lay, convention=args.flops, efficiency=args.efficiency,
                               contention=not args.no_contention, engine=engine)
    except TopoError as exc:  # pairs given on the command line are named by their flag, a file by its path
        if exc.source in ("layout", args.layout) and _given_as_flag(args, exc.key):  # a flag wins over the layout
            raise _as_flags(args, TopoError(exc.message, source="layout", key=exc.key)) from None
        if exc.source in ("layout", args.layout):
            pairs = "=" in args.layout and not (args.layout.endswith(".toml") or is_input_file(args.layout))
            raise TopoError(exc.message, source="--layout" if pairs else args.layout, key=exc.key) from None
        raise
    return _finish(args, result, model, fabric, lay, engine)


def _run_search(args, fabric, model, common: dict, held: dict, engine: CommEngine) -> int:
    """``--search``: rank the layouts that fit, with progress on a terminal; ``held``: the layout's fixed fields."""
    filled, words = job_gpus(fabric, common.get("first_gpu"), common.get("skip_domains"),
                             common.get("gpus_per_domain_used"))  # as a step fills them
    gpus = args.gpus or filled
    opts = search_options(args, common)
    progress = _progress() if sys.stderr.isatty() and not args.json else None
    try:
        res = search_layouts(fabric, model, gpus, args.global_batch, convention=args.flops,
                             efficiency=args.efficiency, top=args.top, progress=progress,
                             contention=not args.no_contention, engine=engine, **opts)
    except TopoError as exc:  # GPUs the placement sized: named by its flag, not --gpus (rev66)
        raise _as_flags(args, sized_by(exc, args.gpus, None, placed_by(args, words))) from None
    if progress is not None:
        sys.stderr.write("\n")
    if args.json:  # the model's size once, as a single layout's document gives it (walk41: no row had it)
        emit_json({**res.to_dict(top=args.top), **_model_size(model)})
    else:
        _print_search(res, args, held, model)
    return 0


def _per_device_batch(args) -> None:
    """``--per-device-batch``: MaxText's ``per_device_batch_size`` x the mesh's GPUs as ``--global-batch``
    (:func:`topo.training.jax_mesh.global_batch_per_device`), which must agree where both are given; only with
    ``--jax-mesh`` (tidy124, walk44 Left 1: a MaxText user multiplied it by hand)."""
    if args.per_device_batch is None:
        return
    if args.jax_mesh is None:
        raise TopoError("is MaxText's per_device_batch_size, sequences per GPU of a JAX mesh; give --jax-mesh with "
                        "it, or the batch as --global-batch", key="--per-device-batch")
    devices = math.prod(parse_mesh(args.jax_mesh, source="--jax-mesh").values())  # --gpus, if other, is refused
    batch = global_batch_per_device(args.per_device_batch, devices, source="--per-device-batch")
    if args.global_batch is not None and args.global_batch != batch:
        raise TopoError(f"{args.per_device_batch} x {devices:,} GPUs = {batch:,} sequences, but --global-batch is "
                        f"{args.global_batch:,}; allowed: --global-batch {batch:,} or no --global-batch (or no "
                        f"--per-device-batch)", key="--per-device-batch")
    dp = layout_from_mesh(args.jax_mesh, source="--jax-mesh")["dp"]
    if batch % dp:  # walk: 0.5 on an all-fsdp mesh was blamed on --global-batch, which the user did not give
        raise TopoError(f"{args.per_device_batch} x {devices:,} GPUs = {batch:,} sequences, which do not split into "
                        f"the mesh's {dp:,} data-parallel replicas (data x fsdp x expert; MaxText slices a batch "
                        f"below 1 per device, topo runs whole sequences a replica); allowed: a multiple of "
                        f"{dp / devices:g} ({dp:,} / {devices:,} GPUs)", key="--per-device-batch")
    args.global_batch = batch


def _apply_mesh(args, sizes: dict, common: dict, fabric, layout_keys=(), moe: bool = False) -> None:
    """Fill the layout's sizes and sharding from ``--jax-mesh`` (:func:`topo.training.jax_mesh.layout_from_mesh`)
    and MaxText's state bytes, DP overlap and FP8 amax handling (:data:`~topo.training.jax_mesh.MAXTEXT_STATE`,
    :data:`~topo.training.jax_mesh.MAXTEXT_DP_OVERLAP`, :data:`~topo.training.jax_mesh.MAXTEXT_FP8_AMAX`) where neither a flag nor the layout's fields ``layout_keys``
    set them, and MaxText's micro-batch (:func:`topo.training.jax_mesh.maxtext_micro_batch`: no gradient
    accumulation) where neither ``--micro-batch`` nor the layout gives one, and MaxText's ``remat_policy`` (:data:`~topo.training.jax_mesh.MAXTEXT_REMAT`)
    where neither a flag nor the layout says what is recomputed. ``moe``: the model has experts (their
    own shard group beside a data axis). A mesh whose ICI part would
    not lie in an NVLink domain of ``fabric`` (as the job uses them) is refused
    (:func:`topo.training.jax_mesh.check_mesh_placement`)."""
    given = [f"--{d.replace('_', '-')}" for d in _MESH_FIELDS if getattr(args, d, None) is not None]
    if given:
        raise TopoError(f"a mesh gives the tp, cp, pp, dp, ep and sharding sizes itself; drop {', '.join(given)}",
                        key="--jax-mesh")
    mesh = layout_from_mesh(args.jax_mesh, source="--jax-mesh", moe=moe)
    total = math.prod(parse_mesh(args.jax_mesh, source="--jax-mesh").values())
    if args.gpus is not None and total != args.gpus:  # walk21: was "dp: tp x cp x pp x dp = ...", no mesh axis named
        sizes_given = " x ".join(re.findall(r"=\s*(\d+)", args.jax_mesh))
        raise TopoError(f"{args.jax_mesh} multiplies to {sizes_given} = {total:,} GPUs, not the {args.gpus:,} of "
                        f"--gpus; allowed: ici_* and dcn_* sizes whose product is {args.gpus:,}, or no --gpus (the "
                        f"mesh's product)", key="--jax-mesh")
    order = check_mesh_placement(args.jax_mesh, _mesh_domain_used(total, fabric, common, layout_keys),
                                 source="--jax-mesh", domain_gpus=fabric.spec.gpus_per_domain)
    # walk44: ici_fsdp=16 on 8-GPU VMs ran as ici_fsdp=8,dcn_fsdp=2
    common.update(dp_sharding=mesh.pop("dp_sharding"), dp_shard=mesh.pop("dp_shard", None),
                  expert_dp_shard=mesh.pop("expert_dp_shard", None))
    sizes.update(mesh)
    from_layout = layout_keys if isinstance(layout_keys, dict) else {}
    batch = args.global_batch or from_layout.get("global_batch")
    chose = {}  # what the mesh chose where no flag or layout field did: the one source of --json's chosen_by and
    # the text's "chosen by the JAX mesh" line (tidy123: chosen_by named the FP8 amax on BF16 runs, not these)
    if common.get("micro_batch") is None and "micro_batch" not in layout_keys and isinstance(batch, int):
        # walk44: MaxText accumulates no gradients by default; micro-batches of 1 made 2,048 sequences on 256 GPUs 8
        chose["micro_batch"] = maxtext_micro_batch(batch, sizes["dp"], sizes["pp"])
    fp8 = (common.get("precision") or from_layout.get("precision")) == "fp8"  # BF16 casts no FP8 amax
    chose |= {k: v for k, v in (MAXTEXT_STATE | MAXTEXT_DP_OVERLAP | (MAXTEXT_FP8_AMAX if fp8 else {})).items()
              if k not in layout_keys and common.get(k) is None}
    if not any(k in layout_keys or common.get(k) for k in RECOMPUTE_FIELDS):  # walk44: MaxText's default, not none
        chose |= MAXTEXT_REMAT
    if common.get("rank_order") is None and "rank_order" not in layout_keys:
        # tidy123 (walk44 Left 2): MaxText's stages lie inside its data replicas, topo's default pp outermost
        if order != DEFAULT_ORDER:
            chose["rank_order"] = order
        elif mesh_rank_order(args.jax_mesh, source="--jax-mesh") is None:
            # tidy124 (tidy123 Left 1): said on the header too, not only in a note below the tables
            args.mesh_header = (f"rank order {DEFAULT_ORDER}, NOT MaxText's mesh order (fsdp inside the stages "
                                f"inside the data replicas, which no topo order places; see the note)")
            args.mesh_note = (f"{args.jax_mesh}: MaxText lays the fsdp ranks inside the pipeline stages and those "
                              f"inside the data replicas (mesh_axes, slowest first: data, stage, fsdp); topo's rank "
                              f"orders keep data parallelism one axis, so the stages here lie outside all of it "
                              f"(--rank-order {DEFAULT_ORDER}): both cross the DCN, but the pipeline and data "
                              f"groups hold other GPUs than MaxText's")
    common.update(chose)
    args.mesh_chose = tuple(k for k, v in chose.items() if v is not None)  # a batch that does not divide: the
    # layout's own check names it, the mesh chose nothing


def _mesh_domain_used(gpus: int, fabric, common: dict, layout_keys) -> int:
    """GPUs of each NVLink domain a mesh's job of ``gpus`` GPUs is placed at: ``gpus_per_domain_used`` where a flag
    or the layout gives it, else the step's own default placement's (:func:`~topo.training.mapping.placed_gpus_used`:
    64 of an NVL72 rack's 72 where the job fits at 64). rev107 (section 452): the ICI check read the flag alone, else
    the domain's every GPU, so ``ici_fsdp=72,dcn_data=7`` on 8 NVL72 racks passed and each 72-GPU ICI group was then
    placed across two racks (64 of each), and ``--layout gpus_per_domain_used=4`` passed ``ici_fsdp=8`` on 8-GPU
    VMs. A field of the wrong type is left to the layout's own check."""
    fields = layout_keys if isinstance(layout_keys, dict) else {}
    given = {k: common.get(k) if common.get(k) is not None else fields.get(k)
             for k in ("first_gpu", "skip_domains", "gpus_per_domain_used")}
    used, first, skip = given["gpus_per_domain_used"], given["first_gpu"], given["skip_domains"]
    if _whole(used):
        return used
    skip = tuple(skip) if isinstance(skip, (list, tuple)) and all(_whole(s) and s >= 0 for s in skip) else ()
    return placed_gpus_used(gpus, fabric.spec.gpus_per_domain, fabric.layout.num_gpus,
                            first if _whole(first) and first >= 0 else 0, skip)


def _whole(v) -> bool:
    """An int and not a bool (a layout field read as given)."""
    return isinstance(v, int) and not isinstance(v, bool)


_MESH_FIELDS = ("tp", "cp", "pp", "dp", "ep", "dp_sharding", "dp_shard",  # what --jax-mesh sets (_apply_mesh)
                "expert_dp_shard")


def _given_as_flag(args, key: str | None) -> bool:
    """Whether the layout field ``key`` (``ep``, ``remat_policy``, ``recompute_modules.0``) holds a value a flag gave,
    which wins over ``--layout``'s (walk14: ``--layout global_batch=96 --ep 48`` was blamed on ``--layout: ep``)."""
    name = (key or "").split(".")[0]
    if args.jax_mesh is not None and name in _MESH_FIELDS:
        return True
    if name in _OVERLAP_FIELDS:  # walk40: --overlap tp=on with fp8_recipe=nvfp4 was blamed on --layout: overlap_tp
        return name in _overlaps(getattr(args, "overlap", None) or [])
    return name not in ("", "layout") and getattr(args, name, None) not in (None, False)


@functools.cache
def _note_fields() -> dict:
    """The layout fields a step note may name and the flag that sets each here (``{field: flag}``): every
    :class:`ParallelLayout` field of more than one word (``gpus_per_domain_used``; a one-word field such as ``tp`` or
    ``precision`` is also a word of the notes' prose) that ``topo train`` has a ``--field-name`` flag for, and
    ``overlap_DIM``, which ``--overlap DIM=on|off`` sets. Derived from the parser, so a new flag is named without a
    list to keep (fix49's list held ``gpus_per_domain_used`` only, and the dualpipe note's ``overlap_ep=true`` stayed
    a field)."""
    import argparse
    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    parser = sub.choices["train"]
    dests = {a.dest: a for a in parser._actions if a.option_strings}
    flag = {f: "--" + f.replace("_", "-") for f in ParallelLayout.model_fields if "_" in f}
    fields = {f: x for f, x in flag.items() if f in dests and x in dests[f].option_strings}
    return fields | {f"overlap_{d}": "--overlap" for d in _OVERLAP_DIMS}


_ON, _OFF = ("true", "on", "1"), ("false", "off", "0")  # an overlap_DIM's values a note may write


def _switches() -> set:
    """The fields of :func:`_note_fields` whose flag takes no value (``--tp-across-domains``)."""
    import argparse
    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    return {a.dest for a in sub.choices["train"]._actions if a.option_strings and a.nargs == 0}


def _note_flag(text: str, field: str, value: str | None) -> str:
    """One field of a note (``field`` with its ``= value``, or None; ``text`` as the note writes them) as the flag
    that sets it; an ``overlap_DIM`` whose value is neither on nor off, and a switch's field set false (which no
    flag says), are left as written."""
    if field.startswith("overlap_"):  # --overlap ep=on; a bare overlap_ep is the setting on
        if value is not None and value.lower() not in _ON + _OFF:
            return text
        on = value is None or value.lower() in _ON
        return f"--overlap {field.removeprefix('overlap_')}={'on' if on else 'off'}"
    flag = _note_fields()[field]
    if field in _switches():  # walk16: "allow it with tp_across_domains" named the field, not --tp-across-domains
        return flag if value is None or value.lower() in ("true", "1") else text
    return flag + (f" {value}" if value is not None else "")


def note_flags(note: str) -> str:
    """A step note as the CLI says it: a layout field it names (``gpus_per_domain_used = 64``,
    ``overlap_ep=true``) as its flag (``--gpus-per-domain-used 64``, ``--overlap ep=on``); the library names
    fields, never flags.

    Parameters
    ----------
    note : str
        One of the library's notes (``StepResult.notes``, a search's notes).

    Returns
    -------
    str
        The note with each field of :func:`_note_fields` named by its flag.

    Examples
    --------
    >>> note_flags("gpus_per_domain_used = 72 fills the domains")
    '--gpus-per-domain-used 72 fills the domains'
    >>> note_flags("only overlap_ep=true hides them")
    'only --overlap ep=on hides them'
    """
    fields = sorted(_note_fields(), key=len, reverse=True)  # the longest first: dp_shard inside dp_sharding
    # a value runs to the next space or punctuation, less a sentence's full stop (a decimal's dot stays)
    pattern = r"\b(" + "|".join(fields) + r")\b(?: ?= ?([^\s,;:)]+?)(?=\.?(?:[\s,;:)]|$)))?"
    return re.sub(pattern, lambda m: _note_flag(m[0], m[1], m[2]), note)


def _as_flags(args, exc: TopoError) -> TopoError:
    """A library error about a value the user gave as a flag, named by that flag (``--ep``, not ``layout: ep``)."""
    if exc.source in (None, "layout") and exc.key in _OVERLAP_FIELDS and getattr(args, "overlap", None):
        return type(exc)(f"{exc.key}: {exc.message}", key="--overlap")  # the layout field --overlap DIM=on sets
    if exc.source in (None, "layout") and exc.key == "seq_len" and getattr(args, "seq", None) is not None:
        return type(exc)(note_flags(exc.message), key="--seq")  # the field --seq sets (was "layout: seq_len")
    if exc.source not in (None, "layout") or not exc.key or not hasattr(args, exc.key.split(".")[0]):
        return exc
    if getattr(args, "jax_mesh", None) is not None and exc.key in _MESH_FIELDS:  # a size the mesh gave, not a flag
        return type(exc)(f"{exc.key}: {exc.message}", key="--jax-mesh")
    return type(exc)(note_flags(exc.message), key="--" + exc.key.split(".")[0].replace("_", "-"))  # not
    # --recompute-modules.0; a field the message names is its flag too (walk16: "allow it with tp_across_domains")


def _progress():
    """A one-line progress report on the terminal (stderr), rewritten in place."""
    def show(done: int, total: int | None, what: str) -> None:
        if total is None:  # a count without a known end (the search's passes)
            sys.stderr.write(f"\r{done:,} {what}\033[K")
        else:
            sys.stderr.write(f"\r{what}: {done:,} of {total:,}\033[K" + ("\n" if done >= total else ""))
        sys.stderr.flush()
    return show


def stop_notes(fabric, r) -> list[str]:
    """Each failed part whose failure stops the job first (:data:`~topo.plan.blast.INTERRUPTING_CAUSE`: a NIC, as
    the failure table counts it, goodput69), said beside the step after the restart, with why train does not price
    the stop: detection, restart, the checkpoint's reload and the work since it set it, which are the plan's
    storage sizing and renewal goodput (``topo plan --model --layout``'s goodput and failure impact)."""
    L = r.layout
    layout = ",".join(f"{k}={L[k]}" for k in ("tp", "cp", "pp", "vpp", "dp", "ep", "micro_batch", "global_batch"))
    out = []
    for part in fabric.failures:
        kind = re.match(r"(?:[\w-]+:)?([a-z]+)\d+(?:\.\d+)?$", str(part))
        if kind and kind[1] in INTERRUPTING_CAUSE:
            out.append(f"{part} stops the job when it fails (the failure table's '{INTERRUPTING_CAUSE[kind[1]]}' "
                       f"interruptions, Llama 3 Table 5, topo/data/catalog/reliability.toml): the step above is the "
                       f"one after the restart on the parts left. The stop's cost (detection, restart, the "
                       f"checkpoint's reload and the work since the last checkpoint) is not in it: it depends on the "
                       f"checkpoint's write and reload times, which the plan's storage sizes, and train sizes none; "
                       f"topo plan {fabric.name} --model {r.model} --layout {layout} gives the job's goodput, which "
                       f"counts these stops at the failure table's rate (its failure impact: a NIC 'stops the job')")
    return out


def _finish(args, r, model, fabric, lay, engine: CommEngine) -> int:
    stops = stop_notes(fabric, r)  # said as written: its command's --layout pairs are no flags (note_flags)
    if args.json:
        r.notes += stops
    # ux107 (walk40 Left 4): with userbuffers, the same step without them, and a note where they cost more than hide
    trade = tp_overlap_trade(fabric, model, lay, r, convention=args.flops, efficiency=args.efficiency,
                             contention=not args.no_contention, engine=engine)
    if trade is not None and trade.note():
        r.notes.append(trade.note())
    r.chosen_by.update(dict.fromkeys(getattr(args, "mesh_chose", ()), "jax_mesh"))
    if getattr(args, "mesh_note", None):
        r.notes.append(args.mesh_note)
    ops = step_op_table(fabric, model, lay, args.efficiency) if args.ops else None
    stages = step_stage_table(fabric, model, lay, args.efficiency, r.ep_cover_s) if args.ops else None
    if args.json:
        emit_json({**r.to_dict(train_tokens=args.tokens), **_model_size(model),
                   **({"tp_overlap_trade": trade.to_dict()} if trade is not None else {}),
                   **({"block_ops": ops, "stage_compute": stages} if ops else {})})
    else:
        _print_step(r, args.tokens, model, args.memory, getattr(args, "mesh_header", None))
        for n in stops:
            emit(f"note: {n}")
        if ops:
            print_op_table(ops)
            print_stage_table(stages, r.layout["microbatches"])
    return 0


def _model_size(model) -> dict:
    """The model's weights as ``--json`` gives them: every weight, and those one token goes through (walk24: a model
    file of one's own had its size nowhere in train's output)."""
    return {"model_params": model.total_params, "model_active_params": model.active_params}


def _model_line(model) -> str:
    """The model's size: every weight and those one token goes through, embeddings included, as
    :attr:`topo.training.model.ModelSpec.total_params` and ``active_params`` count them."""
    n = _model_size(model)
    active = f", {n['model_active_params'] / 1e9:.2f}B active a token" if model.moe is not None else ""
    return (f"model    {model.name}: {n['model_params'] / 1e9:.2f}B parameters{active} (embeddings included; "
            f"{model.layers} layers)")


def _flop_line(r, model) -> str:
    """The model FLOPs a token that TFLOPs/GPU and MFU count (``--flops``), and for ``6n`` its two parts, so the
    figure can be redone by hand: walk28, "558 (6n)" beside "8.03B parameters" read as 6 x 8.03B (464)."""
    per_token = r.model_flop_per_step / r.tokens_per_step
    if r.flop_convention != "6n":
        return f"FLOP     {per_token / 1e9:.1f} GFLOP a token counted ({r.flop_convention}, --flops)"
    n = six_n_params(model)
    return (f"FLOP     {per_token / 1e9:.1f} GFLOP a token counted (6n, PaLM's: 6 x {n / 1e9:.2f}B weights without "
            f"the input embedding + {(per_token - 6 * n) / 1e9:.1f} GFLOP of attention scores); TFLOPs/GPU = that "
            "x tokens/s / GPUs")


def _sharding(L: dict) -> str:
    """The layout's data-parallel sharding, as the header line says it."""
    text = f" {L['dp_sharding']}" if L.get("dp_sharding") not in (None, "none") else ""
    if L.get("dp_shard"):
        text += f" over groups of {L['dp_shard']} (hybrid{_hybrid_zero(L)})"
    if L.get("expert_dp_shard"):  # a JAX mesh's expert axis beside its data axis: the experts' own shard group
        n = L["expert_dp_shard"]
        text += f", experts' state over groups of {n}" if n > 1 else ", experts' state not sharded"
    if L.get("dp_outer_sharding") == "optim":
        text += ", optimizer state sharded across the replicas too (dp_outer_sharding optim)"
    return text


def _hybrid_zero(L: dict) -> str:
    """What hybrid ZeRO-1 / ZeRO-2 shards, said on the header line where a torchtitan / FSDP user reads
    ``--dp-shard N`` as HSDP (walk45, section 453 Left 4): under zero1 the optimizer state alone, as Megatron-Core's
    ``num_distributed_optimizer_instances`` = dp / N (NVIDIA/Megatron-LM@d98e8a64 megatron/core/parallel_state.py
    lines 927-929, :mod:`topo.training.multisite_memory`); "" under ZeRO-3 / FSDP, which is HSDP already."""
    what = {"zero1": "the optimizer state", "zero2": "the optimizer state and gradients"}.get(L.get("dp_sharding"))
    if not what:
        return ""
    groups = L["dp"] // L["dp_shard"]
    megatron = f", Megatron-Core's num_distributed_optimizer_instances {groups}" if L["dp_sharding"] == "zero1" else ""
    return f": {what} sharded in each, {groups} replicas{megatron}; not FSDP, which is --dp-sharding zero3"


def _recompute_idle(module: str, model) -> str:
    """Why recomputing Megatron-Core's ``module`` changes nothing on ``model`` (no block it recomputes), or ""."""
    dense, moe = model.num_dense_layers, model.num_moe_layers
    blocks = {"mlp": (dense, "dense MLP layers; moe and moe_act recompute the experts"),
              "mlp_act": (dense, "dense MLP layers; moe_act recomputes the experts' activation"),
              "moe": (moe, "MoE layers"), "moe_act": (moe, "MoE layers"),
              "mlp_wi": (dense + moe, "MLP or MoE layers"),
              "mla_up_proj": (model.attention.kind == "mla", "MLA attention")}
    count, what = blocks.get(module, (True, ""))
    return "" if count else f"{model.name} has no {what}"


def _recompute(L: dict, model) -> str:
    """The layout's recomputation, as the header line says it: the JAX remat policy, full recomputation, or
    selective and its modules, each marked where ``model`` has nothing it recomputes; "" for none."""
    if L.get("remat_policy"):
        policy, n = L["remat_policy"], model.num_mamba_layers
        if n and policy not in ("none", "full"):  # walk21: a hybrid's Mamba-2 layers kept whole, silently
            return (f", remat {policy} (names MaxText's attention and MLP tensors; the {n} Mamba-2 layers keep every "
                    f"activation: MaxText has no Mamba-2 layer whose names it could save or not)")
        return f", remat {policy}"
    mods = L.get("recompute_modules") or ()
    if L.get("recompute") == "full":
        # walk43, tidy121: full recomputation leaves the modules nothing, in the layers it recomputes whole and in
        # those past the first n, which keep every activation (Megatron-Core reads recompute_modules only under
        # selective granularity: topo.training.activation_bytes.modules_recomputed, its sources)
        n = L.get("recompute_num_layers")
        idle = (f"recompute modules {', '.join(mods)}: no effect, " + (
            "Megatron-Core recomputes no module under full recomputation, the other layers keep every activation"
            if n else "every layer is recomputed whole")) if mods else ""
        if n:
            return f", recompute full (the first {n} layers of each stage" + (f"; {idle}" if idle else "") + ")"
        return ", recompute full" + (f" ({idle})" if idle else "")
    parts = []
    flash = L.get("flash_attention", True)
    if L.get("recompute") == "selective" and not (mods and flash):  # without flash: the s x s scores
        parts.append("selective" + (" (no effect: flash attention keeps no s x s scores; --recompute-modules "
                                    "names what to recompute)" if flash else ""))
    for m in mods:
        why = _recompute_idle(m, model)
        parts.append(m + (f" (no effect: {why})" if why else ""))
    return ", recompute " + ", ".join(parts) if parts else ""


# the layout fields saying how the framework runs the step (as its recipe sets them), shown when not the default
FRAMEWORK_OPTIONS = ("cp_comm_type", "fp8_recipe", "fp8_amax_reduction", "tp_only_amax_red", "fp8_scale_inverse_kernel",
                     "fp8_amax_pass",
                     "fp8_param_gather", "num_layers_at_start_in_bf16",
                     "num_layers_at_end_in_bf16", "module_recipes", "mamba_mixer", "cross_entropy", "expert_bias_eager",
                     "expert_clamp_eager", "attention_bias_eager", "rope_kernel", "ep_dispatcher", "ep_flex_backend", "ep_comm_sms",
                     "moe_counts_aligned", "moe_expert_kernels", "moe_grouped_gemm", "moe_capacity_factor",
                     "moe_expert_rank_capacity_factor", "moe_router_fusion", "overlap_ep", "ep_dispatch_bytes",
                     "cuda_graph_scope", "wgrad_output", "loss_scaling", "dp_bucket_params", "dp_align_grad_reduce", "tp_overlap_config",
                     "cudnn_version", "te_version", "attention_fp8", "dp_all_reduce_combine_bytes", "dp_overlap_policy",
                     "recompute_early_stop", "offload_modules", "overlap_param_gather")


def _dp_idle(L: dict) -> str:
    """Why the data-parallel collectives' options change nothing: no gradient is reduced across ranks (``dp x cp``
    is 1; the gradients reduce over the data- and context-parallel ranks together, Megatron-Core's dp_cp group),
    or ""."""
    return "dp x cp 1: no data-parallel collective" if L.get("dp", 1) * L.get("cp", 1) == 1 else ""


def _param_gather_idle(L: dict) -> str:
    """Why ``overlap_param_gather`` changes nothing, or "": it sets the distributed optimizer's once-a-step weight
    gather apart (:func:`topo.training.parallel.dp_overlapped`), which ZeRO-0 has none of and ZeRO-3 / FSDP overlaps
    with its units' gathers whatever it says (Megatron-FSDP turns it on when it shards the weights: its optimizer-
    sharded replicas' gather too; all follow overlap_dp)."""
    sharding = L.get("dp_sharding", "zero1")
    if sharding == "none":
        return "dp_sharding none gathers no weights"
    if sharding not in ("zero3", "fsdp"):
        return ""
    if L.get("dp_outer_sharding", "no_shard") != "optim":
        return f"dp_sharding {sharding} gathers per unit, which overlap_dp sets"
    return ("Megatron-FSDP overlaps its weight gathers whatever overlap_param_gather says, its optimizer-sharded "
            "replicas' with its units' (overlap_dp)")  # rev109: it sets the flag on when it shards the weights


def _all_reduce_idle(L: dict) -> str:
    """Why the XLA all-reduce combine threshold changes nothing, or "": ZeRO-1/2 reduce-scatter the gradients, and
    ZeRO-3 / FSDP all-reduce them only across hybrid sharding's replicas (``dp_shard`` below ``dp``)."""
    sharding = L.get("dp_sharding", "none")
    if sharding in ("zero1", "zero2", "fsdp_grad_op"):
        return f"dp_sharding {sharding} reduce-scatters the gradients"
    dp = L.get("dp", 1)
    if sharding in ("zero3", "fsdp") and (L.get("dp_shard") or dp) >= dp:
        return "no hybrid-sharding replicas: the gradients are reduce-scattered"
    return ""


def _fp8_recipe_idle(L: dict, model) -> str:
    """Why the layout's ``fp8_recipe`` prices nothing differently from per-tensor scaling (the default), or "":
    delayed is per-tensor scaling (unless ``fp8_amax_reduction`` or ``fp8_scale_inverse_kernel`` prices Transformer
    Engine's delayed-scaling work); current scaling always prices its amax and scale kernels
    (:func:`topo.training.operators.cast_kind`, :func:`topo.training.kernels.fp8_recipe_costs`)."""
    recipe = L.get("fp8_recipe")
    if recipe == "delayed" and not (L.get("fp8_amax_reduction") or L.get("fp8_scale_inverse_kernel")):
        return ("per-tensor scaling, priced as fp8_recipe unset (Megatron-Core's default, delayed) is; "
                "fp8_amax_reduction (its default) adds "
                "Transformer Engine's amax reductions, fp8_scale_inverse_kernel = true its 2.0-2.6 scale inverse "
                "kernels")
    return ""


def _amax_aside(L: dict) -> str:
    """What the options line says of ``fp8_amax_reduction`` (``L`` holds what runs, ``L["chosen_by"]`` whether the
    layout, the default or a JAX mesh chose it, :attr:`topo.training.result.StepResult.chosen_by`; :func:`topo.training.fp8_amax.amax_reduced`), or "" to leave it out:
    shown with delayed scaling, or where a layout turned it on."""
    delayed = delayed_scaling(_fp8_layout(L))
    by = L.get("chosen_by", {}).get("fp8_amax_reduction")
    if by == "default" and delayed and L.get("fp8_recipe") is None:
        return ("the default: fp8_recipe unset runs Megatron-Core's default recipe, delayed, and Transformer "
                "Engine's reduce_amax")
    if by == "default" and sp_amax_reduced(_fp8_layout(L)):
        return ("the default with current scaling and sequence parallelism: Transformer Engine all-reduces each "
                "gathered input's amax over the TP group")
    if by == "default":
        return "the default with delayed scaling: Transformer Engine's reduce_amax" if delayed else ""
    if by == "jax_mesh":
        return "a JAX mesh's default: Flax's FP8 ops reduce no amax buffer" if delayed else ""
    return "set by the layout" if delayed or L.get("fp8_amax_reduction") else ""


def _tp_overlap_idle(L: dict, model) -> str:
    """Why the layout's ``tp_overlap_config`` changes nothing, or "": only TP overlapped by userbuffers (``overlap_tp``,
    sequence parallelism, ``tp > 1``) of a model built with them (:func:`topo.training.tp_overlap.userbuffers_built`)
    runs its GEMMs through a communicator (:func:`topo.training.tp_overlap.pass_margins`)."""
    if L.get("tp", 1) <= 1:
        return "tp 1: no tensor-parallel GEMM"
    if not L.get("overlap_tp") or not L.get("sequence_parallel", True):
        return "no userbuffers TP overlap (overlap_tp and sequence_parallel)"
    if not userbuffers_built(model):
        return "Megatron-Core builds an MLA model without userbuffers"
    return ""


def _ep_sms_idle(L: dict, model) -> str:
    """Why the layout's ``ep_comm_sms`` changes nothing, or "": only the flex dispatcher's kernels (``ep_dispatcher
    = "deepep"``) and DeepSeek's under DualPipe run on that many SMs; the ``alltoall`` dispatcher's NCCL send/recv
    pairs run on NCCL's p2p channels (:func:`topo.training.step.ep_held_sms`, the one place it is decided)."""
    if model.moe is None:
        return f"{model.name} has no experts"
    if L.get("ep_dispatcher") == "deepep" or L.get("pipeline_schedule") == "dualpipe":
        return ""
    return "the alltoall dispatcher's NCCL send/recv kernels run on NCCL's p2p channels"


def _module_recipes_idle(L: dict, model) -> tuple[str, str]:
    """Why the layout's ``module_recipes`` changes nothing (every module it names is absent from ``model``), or
    which of its modules are absent when only some are: ``(idle, aside)``, "" where it does not apply."""
    if not L.get("module_recipes"):
        return "", ""
    lay = ParallelLayout.model_construct(**{k: v for k, v in L.items() if k in ParallelLayout.model_fields})
    absent = unmatched_module_recipes(model, lay)
    if not absent:
        return "", ""
    why = f"{model.name} has no {', '.join(absent)}"
    return (why, "") if len(absent) == len(set(e.split("=", 1)[0].strip() for e in L["module_recipes"])) \
        else ("", f"no effect on {', '.join(absent)}: {why}")


def _graph_scope_idle(L: dict, model) -> tuple[str, str]:
    """Why the layout's ``cuda_graph_scope`` captures nothing (no block of ``model`` holds a part it names), or which
    parts have no block when only some do: ``(idle, aside)``, "" where it does not apply. Megatron-Core's ``mlp``
    captures dense MLP layers only, ``moe`` / ``moe_router`` / ``moe_preprocess`` MoE layers
    (NVIDIA/Megatron-LM@01b9cb23 megatron/core/transformer/enums.py ``CudaGraphScope``: "Captures MLP layers (dense
    layers only)"); an MTP depth's blocks count (walk43: ``["attn", "mlp"]`` on a hybrid with no dense MLP layer
    said nothing of ``mlp``)."""
    scope = tuple(L.get("cuda_graph_scope") or ())
    if not scope or "full_iteration" in scope:
        return "", ""
    held = set("".join(model.blocks) + (model.mtp_block if model.mtp_layers else ""))
    what = {"attn": (held & set(ATTENTION_BLOCKS), "attention layers"), "mlp": (Block.MLP in held, "dense MLP layers"),
            "mamba": (Block.MAMBA in held, "Mamba-2 layers"),
            **dict.fromkeys(("moe", "moe_router", "moe_preprocess"), (Block.MOE in held, "MoE layers"))}
    absent = [p for p in scope if not what[p][0]]
    if not absent:
        return "", ""
    why = f"{model.name} has no " + ", no ".join(dict.fromkeys(what[p][1] for p in absent))
    return (why, "") if len(absent) == len(scope) else ("", f"no effect on {', '.join(absent)}: {why}")


def _framework_options(L: dict, model, gpu) -> str:
    """The layout's :data:`FRAMEWORK_OPTIONS` that differ from the defaults (``cp_comm_type`` whenever cp > 1), as
    ``key value`` pairs, each marked where ``model``, the layout or ``gpu`` (its :class:`topo.training.gpus.GpuCompute`: its
    generation, its attention table) gives it nothing to change (or, for ``fp8_recipe = "blockwise"`` on a
    Blackwell GPU, that it runs as MXFP8), or "" when every one is the default."""
    generation = gpu.generation
    fields = ParallelLayout.model_fields
    idle = {"cp_comm_type": "cp 1" if L.get("cp", 1) == 1 else "",
            "mamba_mixer": "" if "M" in (model.layer_pattern or "") else f"{model.name} has no Mamba-2 layers",
            "expert_bias_eager": "" if model.moe is not None and model.moe.expert_bias
            else f"{model.name} has no expert biases",
            "expert_clamp_eager": "" if model.moe is not None and model.moe.glu_clamp is not None
            else f"{model.name} has no activation clamp",
            "attention_bias_eager": "" if model.attention.out_bias
            else f"{model.name}'s attention output has no bias",
            "attention_fp8": "" if fp8_backward_published(gpu.kernels.attention_table, L.get("attention_fp8", ""),
                                                          model.qk_dim)
            else f"{gpu.name} publishes no FP8 attention backward at {model.name}'s head dim {model.qk_dim}",
            "rope_kernel": "" if model.attention.rope and model.attention.rope_concentration != 1.0
            else f"{model.name}'s rotary has no concentration factor",
            "ep_flex_backend": f"{model.name} has no experts" if model.moe is None
            else "" if L.get("ep_dispatcher") == "deepep" else "it picks the flex dispatcher's kernels: ep_dispatcher "
            "is alltoall",
            "moe_counts_aligned": f"{model.name} has no experts" if model.moe is None
            else "" if L.get("precision") == "fp8" else "only FP8 pads the experts' rows",
            "ep_dispatcher": f"{model.name} has no experts" if model.moe is None else "",
            "ep_comm_sms": _ep_sms_idle(L, model), "fp8_recipe": _fp8_recipe_idle(L, model),
            **dict.fromkeys(("overlap_ep", "ep_dispatch_bytes"), "ep 1: no all-to-all" if L.get("ep", 1) == 1 else ""),
            "dp_bucket_params": _dp_idle(L), "tp_overlap_config": _tp_overlap_idle(L, model),
            "te_version": _tp_overlap_idle(L, model) or ("" if L.get("precision") == "fp8" else "only an FP8 "
                                                          "output gradient is copied into userbuffers' buffer by TE 2.x"),
            "cudnn_version": "" if generation in ("blackwell", "hopper", "") else f"{generation} reads one attention "
            "table (cuDNN versions are published for Hopper and Blackwell only)",
            "dp_all_reduce_combine_bytes": _dp_idle(L) or _all_reduce_idle(L),
            "dp_overlap_policy": _dp_idle(L) or ("" if L.get("overlap_dp", True) else "overlap_dp is off: every "
                                                 "data-parallel collective is exposed"),
            "recompute_early_stop": "" if L.get("recompute") == "full" else "recompute is not full",
            "offload_modules": "recompute full: a fully recomputed layer saves only its input, nothing inside it to "
            "offload" if L.get("recompute") == "full" and L.get("recompute_num_layers") is None else "",
            "overlap_param_gather": _dp_idle(L) or _param_gather_idle(L),
            "dp_align_grad_reduce": _dp_idle(L) or ("" if L.get("vpp", 1) > 1 else "vpp 1: the first stage, which "
                                                    "ends the step, reduces its buckets as they are ready either way")}
    # Transformer Engine emulates block-wise scaling on Blackwell with MXFP8 GEMMs (kernels.toml [fp8_recipe])
    aside = {"fp8_recipe": "run as mxfp8: Transformer Engine emulates block-wise scaling on Blackwell with MXFP8 "
             "GEMMs" if L.get("fp8_recipe") == "blockwise" and generation == "blackwell" else ""}
    aside["fp8_amax_reduction"] = _amax_aside(L)
    idle["module_recipes"], aside["module_recipes"] = _module_recipes_idle(L, model)
    idle["cuda_graph_scope"], aside["cuda_graph_scope"] = _graph_scope_idle(L, model)
    shown = []
    for k in FRAMEWORK_OPTIONS:
        if k == "fp8_amax_reduction" and not aside[k]:
            continue
        if k in L and (L[k] != fields[k].default or (k == "cp_comm_type" and L.get("cp", 1) > 1)):
            why, note = idle.get(k, ""), aside.get(k, "")
            shown.append(f"{k} {_toml(L[k]) if isinstance(L[k], (list, tuple)) else str(L[k]).lower()}"
                         + (f" (no effect: {why})" if why else f" ({note})" if note else ""))
    return ", ".join(shown)


def _print_step(r, tokens, model, memory: bool = False, warning: str | None = None) -> None:
    """One step as text; ``warning``: said on the header line, after the layout (a JAX mesh topo cannot place as
    MaxText does)."""
    L = r.layout
    short = not_fit_line(r.memory.to_dict(), r.gpu)
    if short:
        emit(short)
    emit(f"{r.model} on {r.spec}: {format_count(r.gpus)} x {r.gpu} ({r.precision}), "
         f"tp={L['tp']} cp={L['cp']} pp={L['pp']} (vpp={L['vpp']}) dp={L['dp']} ep={L['ep']}"
         f"{_sharding(L)}{_recompute(L, model)}, "
         f"{L['global_batch']} x {r.tokens_per_step // L['global_batch']} tokens per step, "
         f"{L['microbatches']} micro-batch{'es' if L['microbatches'] != 1 else ''} of {L['micro_batch']}"
         + (f"; {warning}" if warning else ""))
    emit(f"step time   {format_time(r.step_time_s)}   tokens/s {r.tokens_per_s:,.0f}   "
         f"TFLOPs/GPU {r.tflop_per_s_per_gpu:.0f} ({r.flop_convention})   "
         f"{mfu_text(r.mfu, r.peak_precision or r.precision, r.peak_flop_per_s_per_gpu)}")
    line = uncertainty_line(r.uncertainty)
    if line:
        emit(line)
    if tokens:
        emit(_time_to_train_line(r, tokens))
    emit("")
    emit(table([[k, format_time(v), f"{v / r.step_time_s:.1%}"] for k, v in r.breakdown_s.items()
                if v or k not in SHOWN_WHERE_RUN],  # only where they run (fp8_amax.amax_step, fp8_weight_cast)
               ["component", "time", "share"], right=[False, True, True]))
    emit(_components_legend(L, r.compute_by_module_s.get("host", 0.0) > 0, r.breakdown_s.get("fp8_amax", 0.0) > 0,
                            r.breakdown_s.get("fp8_weight_cast", 0.0) > 0))
    if r.contention:
        emit("one step as one traffic mix: " + ", ".join(f"{k} x{v:.2f}" for k, v in r.contention.items())
             + " (slowdown of each dimension's collectives from sharing links with the others)")
    host = r.compute_by_module_s.get("host", 0.0)
    emit(_model_line(model))
    emit(_flop_line(r, model))
    cpu = r.host_cpu
    if cpu:
        origin = "server.host_cpu" if cpu["source"] == "spec" else "the GPU's default"
        emit(f"host CPU {cpu['name']} ({origin}): {cpu['time_factor']:.2f} x the reference {cpu['reference']}'s host time per "
             f"launched op (topo/data/compute/host_cpu.toml)")
    emit(f"collectives priced with profile {r.profile} (--profile to change)")
    load = _expert_load(L)
    if load:
        emit(load)
    options = _framework_options({**L, "chosen_by": r.chosen_by}, model, gpu_compute(r.gpu))
    if options:
        emit(f"framework options: {options} (layout fields)")
    mesh = _mesh_chose(r)
    if mesh:
        emit(mesh)
    if host > 0:
        emit(_host_bound_line(L, host, r.step_time_s))
    emit("")
    rows = [[c.dim, c.collective + (f" {c.phase}" if c.phase else "") + (f" ({c.what})" if c.what else ""),
             format_size(c.size_bytes),
             f"{c.calls_per_step:g}", format_time(c.time_s), format_time(c.exposed_s),
             f"{c.num_groups} x {c.group_size}", c.algorithm, c.level or "-", c.link or "-"] for c in r.comm]
    emit(table(rows, ["dim", "collective", "size", "calls", "total", "exposed", "groups", "algorithm",
                      "bound by tier", "link"], right=[False, False, True, True, True, True, True, False, False, False]))
    m = r.memory
    emit("")
    emit(memory_line(m.to_dict(), r.layout))
    if memory:
        emit(activation_table(m.to_dict()))
    tight = tight_memory_note([("this layout", m.total_bytes, m.capacity_bytes)])
    if tight:
        emit(f"note: {tight}")
    for n in r.notes:
        emit(f"note: {note_flags(n)}")


def _mesh_chose(r) -> str:
    """The line naming the layout fields a JAX mesh chose (``r.chosen_by``'s ``jax_mesh`` entries, which ``--json``
    gives as they are) with the values they hold, or "" where it chose none."""
    def text(v) -> str:
        return f"{v:g}" if isinstance(v, float) else str(v).lower()
    chosen = [f"{k} {text(r.layout[k])}" for k, by in r.chosen_by.items() if by == "jax_mesh"]
    return ("chosen by the JAX mesh (MaxText's defaults; a flag or layout field sets each): " + ", ".join(chosen)
            if chosen else "")


def _host_bound_line(L: dict, host_s: float, step_s: float) -> str:
    """The host wait's line: how long, what launches eagerly, and what each launch is priced at (a fitted average
    framework call: a step that it dominates, such as per-expert FP8 casts, is as sure as that price)."""
    scope = L.get("cuda_graph_scope") or ()
    how = (f"the kernels outside cuda_graph_scope = {_toml(scope)}; capturing more parts takes them off the host"
           if scope else "eager: no CUDA graph; the layout's cuda_graph_scope takes captured parts off the host")
    price_s, status = host_launch_price()
    return (f"host-bound: {format_time(host_s)} of the compute ({host_s / step_s:.1%} of the step) is the GPU waiting "
            f"for the host's kernel launches ({how}); each launch is priced at an average framework call, "
            f"{format_time(price_s)} x the host CPU's factor (kernels.toml [launch] host_s, {status})")


def _expert_load(L: dict) -> str:
    """The busiest EP rank's dropless load and where it comes from, the padded capacity, or "" (dense, one EP
    rank)."""
    factor = L.get("moe_capacity_factor")
    if factor is not None and "moe_busiest_rank_load" in L:  # an MoE model dropping and padding to capacity
        return (f"expert load: padded to capacity, every expert computes {factor:g} x the mean rows of each rank "
                f"(moe_capacity_factor; tokens beyond it dropped, static shapes whatever the routing: no rank "
                f"waits for a busier one)")
    load = L.get("moe_busiest_rank_load")
    if load is None or L["ep"] <= 1:
        return ""
    why = ("the layout's moe_imbalance" if L.get("moe_imbalance") is not None
           else "the consecutive gate: every expert the same count" if L.get("moe_routing") == "consecutive"
           else "a uniform router's expected maximum: exact under forced balancing, a floor for a trained router; "
                "the layout's moe_imbalance overrides")
    return (f"expert load: dropless, the busiest of {L['ep']} EP ranks carries {load:.3f} x the mean ({why}); its "
            f"expert GEMMs and all-to-all set each MoE layer's pace")


def _time_to_train_line(r, tokens: float) -> str:
    """``time to train``: the days, the job's GPU-hours and the days at the uncertainty interval's ends, without
    failures (what they cost is topo plan's goodput)."""
    b = r.train_budget(tokens)
    days = format_in(b["time_to_train_s"], "days", ".1f")
    span = b.get("time_to_train_interval_s")
    within = (f"; {format_in(span[0], 'days', '.1f')} - {format_in(span[1], 'days', '.1f')} at the uncertainty's "
              f"ends" if span else "")
    return (f"time to train {format_suffixed_count(tokens)} tokens: {days}, {gpu_hours_text(b['gpu_hours_to_train'])} GPU-hours on "
            f"{format_count(r.gpus)} "
            f"GPUs{within} (at the step, no failures or restarts: topo plan --model --layout --tokens gives the "
            "time with the plan's goodput)")


def _components_legend(L: dict, host_wait: bool, amax: bool = False, weight_cast: bool = False) -> str:
    """What the step's components are (they add up to the step) and what shrinks each, for the text output."""
    mb = L["microbatches"]
    return (f"components add up to the step: compute = the busiest pipeline stage's kernels for its {mb} "
            f"micro-batch{'es' if mb != 1 else ''}{' (with the host wait below)' if host_wait else ''}; bubble = the pipeline's fill and "
            f"drain (more micro-batches per step or vpp shrink it); optimizer = the Adam step on this GPU's shard; "
            f"tp, cp, pp, dp, ep = each dimension's communication not hidden behind compute (the collectives' "
            f"exposed column; --overlap hides more)"
            + (_amax_legend(L) if amax else "")
            + ("; fp8_weight_cast = Transformer Engine's FP8 cast of the BF16 linear weights, once a step (the first "
               "micro-batch's, every pipeline stage's in turn; fp8_param_gather keeps them in FP8)" if weight_cast else "") + _pp_overlap_legend(L))


def _pp_overlap_legend(L: dict) -> str:
    """The legend's word on the pipeline sends (pp > 1): overlapped or exposed, and whether that is the layout's
    default (``overlap_pp`` on with vpp > 1, off at vpp 1: :class:`ParallelLayout`'s field) or set against it."""
    if L.get("pp", 1) == 1:
        return ""
    on, interleaved = bool(L.get("overlap_pp")), L.get("vpp", 1) > 1
    how = "hidden behind compute" if on else "exposed"
    if on == interleaved:
        why = ("the default with vpp > 1, Megatron-LM's overlap_p2p_comm; --overlap pp=off exposes them" if on else
               "the default at vpp 1, where Megatron-LM runs no p2p overlap")
    else:
        why = f"set against the default, which is {'on' if interleaved else 'off'} at vpp {L.get('vpp', 1)}"
    return f"; the pipeline's sends are {how} (overlap_pp {'on' if on else 'off'}: {why})"


def _amax_legend(L: dict) -> str:
    """The components legend's ``fp8_amax`` entry: delayed scaling's buffer reductions, or current scaling's TP
    all-reduces under sequence parallelism (:mod:`topo.training.fp8_amax`)."""
    if sp_amax_reduced(_fp8_layout(L)):
        return ("; fp8_amax = Transformer Engine's blocking amax all-reduces of current FP8 scaling over the TP "
                "group, one before each sequence-parallel input (forward) or output gradient (backward) it "
                "quantises and gathers")
    return ("; fp8_amax = Transformer Engine's blocking amax reductions of delayed FP8 scaling, after each "
            "model chunk's forward and backward (layout fp8_amax_reduction)")


def _fp8_layout(L: dict) -> ParallelLayout:
    """The fields of the layout that ran (``L``) that say which FP8 scaling and amax reductions it runs."""
    return ParallelLayout.model_construct(**{k: L[k] for k in (
        "precision", "fp8_recipe", "fp8_amax_pass", "fp8_amax_reduction", "sequence_parallel", "tp") if k in L})


def _print_search(res, args, held: dict, model) -> None:
    """The search's counts, its ranked layouts (``args.top``), and the fields ``--layout`` held fixed in each
    (``held``); a recomputation of nothing in ``model`` (a module it has no block for) under the table; #1 as the
    command that steps it, the command's own options kept."""
    top = args.top
    emit(f"{res.model} on {res.spec}, {format_count(res.gpus)} GPUs, global batch {res.global_batch}: "
         f"{res.considered} layouts considered, {res.rejected_invalid} break a divisibility rule, "
         f"{res.rejected_memory} do not fit, {res.pruned} pruned by their compute bound, {res.evaluated} "
         f"evaluated in {format_time(res.elapsed_s)} ({res.engine_calls} engine calls); collectives priced with "
         f"profile {res.profile}")
    rows = []
    for i, r in enumerate(res.ranked[:top], 1):
        L, b = r.layout, r.breakdown_s
        bound = r.bound_by()
        costs = {k: b[k] for k in ("tp", "cp", "pp", "dp", "ep", "fp8_amax", "bubble")}
        costs["host wait"] = r.compute_by_module_s.get("host", 0.0)  # inside compute: the GPU idle for launches
        worst = max(costs, key=costs.get)
        why = f"{worst} {format_time(costs[worst])}" + (f" ({bound[worst]['level']})" if worst in bound else "")
        rows.append([i, L["tp"], L["cp"], L["pp"], L["vpp"], L["dp"], L["ep"], L["micro_batch"], recompute_cell(L),
                     L["dp_sharding"], format_time(r.step_time_s), f"{r.tflop_per_s_per_gpu:.0f}", f"{r.mfu:.1%}",
                     gb(r.memory_per_gpu_bytes), format_time(b["compute"]), why])
    orders = {r.layout["rank_order"] for r in res.ranked[:top]}
    extra = (["rank order"] if len(orders) > 1 else []) + (["dispatcher"] if dispatcher_searched(
        [r.layout for r in res.ranked[:top]], held, model.moe is not None) else [])
    for row, r in zip(rows, res.ranked):
        row[10:10] = [r.layout["rank_order"] if name == "rank order" else dispatcher_cell(r.layout) for name in extra]
    emit(table(rows, ["#", "tp", "cp", "pp", "vpp", "dp", "ep", "mb", "recompute", "sharding"]
               + extra + ["step", "TFLOPs", "MFU", "memory", "compute", "largest overhead"],
               right=[True] * 8 + [False, False] + [False] * len(extra) + [True, True, True, True, True, False]))
    tight = tight_memory_note([(f"#{i}", r.memory_per_gpu_bytes, r.memory.capacity_bytes)
                               for i, r in enumerate(res.ranked[:top], 1)])
    if tight:
        emit(f"note: {tight}")
    if held:
        emit("held in every layout (--layout): " + ", ".join(f"{k} = {_toml(v)}" for k, v in held.items()))
    idle = sorted({_recompute(r.layout, model).removeprefix(", ") for r in res.ranked[:top]} - {""})
    for text in (t for t in idle if "no effect" in t):
        emit(text)
    u = res.ranked[0].uncertainty if res.ranked else {}
    if u.get("runs"):
        emit(f"uncertainty of each step: on {runs_on(u)} of {u['label']} models whose "
             f"family the fit never saw, half were within {u['p50']:.0%} of the measured step, nine in ten within "
             f"{u['p90']:.0%}{bias_text(u)} (#1: {format_time(u['low_s'])} - "
             f"{format_time(u['high_s'])})")
        if u.get("span"):
            emit(f"{span_line(u)} (#1)")
    if res.ranked:
        L = res.ranked[0].layout  # a vpp-1 pipeline the search turned a held overlap_pp off on: stepped as it was
        pp_off = " --overlap pp=off" * (PP_OVERLAP_NOTE in res.notes and L["pp"] > 1 and not L.get("overlap_pp"))
        emit(f"#1's breakdown: topo train {' '.join(given_flags(args) + [''])}{model_flag(args)} "
             f"--global-batch {res.global_batch} "
             f"{row_flags(L, bool(extra), held)}{pp_off}")
    for n in res.notes:
        emit(f"note: {note_flags(n)}")
