"""Training-step accuracy: predict the step time of every published run we hold, in-sample and leave-one-run-out.

Runs (each row cites its source): ``data/reference/training_runs.csv`` (Megatron-LM SC21 Table 1 on DGX A100,
Llama 3 405B Table 4 on Meta's H100 cluster; TFLOPs/GPU converted to step time with the source's own FLOP count)
and ``data/reference/training_runs_published.csv`` (NeMo / Megatron-Bridge performance tables on DGX-H100, DGX-B200
and DGX-GB200, BF16, FP8 and MXFP8 (each recipe's GEMM rate and quantisation: kernels.toml [fp8_recipe]), dense
and MoE; NeMo AutoModel and JAX MaxText on DGX-H100 and Google Cloud A3 / A4; DeepSeek-V3 on 2,048 H800; MLPerf Training v5.0 / v4.1 logs:
Llama 3.1 405B on H100, H200 and GB200, GPT-3 175B on H100; MLPerf Training v6.0 logs: DeepSeek-V3 on 256-2,048 GB200; sources by run_id prefix in data/reference/README.md). Groups: dense BF16, dense FP8, MoE.

What the step model reads is kernel physics (``topo/data/compute/kernels.toml``, :mod:`topo.training.kernels`):
GEMMs by tile and wave quantisation at the published maximum achievable matmul rate of each GPU and its published
sustained (power-saturated) share, cuDNN attention by head dimension and length, HBM-bound kernels, launch gaps.
What no source gives is fitted, each within its physical range (mean absolute log step-time error, smoothed
below 1% so that its minimum is one point; golden-section search):

- one fraction of the sustained GEMM rate per (generation, precision) that training frameworks reach, on the
  DENSE runs only (a key without a dense run keeps 1.0; Blackwell BF16 without one would take Blackwell FP8's);
- the CPU time of one kernel launch, within its published 5-20 us, on the MoE runs (the only ones where the host
  binds: a dropless router's device-to-host sync each MoE layer); searched over four times that range and held
  inside it, the report saying where the runs alone would put it.

Scores (per group: dense BF16, dense FP8, coarse MoE (<= 16 experts), fine-grained MoE, hybrid SSM; per GPU
generation):

- in-sample: every row predicted with the values fitted on all rows;
- leave-one-model-family-out (the headline): every row predicted with the values refitted without any run of its
  model family (near-twins of one model at other scales or in other releases are held out together);
- hold-out: the rows of ``data/reference/training_runs_holdout.csv``, which no fit reads.

Runs measured under a software regression their publisher filed (``REGRESSED``, read from
``data/reference/training_runs_regressed.csv``, each with its issue) are scored in-sample and out of family like
every other run, but no fit reads them.

Per-source settings (not fitted; from each source's description of the run): Megatron SC21 2021, as the paper's
artifact ran it (NVIDIA/Megatron-LM@de7dc40f88 ``examples/sc21/``: ``training_runs.csv``'s ``micro_batch``, ``vpp``,
``grad_bytes``, ``overlap_dp`` columns, :data:`run_recipe_columns.PAPER_COLUMNS`): no fused attention, full
recomputation, micro-batch 16 / 16 / 16 / 8 / 4 / 2 / 2 / 1 / 1 / 1, interleaving on the 76B-530B rows with blocking
pipeline sends, plain data parallelism with fp16 gradients reduced in fp16 (``--fp16``, priced at the bf16 rate, equal
on A100), PyTorch DDP's all-reduce overlapped with the backward (1.7B-18B) and Megatron's local DDP's after it (39B
up), the gradients accumulated by PyTorch into ``param.grad`` and copied, unscaled and checked by 2021's fp16
optimizer (``wgrad_output = "autograd"``, ``loss_scaling``); Llama 3: fused
attention, FSDP SHARD_GRAD_OP with fp32 reduce-scatter, 4 interleaved stages, context parallelism by an all-gather of K
and V, exposed (sec. 3.3.2), the embedding and the loss counted as pipeline layers (the paper: "first and last stage one
layer fewer"); NeMo / Megatron-Bridge recipes: fused attention, ring attention under CP (Megatron-Core's default
``cp_comm_type``, ``p2p``), the distributed optimizer (or Megatron FSDP where FSDP = 1), bf16 gradient reduction
(``grad_reduce_in_fp32 = False``), TP communication and pipeline sends overlapped, expert-tensor-parallel 1, the
embedding and loss as pipeline layers where the layer count needs it to split evenly; GB200 jobs on 64 of each NVL72
rack's 72 GPUs (assumption); DGX-B200 on the DGX H100 SuperPOD's fabric with B200 GPUs and NVLink5 (``SPECS``); MaxText
(JAX) rows get the same settings, an approximation their notes state, but MaxText's state (fp32 weights, grads and
Adam moments, 4 + 4 + 8 bytes per parameter, bf16 FSDP gathers: ``topo.training.jax_mesh.MAXTEXT_STATE``) and each
script's JAX mesh, remat policy and XLA flags (the runs CSVs' ``jax_mesh``, ``remat_policy``, ``dp_overlap_policy``
and ``dp_all_reduce_combine_bytes`` columns, ``run_recipe_columns``; Google's A4 and A3 runs on ``SPECS["GCP A4"]`` /
``["GCP A3"]``, the RoCE/gIB and GPUDirect-TCPX network profiles); NeMo AutoModel (PyTorch FSDP2) rows take its
code's (``_automodel_settings``: bf16 state, FSDP2's reduction dtypes and kept weights under PP, its benchmark gate's
expert placement); MLPerf rows (``mlperf50_``, ``mlperf41_``) take NeMo's settings and their configs' FP8 weights
(``FP8_PARAMS`` / ``FP8_PARAM_GATHER``), GPT-3 without dropout.
Memory (per source): NeMo and Megatron-Bridge rows keep bf16 gradients (``grad_bytes = 2``: with
``grad_reduce_in_fp32 = False`` Megatron-Core allocates its gradient buffer in the parameters' dtype); the rows'
``activation_offload_layers`` column (the recipe's ``cpu_offloading_num_layers`` / ``activation_offload_layers``,
GB200 FSDP recipes) and ``recompute_granularity`` column (AutoModel's ``activation_checkpointing: true``: full)
are read; sources in data/reference/README.md.
MoE rows carry their recipe's EP settings in the CSV (``moe_a2a_overlap``, ``moe_dispatcher``,
``moe_dispatch_bytes``, from Megatron-Bridge's ``scripts/performance/configs/{qwen,deepseek}/
*_workload_base_configs.py``); where a row leaves them empty, the recipes' defaults: no EP overlap
(``WorkloadBaseConfig.moe_a2a_overlap = False``), the all-to-all dispatcher, BF16 dispatch. Every row's
``recompute_modules`` column (the recipe's Megatron-Core ``recompute_modules``) is modelled; its
``cuda_graph_scope`` column too (captured parts cost the host no launches), and its TP overlap, router fusion,
cross-entropy, FP8 attention, FP8 scaling work, FP8 weights and HybridEP's SMs (``overlap_tp``, ``moe_router_fusion``,
``cross_entropy``, ``attention_fp8``, ``fp8_amax_reduction``, ``fp8_scale_inverse_kernel``, ``fp8_amax_pass``,
``fp8_param_gather``, ``ep_comm_sms``: ``run_recipe_columns``), and where a run's scripts depart from those
defaults its memory, DP-bucket and pipeline settings (``grad_bytes``, ``grad_reduce_bytes``, ``optimizer_bytes_per_param``,
``moe_counts_aligned``, ``dp_bucket_params``, ``dp_align_grad_reduce``, ``pipeline_layout``, ``pipeline_schedule``,
``moe_expert_rank_capacity_factor``, ``overlap_dp``, and Megatron-FSDP's HSDP groups ``dp_shard``,
``expert_dp_shard``, ``dp_outer_sharding``: ``run_recipe_columns.layout_column_kw``, applied after the rules below);
DeepSeek-V3 rows of NeMo and Megatron-Bridge take their recipe's pipeline layout (``DSV3_LAYOUTS``, by PP and
VP). Overlapped all-to-alls take
SMs from the compute beside them (``topo.training.step.ep_held_sms``): the flex dispatcher and DualPipe 20
(``ParallelLayout.ep_comm_sms``, DeepEP's default) but where a run's scripts set HybridEP's count (Megatron-Bridge:
``data/reference/megatron_bridge_hybridep_sms.csv``; the ModelZoo's: column ``ep_comm_sms``), the all-to-all dispatcher NCCL's 16 p2p channels; hidden DP
and CP ring collectives NCCL's 16 channels' SMs (:mod:`topo.training.comm_sms`). DeepSeek-V3: DualPipe
(its bubble, EP overlapped), FP8 dispatch (sec. 3.3.2), ZeRO-1, recomputed norms, node-limited routing, on the bundled DGX H100
SuperPOD with H800 GPUs (recomputing RMSNorm and the MLA up-projections, sec. 3.2.3: its CSV row).

    python benchmarks/training_accuracy.py            # prints the table
    python benchmarks/training_accuracy.py --fit      # also writes the fitted values into kernels.toml and the
                                                      # out-of-family errors into step_uncertainty.toml
    python benchmarks/training_accuracy.py --write    # also updates benchmarks/RESULTS.md
    python benchmarks/training_accuracy.py --host-rows  # also the host launch time each host-bound MoE run wants
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import sys
import time
import tomllib

import numpy as np

from _results import ROOT, arguments, update_section

sys.path.insert(0, str(ROOT))
from run_recipe_columns import (RunColumnError, check_published_dates, check_recipe_columns,  # noqa: E402
                                fp8_recipe_of, hybridep_sms_table, layout_column_kw, paper_column_kw,
                                recipe_column_kw)  # (topo from ROOT, as above)
from topo.training.nvls_buffers import NO_NVLS, release_nvls_enabled  # noqa: E402
from row_command import command_text  # noqa: E402

SPECS = {"DGX-H100": ("dgx-h100-superpod", ()), "DGX-GB200": ("gb200-nvl72-superpod", ()),
         "DGX-GB300": ("gb300-nvl72-superpod", ()),  # GB300 NVL72 racks (its rows are all in the hold-out file)
         "H800 cluster": ("dgx-h100-superpod", ("gpu=H800", "cluster.num_units=8")),
         # DGX B200: 8 B200 per node on NVLink5 (18 links, 14.4 TB/s per 8 GPUs = 900 GB/s per GPU and direction) and
         # 8 x ConnectX-7 NDR 400 Gb/s, the DGX H100 SuperPOD's node and rail fabric with the GPU and NVLink changed
         # (MLCommons inference v6.0, Nebius B200 system description: "18x 5th Gen NVLink, 14.4 TB/s aggregated",
         # "8x ConnectX-7 IB NDR 400Gb/s"; gpus.toml [B200])
         "DGX-B200": ("dgx-h100-superpod", ("gpu=B200", "scale_up.bandwidth_per_gpu=900 GB/s")),
         # DGX B300: 8 B300 (Blackwell Ultra) per node on NVLink5 (900 GB/s per GPU and direction, as B200) and
         # 8 x ConnectX-8 800 Gb/s, one per GPU (NVIDIA HGX B300: "800 Gb/s per GPU via ConnectX-8 SuperNICs",
         # acecloud.ai/blog/nvidia-hgx-b300; topo/data/catalog/servers.toml ["HGX B300"]): the DGX H100 SuperPOD's
         # node and rail fabric with the GPU, NVLink, NIC and XDR switches (Q3400, 144 x 800G, as the GB300 spec)
         # changed (assumption: NVIDIA's B300 SuperPOD fabric is not in the stored sources)
         "DGX-B300": ("dgx-h100-superpod", ("gpu=B300", "scale_up.bandwidth_per_gpu=900 GB/s",
                                            "server.nic_rate=800 Gb/s", "server.nic_model=ConnectX-8",
                                            "fabric.technology=infiniband_xdr",
                                            "fabric.tiers[leaf].model=Q3400", "fabric.tiers[leaf].radix=144",
                                            "fabric.tiers[leaf].port_rate=800 Gb/s",
                                            "fabric.tiers[spine].model=Q3400", "fabric.tiers[spine].radix=144",
                                            "fabric.tiers[spine].port_rate=800 Gb/s")),
         # Nebius's MLPerf Training v5.0 H200 cluster: 8 H200-SXM5-141GB per node on NVLink4 (900 GB/s) and
         # 8 x ConnectX-7 NDR 400 Gb/s, the DGX H100 SuperPOD's node and rail fabric with the GPU changed
         # (mlcommons/training_results_v5.0 Nebius/systems/nebius_soperator_8xH200_n64.json)
         "Nebius H200": ("dgx-h100-superpod", ("gpu=H200",)),
         # CoreWeave's MLPerf Training v5.0 GB200 NVL72 cluster: 4 GB200 and 4 x ConnectX-7 NDR 400 Gb/s per tray,
         # as DGX GB200 (mlcommons/training_results_v5.0 IBM+CoreWeave+NVIDIA/systems/carina_ngpu512_ngc25.04_nemo.json)
         "CoreWeave GB200": ("gb200-nvl72-superpod", ()),
         # Google's MLPerf Training v6.0 GB200 NVL72 cloud system: 4 GB200 and 4 x ConnectX-7 400 Gb/s (RoCEv2, rail-
         # aligned fat-tree) per tray, 64 trays in 4 NVLink domains (64 GPUs per rack); the DGX GB200 fabric (InfiniBand
         # there: RoCE not modelled apart) (Richardyu114/training_results_v6.0@eabf23a0
         # Google/systems/gb200_nvl72_n64_ngc26.04_nemo.json)
         "Google GB200": ("gb200-nvl72-superpod", ()),
         # Cisco's MLPerf Training v6.0 Zeus H100 cluster: 8 H100-SXM5-80GB per node on NVLink4 and 8 x ConnectX-8 at
         # 400 Gb/s RoCE, rail-optimized, one NIC per GPU: the DGX H100 SuperPOD's node and rail fabric (InfiniBand
         # there: RoCE not modelled apart) (Richardyu114/training_results_v6.0@eabf23a0
         # Cisco/systems/Zeus_8xH100_SXM_80GB.json)
         "Cisco H100": ("dgx-h100-superpod", ()),
         # Cisco's MLPerf Training v6.0 H200 pair: 2 x UCS C885A M8, 8 H200-SXM5-141GB per node on NVLink4 (900 GB/s)
         # and 8 x BlueField-3 B3140 at 400 Gb/s: the same node and rail fabric with the GPU changed (as Nebius H200)
         # (Richardyu114/training_results_v6.0@eabf23a0 Cisco/systems/2xC885A_M8-8xH200-SXM-141GB.json)
         "Cisco H200": ("dgx-h100-superpod", ("gpu=H200",)),
         # HPE's MLPerf Training v5.1 Cray XD670 cluster: 8 nodes of 8 H200-SXM5-141GB on NVLink4 (900 GB/s) and 8 x
         # InfiniBand NDR 400 Gb/s adapters per node: the same node and rail fabric with the GPU changed (as Nebius H200)
         # (mlcommons/training_results_v5.1@441d65f4 HPE/systems/HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09.json)
         "HPE H200": ("dgx-h100-superpod", ("gpu=H200",)),
         # Google Cloud A4 (a4-highgpu-8g): 8 B200 on NVLink5 and 8 x ConnectX-7 400 Gb/s RoCE through NCCL's gIB
         # plugin (AI-Hypercomputer/gpu-recipes@2e1fd5ef training/a4/*/maxtext-pretraining-gke/values.yaml
         # gibVersion nccl-plugin-gib:v1.0.5; the 2 x 8 B200 all-gather benchmarks/accuracy.py gcp_a4_2n_allgather
         # measures on it): DGX-B200's node and rail fabric with GCP's RoCE/gIB profile (profiles/network/gcp_roce)
         "GCP A4": ("dgx-h100-superpod", ("gpu=B200", "scale_up.bandwidth_per_gpu=900 GB/s", "fabric.technology=gcp_roce")),
         # Google Cloud A3 High (a3-highgpu-8g): 8 H100-80GB on NVLink4 and GPUDirect-TCPX on 4 GPU NICs
         # (AI-Hypercomputer/maxtext@efb6d9e4 gpu_multi_process_run.sh lines 18-44: NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=
         # eth1,eth2,eth3,eth4), 200 Gb/s each assumed as benchmarks/accuracy.py sky_a3high_tcpx_2n (GCP: 1,000 Gb/s
         # in all with the host NIC): the DGX H100 node with 4 NICs of 200 Gb/s on the TCPX profile
         "GCP A3": ("dgx-h100-superpod", ("server.nics=4", "server.nic_rate=200 Gb/s",
                                          "fabric.tiers[leaf].port_rate=200 Gb/s",
                                          "fabric.tiers[spine].port_rate=200 Gb/s", "fabric.technology=gcp_tcpx"))}
GROUPS = ("dense_bf16", "dense_fp8", "moe_coarse", "moe_fine", "hybrid_ssm")
FAMILIES = (  # a model family: every run of these models is held out together (prefix of the model file name)
    ("megatron-gpt", "megatron-gpt"), ("llama2", "llama2"), ("llama3", "llama3"), ("llama4", "llama4"),
    ("gpt3", "gpt3"), ("nemotron3-", "nemotron3"), ("nemotron4", "nemotron4"), ("nemotron-h", "nemotron-h"),
    ("nemotron-3-super", "nemotron-3-super"),  # its own family before Nano's prefix (super80)
    ("nemotron-3-ultra", "nemotron-3-ultra"),  # likewise (ultra85)
    ("nemotron-3", "nemotron-3-nano"),
    ("nemotron-nano", "nemotron-nano"), ("mixtral", "mixtral"), ("qwen3", "qwen3"), ("deepseek", "deepseek-v3"),
    ("kimi", "kimi-k2"), ("gpt-oss", "gpt-oss"), ("grok", "grok"))
HOLDOUT = "training_runs_holdout.csv"  # scored, never fitted
HYBRIDEP_SMS_FILE = "megatron_bridge_hybridep_sms.csv"  # Megatron-Bridge's moe_hybridep_num_sms per NeMo release
REGRESSED_FILE = "training_runs_regressed.csv"


def _regressed() -> dict[str, str]:
    """Runs measured under a software regression their publisher filed (``data/reference/`` + ``REGRESSED_FILE``:
    each run with the issue that files it, its address and date): run id -> "issue: regression". Scored with every
    other run, never fitted (a fitted constant would absorb the regression); the evidence for each issue's rows is
    in ``data/reference/README.md``."""
    with open(ROOT / "data" / "reference" / REGRESSED_FILE, newline="") as f:
        return {r["run_id"]: f"{r['issue']}: {r['regression']}" for r in csv.DictReader(f)}


REGRESSED = _regressed()
CLUSTER_SLOW_FILE = "training_runs_cluster_slow.csv"


def _cluster_slow() -> dict[str, str]:
    """Runs whose cluster measured a published recipe well below its publisher's own run of the same preset and
    release (``data/reference/`` + ``CLUSTER_SLOW_FILE``: each with that twin run and the ratio of their
    throughputs): run id -> "the twin: the evidence". Scored with every other run, never fitted: what slowed the
    cluster is not in its spec, and a fitted constant would absorb it (the lead, after dsv3b69)."""
    with open(ROOT / "data" / "reference" / CLUSTER_SLOW_FILE, newline="") as f:
        return {r["run_id"]: f"{r['twin_run_id']} ran the same preset {r['ratio']}x as fast: {r['evidence']}"
                for r in csv.DictReader(f)}


CLUSTER_SLOW = _cluster_slow()
NOT_FITTED = {**REGRESSED, **CLUSTER_SLOW}  # scored like every run, read by no fit


def family(model_name: str) -> str:
    """The model family of a model file name (what leave-one-family-out holds out together)."""
    for prefix, fam in FAMILIES:
        if model_name.startswith(prefix):
            return fam
    return model_name


def group(model, lay) -> str:
    """dense_bf16, dense_fp8, moe_coarse, moe_fine or hybrid_ssm (topo.training.uncertainty.model_group)."""
    from topo.training.uncertainty import model_group
    return model_group(model, lay.precision)


def attention_unfused_on_blackwell(row, model) -> bool:
    """Attention whose head dims exceed 128 on a Blackwell GPU under a Transformer Engine before v2.5: cuDNN's fused
    attention does not take it, so its core attention runs without the cuDNN kernel (the layout's
    ``flash_attention`` off: priced as unfused GEMMs and softmax). Every TE 2.0-2.4 disables cuDNN's fused attention
    on sm100 for head_dim_qk > 128 or head_dim_v > 128 (``!(sm_arch_ >= 100 && (head_dim_qk > 128 || head_dim_v >
    128))``, ``transformer_engine/common/fused_attn/fused_attn.cpp`` at v2.1-v2.4 and at the TE ref NeMo@7a8f1cc7 pins,
    ``requirements/manifest.json``: NVIDIA/TransformerEngine@bee4649c); #1797 (71c76b6b, 2025-06-14, first in v2.5)
    lifts it. Two cases:

    - multi-head latent attention (DeepSeek-V3: head_dim_qk 192, head_dim_v 128): TE also disables flash-attn for any
      head_dim_qk != head_dim_v ("Disabling FlashAttention as it does not support MLA", ``transformer_engine/pytorch/
      dot_product_attention/utils.py`` @bee4649c), so it runs unfused;
    - equal head dims above 128 (Nemotron-4 340B: 18,432 / 96 heads = 192): flash-attn 2 takes it where the container
      installs it (head_dim <= 192 on any arch, same file), else unfused. Both are far below cuDNN's rate: flash-attn 2
      runs Ampere's mma.sync on Blackwell at ~300-380 TFLOP/s (B200, bf16, flash_attn 2.7.4.post1: hdim 64 forward
      307-381, backward 243-334, Dao-AILab/flash-attention issue #1589, 2025-04-13; hdim 128 forward 352-362,
      meta-pytorch/tritonbench PR #171, 2025-03-04) against cuDNN 9.22's 1,406 forward / 1,057 backward at hdim 192
      causal 4k on GB200 (kernels.toml [attention.blackwell]); at those rates the Nemotron-4 340B rows' core attention
      takes 0.18-0.25 s a step, topo's unfused path 0.21 s, cuDNN's 0.057 s (docs/calibration-findings.md, 'Blackwell
      FP8: GB200 too slow, B200 too fast'). Priced unfused: no published flash-attn 2 rate at hdim 192 causal on sm100.

    Applied to the NeMo containers up to 25.04 (NeMo 25.02's B200 rows, 25.04's GB200 rows, the DGX Cloud v25.05.04
    rows: NeMo 25.04.00 / 25.04.01); later ones are not checked, and no later Blackwell row with head dims above 128
    runs a NeMo container before 25.09."""
    release = re.search(r"NeMo (\d\d)\.(\d\d)", row.get("software") or "")
    return (max(model.qk_dim, model.v_dim) > 128 and row["gpu"] in ("B200", "GB200", "GB300")
            and release is not None and (int(release[1]), int(release[2])) <= (25, 4))


def megatron_fsdp_unfused_wgrad(row) -> bool:
    """A Megatron-Bridge Megatron-FSDP Llama run of NeMo 25.11 or later: its performance config turns
    ``gradient_accumulation_fusion`` off under Megatron-FSDP, so each weight gradient is written new and copied into
    the gradient buffer (the layout's ``wgrad_output = "copied"``, :func:`topo.training.operators.wgrad_kw`;
    NVIDIA-NeMo/Megatron-Bridge v0.2.0 ``scripts/performance/configs/llama3/llama3_llm_pretrain.py`` lines 74, 109,
    144, 267, the 70B GB300 / GB200 / B200 and 8B H100 configs: ``if cfg.ddp.use_megatron_fsdp: ...
    gradient_accumulation_fusion = False``, after ``set_workload_base_configs`` set it True; in every release since,
    v0.4.0 ``configs/llama/llama3_llm_pretrain.py`` and @067f987d ``perf_recipes/llama/*/llama3.py``). NeMo 25.09
    (v0.2.0rc5) set it True for FSDP (``scripts/performance/utils/helpers.py`` line 78): fused. Nemotron 3 Ultra's
    Megatron-FSDP recipes set it False too ("incompatible with BF16 FSDP main grads": NVIDIA-NeMo/Megatron-Bridge@4ab94dfa
    ``perf_recipes/nemotronh/common.py`` ``_apply_nemotron_3_ultra_fsdp_hsdp``, the 26.08 rows' commit; ultra85).
    Together AI's runs of NVIDIA's dgxc-benchmarking v26.02 recipes (``together2602_``) run Megatron-Bridge@6b3b5ba7's
    configs unchanged, whose ``scripts/performance/configs/llama/llama3_llm_pretrain.py``
    ``llama3_70b_pretrain_config_b200`` lines 175-177 set it off under Megatron-FSDP too (data128)."""
    release = re.search(r"NeMo (\d\d)\.(\d\d)", row.get("software") or "")
    return (row["run_id"].startswith(("mb", "together2602_")) and row["fsdp"] == "1"
            and row["model"].startswith(("llama3", "nemotron-3-ultra"))
            and release is not None and (int(release[1]), int(release[2])) >= (25, 11))


def _paper_setups():
    """The runs of ``training_runs.csv`` (Megatron-LM SC21, Llama 3): each source's settings, the step time from
    its TFLOPs/GPU and its own FLOP count."""
    from topo.training.cudnn import run_cudnn
    from topo.training.flops import model_flop_per_step
    from topo.training.parallel import make_layout
    from topo.training.model import load_model

    out = []
    rows = list(csv.DictReader(open(ROOT / "data" / "reference" / "training_runs.csv")))
    check_published_dates(rows, "training_runs.csv")
    for row in rows:
        rid = row["run_id"]
        if rid.startswith("megatron_"):
            model = load_model("megatron-gpt-" + rid.removeprefix("megatron_").replace("p", "."))
            spec, conv = ("dgx-a100-superpod", ()), "megatron"
            # the paper's artifact (NVIDIA/Megatron-LM@de7dc40f88 examples/sc21/run_table_1.sh; each row's note):
            # --checkpoint-activations (full, a checkpoint a layer), plain DDP, and 2021's interleaved schedule's
            # blocking sends (megatron/p2p_communication.py _communicate: req.wait(), torch.cuda.synchronize());
            # micro-batch, virtual stages, fp16 gradients and the DDP overlap: the row's columns (paper_column_kw);
            # --fp16 without main_grad: PyTorch accumulates param.grad, the optimizer copies it to fp32 and unscales
            # it (CONFIG.sh line 54 --fp16, 55 --loss-scale; @a8d172b3 megatron/optimizer/optimizer.py 283-339)
            extra = dict(flash_attention=False, dp_sharding="none", recompute="full", overlap_pp=False,
                         wgrad_output="autograd", loss_scaling=True)
        else:
            model, spec, conv = load_model("llama3-405b"), ("meta-llama3-24k", ()), "6n"
            # CP: K and V all-gathered, their gradients reduce-scattered, exposed (arXiv 2407.21783 sec. 3.3.2).
            # V from the same section: "we reduce one Transformer layer each from the first and the last stages
            # [...] the first model chunk on the first stage has only the embedding, and the last model chunk on
            # the last stage has only output projection and loss calculation". A first stage of E plus V - 1
            # chunks of n layers holding one layer fewer than a stage of V n layers needs n = 1: one unit per
            # chunk, V = (126 layers + E + L) / pp = 8 (the layout E|(t|)*126L; tests/test_training_memory.py)
            extra = dict(flash_attention=True, dp_sharding="fsdp_grad_op", recompute="none",
                         vpp=(model.layers + 2) // int(row["pp"]), pipeline_embedding=True,
                         cp_comm_type="all_gather", overlap_pp=False)
            # overlap_pp: the paper states no overlap of the pipeline's sends; kept exposed, as before the layout's
            # default became Megatron-LM's (on with vpp > 1), which Meta's framework is not
        # the paper names no container: at most the newest cuDNN released by its date (Llama 3: July 2024, 9.2.1)
        cudnn = run_cudnn("", row["published_date"])
        if cudnn is not None:
            extra["cudnn_version"] = cudnn
        # sequence parallelism, the async TP all-reduce, micro-batch, vpp, gradient bytes, DP overlap
        extra.update(paper_column_kw(row, "training_runs.csv"))
        lay = make_layout(tp=int(row["tp"]), cp=int(row["cp"]), pp=int(row["pp"]), dp=int(row["dp"]),
                          global_batch=int(row["global_batch_seqs"]), seq_len=int(row["seq_len"]),
                          **{k: v for k, v in extra.items() if not (k == "vpp" and int(row["pp"]) == 1)})
        step = model_flop_per_step(model, lay, conv) / (float(row["value"]) * 1e12 * int(row["num_gpus"]))
        out.append(dict(run=rid, spec=spec, model=model, lay=lay, step_s=step, source=row["source_url"],
                        gpu=row["gpu"].split("-")[0]))
    return out


def _published_rows():
    """``(row, is_held)`` for every row of ``training_runs_published.csv`` and then of the hold-out file; a row
    whose note names a framework flag :data:`run_note_flags.NOTE_FLAGS` does not list, or whose recipe column
    (:data:`run_recipe_columns.COLUMNS`) holds a value topo cannot use, is refused (one line)."""
    from run_note_flags import check_note_flags

    rows = [(r, False) for r in csv.DictReader(open(ROOT / "data" / "reference" / "training_runs_published.csv"))]
    held = ROOT / "data" / "reference" / HOLDOUT
    if held.exists():
        rows += [(r, True) for r in csv.DictReader(open(held))]
    for name, held_file in (("training_runs_published.csv", False), (HOLDOUT, True)):
        check_note_flags([r for r, h in rows if h == held_file], name)
        check_recipe_columns([r for r, h in rows if h == held_file], name)
        check_published_dates([r for r, h in rows if h == held_file], name)
    hybridep_sms_table(ROOT / "data" / "reference" / HYBRIDEP_SMS_FILE)  # refused on one line if bad
    return rows


def _row_model(row):
    """The row's model as its framework builds it (MLPerf's GPT-3 without dropout, AutoModel without MTP)."""
    from topo.training.model import load_model

    model = load_model(row["model"])
    if row["run_id"].startswith("mlperf41_") and model.dropout:
        # MLPerf's GPT-3 175B trains without dropout (training_results_v4.1 NVIDIA gpt3 conf/custom.yaml:
        # hidden_dropout = attention_dropout = 0.0)
        model = type(model).model_validate({**model.model_dump(), "dropout": False})
    if row["run_id"].startswith("mcore_gb200_deepseekv3") and model.mtp_layers:
        # Megatron-LM's GB200 study runs DeepSeek-V3 without MTP (NVIDIA/Megatron-LM@eb0783b6 docs/discussions/
        # deepseek-v3-gb200-optimization/deepseek-v3-gb200-reproduce-guide.md: no --mtp-num-layers, layout Et|(tt|)*30L)
        model = type(model).model_validate({**model.model_dump(), "mtp_layers": 0})
    if row["run_id"].startswith("automodel_") and model.mtp_layers:
        # AutoModel's DeepseekV3ForCausalLM (also Kimi K2's class) is the decoder and the output head, no
        # multi-token-prediction module (Automodel@ce005dd nemo_automodel/components/models/deepseek_v3/model.py)
        model = type(model).model_validate({**model.model_dump(), "mtp_layers": 0})
    return model


def _recipe_layout_kw(row, model) -> dict:
    """The layout settings every NeMo / Megatron-Bridge-style row shares: its parallelism, batch and precision,
    recomputed modules, EP columns, NVL72 placement and CUDA graphs."""
    n, tp, pp, cp, vp, ep = (int(row[k]) for k in ("num_gpus", "tp", "pp", "cp", "vpp", "ep"))
    dp = n // (tp * pp * cp)
    chunks = pp * vp
    emb = pp > 1 and model.layers % chunks != 0 and (model.layers + 2) % chunks == 0
    kw = dict(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, vpp=vp, micro_batch=int(row["micro_batch"]),
              global_batch=int(row["global_batch_seqs"]), seq_len=int(row["seq_len"]),
              precision=row["precision"], flash_attention=True, recompute="none",
              dp_sharding="zero3" if row["fsdp"] == "1" else "zero1", grad_reduce_bytes=2.0,
              overlap_pp=vp > 1, pipeline_embedding=emb)
    # the recipe's TP overlap, router fusion, cross-entropy, FP8 attention and delayed-scaling kernels (columns)
    kw.update(recipe_column_kw(row))
    # the recipe's recomputed modules (space-separated; empty: none)
    kw.update(recompute_modules=tuple((row.get("recompute_modules") or "").split()))
    if model.moe is not None:  # the recipe's EP overlap and dispatcher: the row's own columns
        kw.update(etp=int(row.get("etp") or 1), overlap_ep=row.get("moe_a2a_overlap") == "1",
                  ep_dispatcher=row.get("moe_dispatcher") or "alltoall",
                  # the flex dispatcher's backend as the row records it from its recipe (empty: no flex)
                  ep_flex_backend=row.get("moe_flex_backend") or "hybridep",
                  ep_dispatch_bytes=float(row.get("moe_dispatch_bytes") or 2),
                  moe_capacity_factor=float(row["moe_capacity_factor"]) if row.get("moe_capacity_factor")
                  else None)
    # GB300 and CoreWeave's GB200: the DGX GB200 placement assumed (same NVL72 rack); a job of whole racks of 72 that
    # 64 does not divide (MLPerf v5.1 Lambda_GB300_n18: 18 nodes of 4 GB300, an NVL72 rack's 18 compute trays) runs on
    # all 72 (auditho48; assumption that the 18 nodes are one rack: was two racks of 64)
    if row["system"] in ("DGX-GB200", "DGX-GB300", "CoreWeave GB200", "Google GB200"):
        n = int(row["num_gpus"])
        kw["gpus_per_domain_used"] = None if n % 72 == 0 and n % 64 else 64
    # the recipe's CUDA graphs where the row records them (empty: none recorded, modelled as none)
    kw["cuda_graph_scope"] = tuple((row.get("cuda_graph_scope") or "").split())
    if "full_iteration" in kw["cuda_graph_scope"]:
        # Megatron-Core's eager expert-bias add syncs its token counts to the host (``.tolist()``), which no CUDA
        # graph can hold (NVIDIA/Megatron-LM@d98e8a64 moe/experts.py ``_apply_bias``); the full-iteration
        # recipes (gpt-oss fp8mx: Megatron-Bridge@067f987d perf_recipes/gpt_oss/common.py) run TE's op
        # fuser, whose GroupedLinear scales and adds fc2's bias itself (``scale_bias``): no eager pass; and
        # its ``ScaledClampedQGeGLU`` clamps inside the activation (Megatron-LM@d98e8a64 experts.py
        # ``_make_fused_ops``): no eager clamp
        kw.update(expert_bias_eager="none", expert_clamp_eager=False)
    return kw


def _framework_kw(row, model, kw: dict) -> None:
    """Update ``kw`` with the row's framework settings: DeepSeek-V3's pipeline
    layout, the FP8 recipe, the container's cuDNN and Transformer Engine, NeMo's bf16 gradient buffer, the memory columns, the recipe
    columns (``run_recipe_columns``: XLA's scheduler and combiner, grouped experts, MaxText's mesh and remat),
    AutoModel's code."""
    from topo.training.cudnn import run_cudnn
    from topo.training.te_version import run_te

    pp, vp = kw["pp"], kw["vpp"]
    if model.name.startswith("deepseek-v3") and row["run_id"].startswith(("mb", "nemo")):
        kw["pipeline_layout"] = DSV3_LAYOUTS.get((pp, vp))
    if row["precision"] == "fp8":
        kw["fp8_recipe"] = fp8_recipe(row)
    kw["moe_expert_kernels"] = expert_kernels(row, model)
    sms = hybridep_sms(row, model)
    if sms is not None and kw.get("ep_dispatcher") == "deepep" and kw.get("ep_flex_backend") == "hybridep":
        kw["ep_comm_sms"] = sms  # the SMs HybridEP's kernels hold beside the overlapped compute
    # the container's cuDNN (topo/data/compute/cudnn_releases.toml), else the newest released by the row's
    # publication date (cudnn_release_dates.toml), else (date unknown) the newest table
    cudnn = run_cudnn(row.get("software") or "", row["published_date"])
    if cudnn is not None:
        kw["cudnn_version"] = cudnn
    te = run_te(row.get("software") or "")  # the container's Transformer Engine (te_releases.toml), else the newest
    if te is not None:
        kw["te_version"] = te
    if row["run_id"].startswith(("nemo", "mb")):  # grad_reduce_in_fp32 = False: a bf16 gradient buffer
        kw["grad_bytes"] = 2.0
    # the recipe's memory settings (empty: none): activation offloading, recomputation
    kw["activation_offload_layers"] = int(row.get("activation_offload_layers") or 0)
    kw["recompute"] = row.get("recompute_granularity") or "none"
    kw["pipeline_flushes"] = int(row.get("pipeline_flushes") or 1)  # schedule runs per step (empty: one)
    if row.get("dp_overlap_policy"):  # XLA's latency-hiding scheduler where the run's XLA flags enable it
        kw["dp_overlap_policy"] = row["dp_overlap_policy"]
    if row.get("dp_all_reduce_combine_bytes"):  # the script's XLA all-reduce combine threshold
        kw["dp_all_reduce_combine_bytes"] = int(row["dp_all_reduce_combine_bytes"])
    if row.get("moe_grouped_gemm"):  # 0: a SequentialMLP, one GEMM per local expert (NeMo's Mixtral configs)
        kw["moe_grouped_gemm"] = row["moe_grouped_gemm"] == "1"
    if row["run_id"].startswith("maxtext_"):  # the MaxText script's mesh and remat policy (columns; its note)
        from topo.training.jax_mesh import MAXTEXT_STATE, layout_from_mesh
        from topo.training.remat import remat_settings

        mesh, policy = row["jax_mesh"], row["remat_policy"]
        kw.update(layout_from_mesh(mesh, row["run_id"]))
        # JAX's weight gradients come out in the parameters' dtype (MaxText's weight_dtype float32), written once
        kw.pop("recompute_modules", None)  # the policy sets what is recomputed
        kw.update(recompute=remat_settings(policy)["recompute"], remat_policy=policy, wgrad_output="param_dtype")
        if row["precision"] == "fp8":  # MaxText's Fp8Quantization: Flax's Fp8DotGeneralOp, delayed scaling
            kw["fp8_recipe"] = "delayed"
        # what MaxText keeps: fp32 weights (their own master copy), fp32 grads, two fp32 moments; bf16 FSDP gathers
        kw.update(MAXTEXT_STATE)
    if row["run_id"].startswith("automodel_"):
        kw.update(_automodel_settings(model, pp))
        if pp > 1:
            kw.update(pipeline_layout=automodel_pipeline_layout(model.layers, pp * vp), pipeline_embedding=False)


def _dgxc2505_kw(row, model, kw: dict) -> None:
    """Update ``kw`` with what the DGX Cloud v25.05.04 scripts (NeMo@7a8f1cc7, ``dgxc2505_`` rows) set."""
    # the Nemotron-H 56B rows set nothing here: NeMo@7a8f1cc7 scripts/performance/llm/pretrain_nemotronh_56b.py
    # builds pretrain_recipe() without performance_mode (TP overlap off: the column overlap_tp). Its
    # set_primary_perf_configs (scripts/performance/utils.py lines 426-437) replaces the recipe's
    # nemotron_h_bf16_with_fp8_current_scaling_mixed plugin: dgxc-benchmarking@1f6d9f40 nemotronh/launch.sh passes no
    # --fp8_recipe, so the parser's default "ds" (argument_parser.py lines 124-132) takes bf16_with_fp8_mixed
    # (per-tensor delayed scaling, no BF16 first or last layers, fp8_param_gather) with grad_reduce_in_fp32 = False,
    # which the plugin's dtype_config writes over the recipe's DDP config (nemo/lightning/pytorch/strategies/
    # megatron_strategy.py lines 421-423): bf16 gradient reduction (auditho48; was fp32 and 2 + 2 BF16 layers), the
    # rows' grad_bytes column 2 (set in the session of 2026-12-06e: the column was empty, so topo had priced fp32)
    if row["run_id"].startswith("dgxc2505_") and model.name.startswith("deepseek-v3"):
        # NVIDIA/NeMo@7a8f1cc7 scripts/performance/llm/pretrain_deepseek_v3.py (dgxc-benchmarking v25.05.04): the
        # script's uneven first and last pipeline stages, MTP on the last; its fp32 gradient reduction, DP bucket
        # and no aligned reduction: columns grad_reduce_bytes, dp_bucket_params, dp_align_grad_reduce
        kw["pipeline_layout"] = nemo_dsv3_layout(kw["pp"])


def _run_kw(row, model, kw: dict) -> None:
    """Update ``kw`` with what single runs' own scripts set (DGX Cloud's DeepSeek-V3 stages, Cisco's per-tensor DP
    buckets, attention and weight gradients by release) and, last, the row's memory, DP and pipeline columns
    (``run_recipe_columns.layout_column_kw``: the values the per-source rules gave until tidy53)."""
    if row["run_id"].startswith("dgxc2505_"):
        _dgxc2505_kw(row, model, kw)
    if row["run_id"].startswith("mlperf51_cisco_h100_"):
        # Cisco's v5.1 H100 code (Cisco/benchmarks/llama31_8b/implementations/nemo, mlcommons/training_results_v5.1@
        # 441d65f4): conf/custom.yaml's bucket_size default is 64 parameters, which closes a Megatron-Core bucket at
        # every parameter tensor: as many buckets as Llama 3 8B has tensors (6 a layer with TE's fused layer norms,
        # plus embedding, final norm and output layer: 195), priced as that many equal buckets
        kw["dp_bucket_params"] = math.ceil(model.total_params / (6 * model.layers + 3))
    if attention_unfused_on_blackwell(row, model):
        kw["flash_attention"] = False
    if megatron_fsdp_unfused_wgrad(row):
        kw["wgrad_output"] = "copied"
    kw.update(layout_column_kw(row))


def tp_overlap_config(row, model) -> str:
    """The userbuffers configuration the row's recipe runs TP overlap with (``tp_overlap.toml``; read only where the
    row overlaps TP):

    - the row's ``tp_overlap_config`` column where its script names a configuration other than its model's entry
      below (its note cites the script and lines): Grok-1's FP8 ``b200_h16384_tp4_cp2`` on both GPUs and precisions,
      Nemotron-4 340B and 15B on Blackwell, NeMo 25.02's H100 FP8 variants (``_nemo2502``);
    - NeMo 2 performance scripts and DGX Cloud recipes (``nemo25``, ``dgxc``) and Megatron-Bridge's Llama configs
      (``mb``): the named configuration of the model, GPU class (H100; Blackwell: NeMo's ``b200`` ones) and
      precision (``topo/data/compute/tp_overlap_recipes.toml``, :func:`topo.training.tp_overlap.recipe_configs`,
      with its sources).
    - Transformer Engine's defaults (``te_default``, TE >= 2.0) where TP overlap runs without a named
      configuration: Nemotron-4 on H100 and Llama 4 / Mixtral in NeMo 2 (the recipes' ``tp_comm_overlap=True``
      without a configuration), Megatron-Bridge's Qwen3 and DeepSeek-V3 (``CommOverlapConfig(tp_comm_overlap=True)``:
      Megatron-Bridge@067f987d training/comm_overlap.py lines 620-625), Megatron-LM's ``--tp-comm-overlap`` without
      ``--tp-comm-overlap-cfg`` (``mcore_``); MLPerf v5.0/v6.0 (assumption: the submissions' TP-overlap
      configurations are not in the stored sources).
    - TE 1.x (``te_default_v1``, no margin) for the NeMo 24.07 and MLPerf v4.1 (NeMo 24.09) rows (assumption: the
      NeMo 1 launcher's per-model YAMLs, e.g. ``ub_cfg_h100_h12288_tp4_mbs2_seqlen2048``, are not tied to these rows).
    """
    from topo.training.tp_overlap import recipe_configs

    rid, gpu, prec = row["run_id"], row["gpu"], row["precision"]
    if row.get("tp_overlap_config"):
        return row["tp_overlap_config"]
    if rid.startswith(("nemo2407_", "mlperf41_")):
        return "te_default_v1"
    if not rid.startswith(("nemo25", "dgxc", "mb")):
        return "te_default"
    named = recipe_configs().get(model.name)
    if named is None:
        return "te_default"
    return named[("h100" if gpu in ("H100", "H200", "H800") else "b200", prec)]


def _setups():
    """One dict per published run: fabric key, model, layout, convention, measured step time, group, params
    (``holdout``: a row of the hold-out file, which no fit reads)."""
    from topo.training.parallel import make_layout

    out = _paper_setups()
    for row, is_held in _published_rows():
        model = _row_model(row)
        kw = _recipe_layout_kw(row, model)
        _framework_kw(row, model, kw)
        _run_kw(row, model, kw)
        kw["tp_overlap_config"] = tp_overlap_config(row, model)
        out.append(dict(run=row["run_id"], spec=SPECS[row["system"]], model=model, lay=make_layout(**kw),
                        step_s=float(row["step_time_s"]), source=row["source_url"], gpu=row["gpu"],
                        holdout=is_held, row=row))
    for s in out:
        s["group"] = group(s["model"], s["lay"])
        s["family"] = family(s["model"].name)
        s.setdefault("holdout", False)
    return out


def _fabrics(setups) -> dict:
    """Build each run's fabric once per spec and set each run's ``gen`` (its GPU's generation): spec -> fabric."""
    import topo
    from topo.fabric.hardware import lookup_gpu

    fabrics = {}
    for s in setups:
        if s["spec"] not in fabrics:
            name, over = s["spec"]
            fabrics[s["spec"]] = topo.build_fabric(topo.load_spec(name, list(over)))
        s["gen"] = lookup_gpu(fabrics[s["spec"]].spec.gpu).generation
    return fabrics


def _engines(setups):
    """Build each run's fabric and comm engine once per spec; set each run's ``gen``, ``key`` (its [training]
    fraction) and ``contention`` (the traffic mix depends on the layout only: reused by the fit)."""
    from topo.training.comm import CommEngine
    from topo.training.step import estimate_step

    fabrics, engines = _fabrics(setups), {}
    for spec, fabric in fabrics.items():
        engines[spec] = CommEngine(fabric)
        # the same fabric for the rows whose release's launcher exports NCCL_NVLS_ENABLE=0 (nccl_env_releases)
        engines[(spec, NO_NVLS)] = CommEngine(fabric, algorithm=NO_NVLS)
    for s in setups:
        s["key"] = f"{s['gen']}_{'fp8' if s['lay'].precision == 'fp8' else 'bf16'}"
        first = estimate_step(fabrics[s["spec"]], s["model"], s["lay"], engine=engine_of(engines, s),
                              convention="6n")
        s["contention"] = first.contention
    return fabrics, engines


def engine_of(engines, s):
    """Run ``s``'s comm engine from :func:`_engines`' ``engines``: its spec's, or the one without NVLS where its
    release's or its published launcher exports NCCL_NVLS_ENABLE=0 (``topo/data/compute/nccl_env_releases.toml``)."""
    row = s.get("row") or {}
    enabled = release_nvls_enabled(row.get("software", ""), row.get("source_url", ""))
    return engines[s["spec"]] if enabled else engines[(s["spec"], NO_NVLS)]


def _predictor(fabrics, engines):
    """``predict(s, values)``: the step time of run ``s`` with the [training] fractions and the host launch time
    ``values`` (memoised)."""
    from topo.training.step import estimate_step

    memo = {}

    def predict(s, values):
        over = kernel_overrides(s, values)
        key = (s["run"], tuple(sorted(over["training"].items())), over.get("launch", {}).get("host_s"))
        if key not in memo:
            memo[key] = estimate_step(fabrics[s["spec"]], s["model"], s["lay"], engine=engine_of(engines, s),
                                      check=False, contention=s["contention"], kernel_overrides=over).step_time_s
        return memo[key]
    return predict


def kernel_overrides(s, values) -> dict:
    """The ``kernel_overrides`` run ``s`` is predicted with: its generation's [training] fractions of ``values`` and,
    for a MoE run (the host binds only in MoE blocks), the host launch time."""
    mine = {k: v for k, v in values.items() if k.startswith(s["gen"])}
    return {"training": mine, **({"launch": {"host_s": values[HOST]}} if s["model"].moe is not None else {})}


FIT_SMOOTH = 0.01
"""Where the fit's loss turns from absolute to squared: a log step-time error of 1%, below the spread of one
recipe's published step across releases. Mean |log error| alone is flat between the two middle rows of an even
count (tp35: with Llama 3 held out, ``blackwell_fp8`` on 12 rows was flat from 0.714 to 0.739, and a 0.2-point move
of one row sent the search from one end to the other); ``sqrt(x^2 + d^2) - d`` is strictly convex, so the
fitted value is one point: for two rows, their geometric mean."""


def _fit_key(predict, rows, key, values, lo, hi, digits=3):
    """Golden-section search of one fraction on ``rows`` (mean smoothed |log error|, :data:`FIT_SMOOTH`), the
    others fixed."""
    def loss(e):
        v = {**values, key: e}
        return sum(math.hypot(math.log(predict(s, v) / s["step_s"]), FIT_SMOOTH) for s in rows) / len(rows)
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(14):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
    return round((lo + hi) / 2, digits)


def _fit_all(predict, rows):
    """Every [training] fraction on the dense runs among ``rows`` (a key without a dense run stays 1.0;
    Blackwell BF16 without one takes Blackwell FP8's), then the host launch time on the MoE runs among them.
    Returns the values and where the MoE runs alone would put the host time (None without a MoE run)."""
    values = {k: 1.0 for k in TRAINING_KEYS}
    values[HOST] = HOST_DEFAULT
    dense_of = {key: [s for s in rows if s["key"] == key and s["group"].startswith("dense")]
                for key in TRAINING_KEYS}
    for key in TRAINING_KEYS:
        if dense_of[key]:
            values[key] = _fit_key(predict, dense_of[key], key, values, *FRACTION_RANGE)
    if not dense_of["blackwell_bf16"]:
        values["blackwell_bf16"] = values["blackwell_fp8"]
    moe = [s for s in rows if s["model"].moe is not None]
    host_wanted = None
    if moe:  # searched over four times the published range, kept inside it: where it wants more, we say so
        host_wanted = _fit_key(predict, moe, HOST, values, HOST_RANGE[0], 4 * HOST_RANGE[1], digits=7)
        values[HOST] = min(host_wanted, HOST_RANGE[1])
    return values, host_wanted


def _fit_and_score(setups, predict):
    """Fit on all fitted runs and set every run's ``pred``; refit without each model family and set its scored
    runs' ``lofo``. Returns the values fitted on all runs and the host time the MoE runs alone would take."""
    fit_rows, score_rows = fitted(setups), scored(setups)
    values, host_wanted = _fit_all(predict, fit_rows)
    for s in setups:
        s["pred"] = predict(s, values)
    for fam in sorted({s["family"] for s in score_rows}):  # leave one model family out: refit without it
        v, _ = _fit_all(predict, [s for s in fit_rows if s["family"] != fam])
        for s in score_rows:
            if s["family"] == fam:
                s["lofo"] = predict(s, v)
    return values, host_wanted


def _host_note(host_wanted) -> str:
    """The report's note where the MoE runs alone would put the host launch time above its published range."""
    if host_wanted is None or host_wanted <= HOST_RANGE[1]:
        return ""
    return (f"\n\nThe host's launch time is held at the top of its published range, {HOST_RANGE[1] * 1e6:.0f} us: the "
            f"MoE runs alone would take {host_wanted * 1e6:.1f} us, i.e. they spend more than the model names "
            "(not absorbed: their errors above are with the bounded value). Their out-of-family errors equal "
            "the in-sample ones because no other fitted value touches them. `--host-rows` shows which runs pull "
            "it there: those the host binds inside the range, or those it binds only above it.")


HOST_GRID_S = (5e-6, 1e-5, 2e-5, 3e-5, 4e-5, 6e-5, 8e-5)
"""Host launch times (s) at which ``--host-rows`` prices each MoE run: the published 5-20 us and on to 4x its top."""

HOST_BOUND_POINTS = 1.0
"""``--host-rows`` lists a run whose signed error moves by at least this many points over :data:`HOST_GRID_S`."""


def host_root_s(grid, errors) -> float | None:
    """The host launch time at which a run's signed error (``errors[i]`` at ``grid[i]``, rising with it) reaches
    zero, linear between grid points; None where it does not on the grid (too slow at the smallest time, or too
    fast at the largest)."""
    for (h0, e0), (h1, e1) in zip(zip(grid, errors), zip(grid[1:], errors[1:])):
        if e0 <= 0.0 <= e1 and e1 > e0:
            return h0 + (h1 - h0) * (-e0) / (e1 - e0)
    return None


def host_rows(setups, predict, values) -> str:
    """``--host-rows``: each MoE run (the ones no fit reads left out) whose error the host launch time moves, its
    signed error at each :data:`HOST_GRID_S` value (the fractions as fitted), the time that zeroes it and its host
    CPU; then, over the fitted runs (not the hold-out), the median of those times per GPU generation, host CPU and
    where the host starts to bind (:func:`host_binds_within`): inside the published range, or only above it. Where
    the runs it binds inside the range want a time inside it and the rest only far above it, the bound says no
    more than that the rest lack something the host does not explain (docs/calibration-findings.md, hophost49)."""
    from topo.fabric.server_cpu import default_host_cpu

    lines = ["| run | GPU | host CPU | " + " | ".join(f"{h * 1e6:.0f} us" for h in HOST_GRID_S)
             + " | zero at (us) |", "|---|---|---|" + "---|" * (len(HOST_GRID_S) + 1)]
    roots: dict[tuple, list] = {}
    for s in setups:
        if s["model"].moe is None or s["run"] in NOT_FITTED:
            continue
        errs = [predict(s, {**values, HOST: h}) / s["step_s"] - 1 for h in HOST_GRID_S]
        if 100 * (errs[-1] - errs[0]) < HOST_BOUND_POINTS:
            continue
        cpu, root = default_host_cpu(s["gpu"]), host_root_s(HOST_GRID_S, errs)
        if root is not None and not s["holdout"]:
            where = "inside" if host_binds_within(HOST_GRID_S, errs, HOST_RANGE[1]) else "above"
            roots.setdefault((s["gen"], cpu, where), []).append(root)
        zero = "-" if root is None else f"{root * 1e6:.1f}"
        lines.append(f"| {s['run']}{' (hold-out)' if s['holdout'] else ''} | {s['gpu']} | {cpu} | "
                     + " | ".join(f"{100 * e:+.1f}%" for e in errs) + f" | {zero} |")
    lines += ["", "| GPU generation | host CPU | the host binds | fitted runs with a zero | median zero (us) |",
              "|---|---|---|---|---|"]
    lines += [f"| {g} | {c} | {w} the published range | {len(r)} | {_median(r) * 1e6:.1f} |"
              for (g, c, w), r in sorted(roots.items())]
    return "\n".join(lines)


def host_binds_within(grid, errors, top_s: float) -> bool:
    """Whether a run's error already moves (by :data:`HOST_BOUND_POINTS`) between the grid's smallest host time and
    ``top_s`` (the published range's top): the host sets its step inside the range, not only above it."""
    at_top = errors[list(grid).index(top_s)]
    return 100 * (at_top - errors[0]) >= HOST_BOUND_POINTS


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--fit", action="store_true", help="write the fitted fractions into kernels.toml and the "
                    "out-of-family errors into step_uncertainty.toml")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    ap.add_argument("--spans", action="store_true", help="write only what each group's runs span (families, GPU "
                    "counts, pp, cp, ep and the NVLink domains an expert group spans) into step_uncertainty.toml, "
                    "keeping its errors, and stop: no step is predicted")
    ap.add_argument("--host-rows", action="store_true", help="also print, for each MoE run the host launch time "
                    "moves, its error from 5 to 80 us and the time that zeroes it")
    ap.add_argument("--command", metavar="RUN_ID", default=None, help="print the topo train command line that "
                    "gives this benchmark's prediction for run RUN_ID, and stop")
    args = ap.parse_args()
    if args.command is not None:
        text = command_text(_setups(), args.command)
        print(text, file=sys.stderr if text.startswith("--command:") else sys.stdout)
        sys.exit(2 if text.startswith("--command:") else 0)

    if args.spans:
        _write_spans()
        return
    t0 = time.perf_counter()
    setups = _setups()
    fabrics, engines = _engines(setups)
    predict = _predictor(fabrics, engines)
    values, host_wanted = _fit_and_score(setups, predict)
    body, errors = _report(setups, values)
    body += _host_note(host_wanted)
    body += "\n\n" + fp8_pair_section(setups)
    body += f"\n\nWall time {time.perf_counter() - t0:.0f} s."
    print(body)
    if args.host_rows:
        print("\n" + host_rows(setups, predict, values))
    if args.fit:
        _write_fit(values, errors, run_spans(setups, fabrics))
    if args.write:
        update_section("Training-step accuracy (topo train)", body, "python benchmarks/training_accuracy.py")


def automodel_pipeline_layout(layers: int, chunks: int) -> str:
    """NeMo AutoModel's split of ``layers`` over ``chunks`` pipeline stages, in Megatron-Core's layout notation
    (Automodel@ce005dd ``nemo_automodel/components/distributed/pipelining/functional.py``,
    ``generate_hf_model_fqn_per_model_part``): ``layers // chunks`` each, one more on the first ``layers % chunks``,
    the embedding with the first, the norm and output head with the last; stage ``s`` runs on rank ``s mod pp``
    (``stage_ids_this_rank``, loop style). ``layers_per_stage: 2`` gives DeepSeek-V3 and Kimi K2 (61 layers)
    ``ceil(61 / 2) + 1 = 32`` stages (``calculate_virtual_stages``), the table's PP x VP: 29 of two layers, 3 of one."""
    base, extra = divmod(layers, chunks)
    parts = ["t" * (base + (i < extra)) for i in range(chunks)]
    parts[0], parts[-1] = "E" + parts[0], parts[-1] + "L"
    return "|".join(parts)


def _automodel_settings(model, pp: int) -> dict:
    """NeMo AutoModel's (PyTorch FSDP2) state and FSDP settings, from its code at the benchmark's commit
    (NVIDIA-NeMo/Automodel@ce005dd, the performance summary's first version).

    - MoE models (its own DeepSeek-V3 / Kimi K2, Qwen3-MoE, GPT-OSS, Nemotron V3 classes): ``initialize_weights``
      ends with ``self.to(torch.bfloat16)`` (``nemo_automodel/components/models/*/model.py``), so the parameters are
      bf16 and there is no fp32 master copy; ``torch.optim.Adam`` (the benchmark configs' optimizer) keeps its two
      moments in the parameters' dtype: 2 + 2 + 4 = 8 bytes per parameter. FSDP2 gathers bf16; ``apply_fsdp``
      (``nemo_automodel/components/moe/parallelizer.py``) reduces the dense weights in fp32
      (``MixedPrecisionPolicy(reduce_dtype=torch.float32)``) and shards the experts without that policy (bf16
      reduction), keeps each unit's gathered weights from forward to backward under pipeline parallelism
      (``reshard_after_forward=not pp_enabled``); its benchmark configs route with ``fake_balanced_gate: true``
      (``moe_routing = "consecutive"``, :mod:`topo.training.routing`). Under PP the stage module is not itself an
      FSDP module, so torch's pipelining runs a plain backward and FSDP reduces every micro-batch (as modelled).
      Its DeepEP experts (``GroupedExpertsDeepEP.forward``, ``nemo_automodel/components/moe/layers.py``; the same
      at 037e04a6) add both expert biases (gpt-oss) through ``_apply_bias``, per expert, outside ``ops.gmm`` and
      the activation (``expert_bias_eager = "fc1_fc2"``); its compiled ``quick_geglu_deepep`` clamps inside the
      activation (``expert_clamp_eager = False``), and its benchmark configs' ``rope_fusion: true`` runs Transformer
      Engine's fused RoPE, the YaRN factor applied after it (Automodel@36044ad3
      ``components/models/gpt_oss/rope_utils.py`` ``apply_rotary_emb_qk``; that multiply not counted:
      ``rope_kernel = "te_fused"``).
    - Llama 3 70B (a Hugging Face model, ``torch_dtype: bf16``, Automodel@2013a4dd6
      ``examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml``, the commit that published the
      row): bf16 parameters and gradients, Transformer Engine's ``FusedAdam`` with fp32 moments (its defaults
      ``master_weights=False``, ``exp_avg_dtype = exp_avg_sq_dtype = torch.float32``): 2 + 2 + 8 = 12 bytes; FSDP2
      reduces in bf16 (``distributed/config.py``: ``reduce_dtype=torch.bfloat16``).
    - The MoE benchmark configs' loss, ``MaskedCrossEntropy`` with ``fp32_upcast: false`` (ce005dd
      deepseek_v3 / qwen3_moe_30b, 037e04a6 gptoss_120b / gptoss_20b, 08a48f76 nemotron_nano_v3, every stored
      version of kimi_k2 ``_te_deepep.yaml``): PyTorch's ``F.cross_entropy`` on bf16 logits
      (``cross_entropy = "torch_bf16"``); Llama 3 70B's keeps the default ``fp32_upcast`` (not modelled apart).
    - Nemotron 3 Nano (``NemotronV3Mamba2Mixer``, Automodel@08a48f76
      ``components/models/nemotron_v3/layers.py``, the commit of the row's config): batch-major hidden states into
      mamba_ssm's ``mamba_split_conv1d_scan_combined`` with the gated RMSNorm's weight and ``out_proj`` handed to
      it (``mamba_mixer = "mamba_ssm"``).
    - MoE models' activation checkpointing (``activation_checkpointing: true``): ``apply_ac``
      (``nemo_automodel/components/moe/parallelizer.py``, Automodel@ce005dd and @08a48f76) wraps each decoder layer
      whole in ``checkpoint_wrapper``, non-reentrant by default, so the replay stops at the layer's last saved
      tensor: its last residual add and an MoE block's combine are not run again (``recompute_early_stop``).
    - The weight gradients: FSDP2's autograd writes each a new bf16 gradient and ``foreach_reduce`` copies it into
      the reduce-scatter buffer at the reduction's dtype (``wgrad_output = "fsdp2"``); no
      ``fuse_wgrad_accumulation`` anywhere in Automodel@36044ad3 (Megatron-FSDP's ``main_grads_dtype`` is another
      strategy, not the benchmarks').
    """
    common = dict(wgrad_output="fsdp2", **(dict(mamba_mixer="mamba_ssm") if model.mamba is not None else {}))
    if model.moe is None:
        return dict(weight_bytes=2.0, grad_bytes=2.0, optimizer_bytes_per_param=8.0, grad_reduce_bytes=2.0, **common)
    return dict(weight_bytes=2.0, grad_bytes=2.0, optimizer_bytes_per_param=4.0, grad_reduce_bytes=4.0,
                expert_grad_reduce_bytes=2.0, moe_routing="consecutive", fsdp_reshard_after_forward=pp == 1,
                recompute_early_stop=True,
                expert_bias_eager="fc1_fc2", expert_clamp_eager=False, attention_bias_eager=False, rope_kernel="te_fused",
                cross_entropy="torch_bf16", **common)


def fp8_recipe(row) -> str | None:
    """A run's FP8 scaling recipe: its ``fp8_recipe`` column (``run_recipe_columns.fp8_recipe_of``; the values and
    their sources: data/reference/README.md), None on a BF16 row and where the source names no recipe
    (``unstated``: the layout's recipe stays unset). Until col57 this read the note's words, where a note naming two
    recipes was decided by the order of the reader's tests."""
    return fp8_recipe_of(row)


def expert_kernels(row, model) -> str:
    """How a run's grouped experts are issued (:mod:`topo.training.grouped_gemm`): the row's ``moe_expert_kernels``
    column, ``fused_mlp`` where its recipe runs Transformer Engine's CuTe DSL fused grouped MLP (its note and
    data/reference/README.md cite the recipe), else Transformer Engine's multi-stream ``GroupedLinear``
    (``multi_stream``)."""
    return row.get("moe_expert_kernels") or "multi_stream"


def hybridep_sms(row, model) -> int | None:
    """The SMs a Megatron-Bridge HybridEP run's dispatcher kernels are launched on (``moe_hybridep_num_sms``), from
    its release's scripts (``data/reference/megatron_bridge_hybridep_sms.csv``, each release with its source); None
    for other rows, releases not read and models whose configs were not read (Nemotron 3 Nano: its own recipe
    values; GPT OSS 20B: 128), which keep ``ParallelLayout.ep_comm_sms``'s default."""
    release = re.search(r"NeMo (\d\d\.\d\d(?:\.\d\d)?)", row.get("software") or "")
    if not row["run_id"].startswith("mb") or release is None:
        return None
    sms, prefixes = hybridep_sms_table(ROOT / "data" / "reference" / HYBRIDEP_SMS_FILE).get(release[1], (None, ()))
    return sms if model.name.startswith(prefixes) else None


DSV3_LAYOUTS = {
    # Megatron-Bridge's DeepSeek-V3 recipe places the layers by (pp, vpp) (NVIDIA-NeMo/Megatron-Bridge@05d003fb
    # src/megatron/bridge/recipes/deepseek/deepseek_v3.py, ``layout_map``): the embedding with the first chunk's
    # layers, the MTP module and the loss with few layers on the last chunk
    (4, 1): "Et*16|t*16|t*16|t*13mL",
    (8, 1): "Et*8|(t*8|)*6t*5mL", (4, 2): "Et*8|(t*8|)*6t*5mL",
    (16, 1): "Et*4|(t*4|)*14tmL", (8, 2): "Et*4|(t*4|)*14tmL", (4, 4): "Et*4|(t*4|)*14tmL",
    # 32 chunks: the H100 performance preset's ``pp_layout`` (Megatron-Bridge@0426418
    # scripts/performance/configs/deepseek/deepseek_workload_base_configs.py, DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1,
    # PP8 VP4); the GB200 FP8 row of 25.11 at PP8 VP4 is given the same (assumption: no other 32-chunk layout is
    # published for these recipes)
    (8, 4): "Et|(tt|)*30mL",
    # 16 chunks as PP2 VP8: the GB300 recipes' own ``pp_layout`` (Megatron-Bridge@79308d0d
    # src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v3.py, deepseek_v3_pretrain_256gpu_gb300_fp8mx_config;
    # @21d102f5 scripts/performance/configs/deepseek/deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_V1)
    (2, 8): "Et*4|(t*4|)*14tmL",
}

def nemo_dsv3_layout(pp: int) -> str:
    """DeepSeek-V3's pipeline layout in NeMo 25.04's performance script (NVIDIA/NeMo@7a8f1cc7
    scripts/performance/llm/pretrain_deepseek_v3.py: ``num_layers_in_first_pipeline_stage = 64 // pp - 1``, the last
    stage ``64 // pp - 2``, the middle ones ``64 // pp``; 61 layers in all) with the recipe's MTP layer and the loss on
    the last stage (``recipes/deepseek_v3.py`` ``use_mtp=True``), in :mod:`topo.training.pipeline_layout`'s notation."""
    mid = 64 // pp
    middle = f"(t*{mid}|)*{pp - 2}" if pp > 2 else ""
    return f"Et*{mid - 1}|{middle}t*{mid - 2}mL"


TRAINING_KEYS = ("ampere_bf16", "hopper_bf16", "hopper_fp8", "blackwell_bf16", "blackwell_fp8")
HOST = "host_s"


def _ranges():
    import tomllib
    t = tomllib.loads((ROOT / "topo" / "data" / "compute" / "kernels.toml").read_text())
    return tuple(t["training"]["range"]), tuple(t["launch"]["host_s_range"]), t["launch"]["host_s"]


FRACTION_RANGE, HOST_RANGE, HOST_DEFAULT = _ranges()


PAIR_KEY = ("software", "system", "gpu", "num_gpus", "model", "seq_len", "global_batch_seqs", "micro_batch", "tp",
            "pp", "cp", "vpp", "ep", "fsdp", "etp", "moe_capacity_factor")
"""The columns a BF16 run and an FP8 run share to be one pair: the same model, release (software), system, scale,
batch, layout and routing (token-drop capacity; :data:`PAIR_NOTE_FLAGS`); the recipe's other settings (CUDA graphs,
dispatcher, recomputation) may differ, and the pair table says where they do (:data:`PAIR_OTHER`)."""
PAIR_NOTE_FLAGS = ("force-load-balancing",)
"""Routing that only a row's note records, which a pair's two runs must share: Megatron-LM's
``--moe-router-force-load-balancing`` (the Megatron-MoE-ModelZoo's Mixtral table runs BF16 both with and without
it, and block-wise FP8 with it)."""
PAIR_OTHER = ("cuda_graph_scope", "moe_dispatcher", "moe_dispatch_bytes", "moe_a2a_overlap", "recompute_modules",
              "recompute_granularity", "activation_offload_layers")


def pair_ratio_error(measured_a_s: float, measured_b_s: float, topo_a_s: float, topo_b_s: float) -> float:
    """How far topo's step-time ratio of run B over run A is from the measured one: ``(topo B / A) / (measured B / A)
    - 1`` (negative: topo puts B further below A than measured). The one formula of the FP8 pair table and of
    ``layout_pairs.py``."""
    return (topo_b_s / topo_a_s) / (measured_b_s / measured_a_s) - 1


def fp8_recipe_label(row) -> str:
    """A FP8 run's scaling recipe for the pair table: its ``fp8_recipe`` column (delayed, current, blockwise,
    mxfp8), ``per-tensor`` where the source names none (``unstated``)."""
    return fp8_recipe(row) or "per-tensor"


def fp8_pairs(setups) -> list[tuple[dict, dict]]:
    """``(bf16, fp8)`` setups of every published BF16 run and FP8 run that share :data:`PAIR_KEY` (a run of the
    paper file, without a CSV row, pairs with none), each hold-out run only with a hold-out run: a pair is fitted or
    held out as a whole."""
    by_key = {}
    for s in setups:
        if s.get("row") is not None:
            flags = tuple(f in (s["row"].get("note") or "") for f in PAIR_NOTE_FLAGS)
            by_key.setdefault((s["holdout"],) + tuple(s["row"].get(k) or "" for k in PAIR_KEY) + flags, []).append(s)
    return [(b, f) for runs in by_key.values() for b in runs if b["row"]["precision"] == "bf16"
            for f in runs if f["row"]["precision"] == "fp8"]


def _pair_line(b, f) -> str:
    """One pair's row of :func:`fp8_pair_section`: the measured step ratio FP8 / BF16 against topo's."""
    meas, topo = f["step_s"] / b["step_s"], f["pred"] / b["pred"]
    lofo = (f"{pair_ratio_error(b['step_s'], f['step_s'], b['lofo'], f['lofo']):+.1%}"
            if (b.get("lofo") and f.get("lofo")) else "-")
    other = ", ".join(c for c in PAIR_OTHER if (b["row"].get(c) or "") != (f["row"].get(c) or "")) or "-"
    return (f"| {b['run']} / {f['run']}{' (hold-out)' if f['holdout'] else ''} | {f['family']} | {f['gpu']} | "
            f"{f['row']['software']} | {fp8_recipe_label(f['row'])} | {meas:.3f} | {topo:.3f} | {topo / meas - 1:+.1%}"
            f" | {lofo} | {b['pred'] / b['step_s'] - 1:+.1%} | {f['pred'] / f['step_s'] - 1:+.1%} | {other} |")


def fp8_pair_section(setups) -> str:
    """The FP8-over-BF16 pair table (markdown): every :func:`fp8_pairs` pair, the measured step-time ratio FP8 /
    BF16 against topo's in-sample and out-of-family ones, and the median ratio error by set, recipe and GPU
    generation (negative: topo's FP8 gain is larger than measured)."""
    pairs = sorted(fp8_pairs(setups), key=lambda p: (p[1]["holdout"], p[1]["group"], p[1]["family"], p[1]["gpu"],
                                                     p[1]["run"]))
    lines = ["| BF16 run / FP8 run | family | GPU | release | FP8 recipe | measured FP8/BF16 | topo | ratio error | "
             "out of family | BF16 error | FP8 error | settings that differ |", "|---|---|---|---|---|---|---|---|---|"
             "---|---|---|"] + [_pair_line(b, f) for b, f in pairs]
    by_recipe = _pair_summary(pairs, lambda f: (fp8_recipe_label(f["row"]), f["gen"]), "FP8 recipe | GPU generation")
    by_family = _pair_summary(pairs, lambda f: (f["family"], f["gpu"], _release(f["row"])), "family | GPU | release")
    return ("FP8 over BF16, pair by pair: runs of one model, release, system, scale, batch and layout in both "
            "precisions (`fp8_pairs`); ratio error = topo's FP8/BF16 step ratio over the measured one, minus 1 "
            "(negative: topo's FP8 gain too large).\n\n" + by_recipe + "\n\n" + by_family + "\n\n"
            + "\n".join(lines))


def _release(row) -> str:
    """A row's release for the pair summary: ``NeMo yy.mm`` where its software names one, else the software up to
    its first parenthesis."""
    m = re.search(r"NeMo \d\d\.\d\d", row.get("software") or "")
    return m[0] if m else (row.get("software") or "").split(" (")[0]


def _pair_summary(pairs, key, header: str) -> str:
    """The median ratio error of ``pairs`` by set and ``key(fp8 setup)`` (a tuple, ``header`` naming its columns),
    in-sample and out of family (where both runs have an out-of-family prediction)."""
    groups, lofo = {}, {}
    for b, f in pairs:
        k = ("hold-out" if f["holdout"] else "fitted",) + key(f)
        groups.setdefault(k, []).append(pair_ratio_error(b["step_s"], f["step_s"], b["pred"], f["pred"]))
        if b.get("lofo") and f.get("lofo"):
            lofo.setdefault(k, []).append(pair_ratio_error(b["step_s"], f["step_s"], b["lofo"], f["lofo"]))
    n = header.count("|") + 1
    out = [f"| set | {header} | pairs | median ratio error | range | out of family |", "|---" * (n + 5) + "|"]
    return "\n".join(out + [f"| {' | '.join(k)} | {len(v)} | {_median(v):+.1%} | {min(v):+.1%} .. {max(v):+.1%} | "
                             + (f"{_median(lofo[k]):+.1%} |" if k in lofo else "- |") for k, v in sorted(groups.items())])


def scored(setups):
    """The runs of the in-sample and out-of-family scores: every run but the hold-out file's."""
    return [s for s in setups if not s["holdout"]]


def fitted(setups):
    """The runs a fit may read: the scored runs but those measured under a filed software regression
    (``REGRESSED``) or on a cluster its publisher's own run of the same preset outran (``CLUSTER_SLOW``)."""
    return [s for s in scored(setups) if s["run"] not in NOT_FITTED]


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def _report(setups, values):
    """The accuracy tables (markdown) and the out-of-family error per group (the prediction intervals)."""
    lines = ["| run | group | family | GPU | layout | measured (s) | in-sample | error | out of family | error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in setups:
        L = s["lay"]
        lay = f"tp{L.tp} cp{L.cp} pp{L.pp}" + (f"x{L.vpp}" if L.vpp > 1 else "") + f" dp{L.dp}" \
            + (f" ep{L.ep}" if L.ep > 1 else "") + f" {L.precision}"
        e_in = s["pred"] / s["step_s"] - 1
        out = s.get("lofo")
        tag = " (hold-out)" if s["holdout"] else (" (filed regression: not fitted)" if s["run"] in REGRESSED else
                                                  " (cluster slower than its twin: not fitted)"
                                                  if s["run"] in CLUSTER_SLOW else "")
        lines.append(f"| {s['run']}{tag} | {s['group']} | {s['family']} | "
                     f"{s['gpu']} | {lay} | {s['step_s']:.3g} | {s['pred']:.3g} | {e_in:+.1%} | "
                     + (f"{out:.3g} | {out / s['step_s'] - 1:+.1%} |" if out else "- | - |"))
    summary = ["| group | GPU generation | runs | in-sample | leave-one-family-out | signed median (out of family) |"
               " hold-out runs | hold-out error |", "|---|---|---|---|---|---|---|---|"]
    errors = {}
    for g in GROUPS:
        for gen in ("all", "ampere", "hopper", "blackwell"):
            rows = [s for s in setups if s["group"] == g and not s["holdout"] and gen in ("all", s["gen"])]
            held = [s for s in setups if s["group"] == g and s["holdout"] and gen in ("all", s["gen"])]
            if not rows and not held:
                continue
            ins = [abs(s["pred"] / s["step_s"] - 1) for s in rows]
            out = [s["lofo"] / s["step_s"] - 1 for s in rows if s.get("lofo")]
            ho = [abs(s["pred"] / s["step_s"] - 1) for s in held]
            errors.setdefault(g, {})[gen] = out
            summary.append(f"| {g} | {gen} | {len(rows)} | {_median(ins):.1%} | {_median([abs(x) for x in out]):.1%}"
                           f" | {_median(out):+.1%} | {len(held)} | {_median(ho):.1%} |")
    fitted = ", ".join(f"{k} {v:.3g}" for k, v in values.items())
    body = ("Step time of each published run (`data/reference/training_runs*.csv`), predicted by `topo train`'s "
            "kernel model (`topo/data/compute/kernels.toml`: GEMMs by tile and wave quantisation at the published "
            "MAMF x MSMF/MAMF rate, cuDNN attention by head dimension and length, HBM-bound kernels, launch gaps "
            "and the host's launches) and the traffic mix on the source's network. Fitted: one fraction of the "
            "sustained GEMM rate per generation and precision, on the dense runs only, and the host's launch time "
            f"per kernel within its published 5-20 us, on the MoE runs: {fitted}. "
            "Leave-one-family-out (the headline) refits those fractions without every run of the scored run's model "
            "family; the hold-out file is never fitted, nor are runs measured under a software regression their "
            "publisher filed, nor runs of a cluster that its publisher's own run of the same preset outran (marked; "
            "scored like the others).\n\n" + "\n".join(summary) + "\n\n" + "\n".join(lines))
    return body, errors


def _set_in_table(text: str, table: str, key: str, value: str) -> str:
    """``text`` (a TOML file) with ``key``'s value in ``[table]`` replaced by ``value``; raises if the key is not in
    that table (a value may hold brackets, so the table's end is its next header line, not its next ``[``)."""
    start = text.index(f"\n[{table}]\n")
    nxt = re.compile(r"^\[", re.M).search(text, start + 2)
    m = re.compile(rf"^{key} = [0-9.e-]+$", re.M).search(text, start, nxt.start() if nxt else len(text))
    if m is None:
        raise KeyError(f"{key} not in [{table}]")
    return text[:m.start()] + f"{key} = {value}" + text[m.end():]


def run_spans(setups, fabrics) -> dict:
    """What each group's scored runs span, across generations (``"all"``) and on each generation: group -> ``"all"``
    or a generation -> step_uncertainty.toml's span keys (:data:`topo.training.uncertainty.SPAN_KEYS`), from each
    run's layout placed on its fabric as ``topo train`` places it (:func:`topo.training.uncertainty.job_reach`). The
    same runs as :func:`_report`'s out-of-family errors: the scored ones (not the hold-out)."""
    from topo.training.mapping import default_placement, map_layout
    from topo.training.uncertainty import job_reach

    out: dict = {}
    for s in scored(setups):
        f = fabrics[s["spec"]]
        lay, _ = default_placement(s["lay"], f.spec.gpus_per_domain, f.layout.num_gpus)
        reach = job_reach(lay, map_layout(lay, f.spec.gpus_per_domain, f.layout.num_gpus))
        for gen in ("all", s["gen"]):
            sp = out.setdefault(s["group"], {}).setdefault(gen, {
                "families": set(), "by_gen": {}, "gpus_min": reach["gpus"], "gpus_max": reach["gpus"],
                "pp_max": 1, "cp_max": 1, "ep_max": 1, "ep_domains_max": 1})
            sp["families"].add(s["family"])
            sp["by_gen"][s["gen"]] = sp["by_gen"].get(s["gen"], 0) + 1
            sp["gpus_min"], sp["gpus_max"] = min(sp["gpus_min"], reach["gpus"]), max(sp["gpus_max"], reach["gpus"])
            for k in ("pp", "cp", "ep", "ep_domains"):
                sp[f"{k}_max"] = max(sp[f"{k}_max"], reach[k])
    for by_gen in out.values():
        for sp in by_gen.values():
            sp["families"] = sorted(sp["families"])
            by_gen = sorted(sp.pop("by_gen").items())
            sp["generations"], sp["generation_runs"] = [g for g, _ in by_gen], [n for _, n in by_gen]
    return out


def _write_spans() -> None:
    """``--spans``: each row's span keys of step_uncertainty.toml from the runs CSVs (:func:`run_spans`), its
    errors kept as they are: no step is predicted, nothing is fitted."""
    setups = _setups()
    spans = run_spans(setups, _fabrics(setups))
    out = ROOT / "topo" / "data" / "compute" / "step_uncertainty.toml"
    out.write_text(uncertainty_text(out.read_text(), None, spans))
    print(f"wrote {out}")


def _write_fit(values, errors, spans) -> None:
    path = ROOT / "topo" / "data" / "compute" / "kernels.toml"
    text = path.read_text()
    for key, v in values.items():
        if key == HOST:
            text = _set_in_table(text, "launch", key, f"{v:.3g}")
        else:
            text = _set_in_table(text, "training", key, f"{v:.3f}")
    path.write_text(text)
    print(f"wrote {path}")
    out = ROOT / "topo" / "data" / "compute" / "step_uncertainty.toml"
    out.write_text(uncertainty_text(out.read_text(), errors, spans))
    print(f"wrote {out}")


def _toml_value(v) -> str:
    """A span key's value as TOML: a list of names or of counts, or an integer."""
    if isinstance(v, list):
        return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in v) + "]"
    return str(v)


def uncertainty_text(old: str, errors, spans=None) -> str:
    """step_uncertainty.toml from ``errors`` (group -> ``"all"`` or a GPU generation -> signed out-of-family errors):
    each group's ``[group]`` row across generations and a ``[group.generation]`` row for each generation with at least
    ``old``'s ``generation_min_runs`` runs; each row's runs, p50 and p90 of the absolute errors and signed median,
    then, where ``spans`` (:func:`run_spans`) has the row, what its runs span. ``errors`` None keeps ``old``'s rows'
    runs and percentiles (``--spans``). ``old``'s header is kept as it is (``status``, the minimum and ``source``,
    which ``topo train --json`` shows as the interval's ``basis``: one place)."""
    from topo.training.uncertainty import SPAN_KEYS

    m = re.search(r"^\[", old, re.M)
    header = old[:m.start() if m else len(old)].rstrip("\n")
    least = int(tomllib.loads(header)["generation_min_runs"])
    rows = {}
    if errors is None:
        for g, row in tomllib.loads(old).items():
            if isinstance(row, dict):
                for gen, r in [("all", row)] + [(k, v) for k, v in row.items() if isinstance(v, dict)]:
                    rows[(g, gen)] = [f"runs = {r['runs']}", f"p50 = {r['p50']:.3f}", f"p90 = {r['p90']:.3f}",
                                      f"median = {r['median']:.3f}"]
    else:
        for g, by_gen in errors.items():
            for gen, errs in by_gen.items():
                if not errs or (gen != "all" and len(errs) < least):
                    continue
                a = np.abs(errs)
                rows[(g, gen)] = [f"runs = {len(errs)}", f"p50 = {float(np.percentile(a, 50)):.3f}",
                                  f"p90 = {float(np.percentile(a, 90)):.3f}", f"median = {float(np.median(errs)):.3f}"]
    lines = [header, ""]
    for (g, gen), stats in rows.items():
        span = (spans or {}).get(g, {}).get(gen)
        lines += [f"[{g}]" if gen == "all" else f"[{g}.{gen}]", *stats]
        lines += [f"{k} = {_toml_value(span[k])}" for k in SPAN_KEYS] if span else []
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        main()
    except RunColumnError as exc:  # a bad recipe column: its one line, no traceback
        sys.exit(str(exc))
