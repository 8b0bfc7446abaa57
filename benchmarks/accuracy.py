"""Accuracy against real nccl-tests measurements, scored honestly.

Every setup of data/reference/nccl_tests_measurements.csv and data/measurements/extra_nccl_tests.csv is modelled
with its GPUs, nodes, NICs and collective (the algorithm, protocol and channels NCCL ran where the source says so,
else ``auto``) and compared size by size with the measured time (out-of-place; where a source gives only busbw,
time = size x busbw factor / busbw). Figures are the median absolute percentage error (MdAPE) in the bandwidth
regime (sizes >= 64 MiB) and the latency regime (<= 64 KiB).

1. **Leave-one-setup-out over every setup (the headline).** The constants of topo/data/profiles/ marked
   ``fitted = true`` (the pipeline window, Hopper's NVLSTree efficiency, Blackwell's usable NVLink, NVLS and
   NVLSTree efficiencies, its extra latency per NVLink step, and once per collective across NVL72 trays, the network
   efficiency of RoCE and EFA, the network latency per step over NCCL's constants: one term shared by every
   Ethernet family (RoCE, EFA, the TCP offloads) plus each family's departure from it, held tighter, so that a
   family left out is priced with what the others share; EFA's per-peer overhead) are refitted on every setup but
   one, starting from the values a user would have without
   any fit (NCCL's own: no window, NVLSTree = NVLS efficiency, Hopper's NVLink fraction, no NVL72 terms,
   InfiniBand's network values and NCCL's network latencies), and the left-out setup is scored. A constant no
   other setup informs stays at that unfitted value when its setup is left out. EFA's per-step latency is AWS's
   published tuner constant (aws-ofi-nccl), never fitted. Setups whose sources report them as below their
   hardware are kept out of every fit (``no_fit``, with the reason) and still scored. The same figure over the
   reference set alone (the issue's first definition) is reported too.
2. **Fitted on the reference set only, scored on the published set**: a held-out set for that fit.
3. **In-sample.** The bundled profiles, whose fitted constants saw every setup. Labelled as such.
4. **Calibrated.** ``topo calibrate``'s fit on one sweep of a setup: on its even-indexed sizes, scored on the
   odd-indexed ones; and on the all-reduce sweep, scored on the same cluster's all-to-all.

    python benchmarks/accuracy.py            # prints the tables and with --write updates benchmarks/RESULTS.md (~15 min, 2 cores)
    python benchmarks/accuracy.py --quick    # in-sample only (seconds)
    python benchmarks/accuracy.py --fit      # the constants fitted on every setup (for topo/data/profiles/)
    python benchmarks/accuracy.py --small    # only the folds of setups measured at <= 64 KiB: leave-one-setup-out,
                                             # leave-one-network-family-out and the held-out set (a few minutes)

5. **Leave-one-network-family-out** (InfiniBand, RoCE, EFA, Google's TCP offloads): each family scored with the
   constants fitted on the other families only, the latency regime reported apart from large sizes.
6. **Held out** (data/measurements/heldout_nccl_tests.csv, ``HELDOUT_SETUPS``, ``held_out=True``): setups no fit
   reads (:func:`fit_groups` refuses them), scored with the bundled profiles and with the fit on every other setup.

The interval ``topo estimate`` reports (topo/data/accuracy/collective_interval.toml) is the 10th-90th percentile of
the leave-one-setup-out signed errors per size regime, printed under the headline (``interval_lines``).
"""

from __future__ import annotations

import csv
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from _results import ROOT, arguments, update_section

sys.path.insert(0, str(ROOT))

from topo import build_fabric, spec_from_dict  # noqa: E402
from topo.calibrate.fit import Case, FreeParam, calibration_params, case_errors, fit_cases, fit_identified  # noqa: E402
from topo.calibrate.setup import Setup, node_spec  # noqa: E402
from topo.engine.collectives import busbw_factor  # noqa: E402
from topo.engine.profiles import latency_inter_us, profile_for  # noqa: E402

# The measurements ship with the project (data/reference/ and data/measurements/, each row with its source);
# TOPO_DATA_DIR points the reference set elsewhere, as for the tests.
DATA = Path(os.environ.get("TOPO_DATA_DIR", ROOT / "data" / "reference")) / "nccl_tests_measurements.csv"
EXTRA = ROOT / "data" / "measurements" / "extra_nccl_tests.csv"
HELDOUT = ROOT / "data" / "measurements" / "heldout_nccl_tests.csv"  # never read by a fit (HELDOUT_SETUPS)
COLUMNS = {"setup_id", "collective", "size_bytes", "time_us", "busbw_GBps"}
BW_MIN = 64 * 2**20
LAT_MAX = 64 * 2**10


@dataclass
class SetupDef:
    spec: dict
    gpus: int
    algorithm: str = "auto"
    why: str = ""
    exclude: str = ""  # a reason to leave the setup out of the overall figures (and of every fit)
    no_fit: str = ""  # a reason to keep the setup out of every fit (it is still scored, in every figure)
    protocol: str | None = None  # NCCL_PROTO, when the run pinned one protocol (as topo compare models it)
    channels: int | None = None  # NCCL_MIN_NCHANNELS / NCCL_MIN_CTAS, when the run pinned the channel count
    held_out: bool = False  # data/measurements/heldout_nccl_tests.csv: scored, never read by any fit
    gpus_per_process: int = 1  # nccl-tests -g N: one process and thread launched N GPUs (the source's command)


def _ns(gpu, nics, rate, tech, servers, gpus=8, domain=None):
    return node_spec(gpu, nics, rate, tech, servers, gpus, domain)


# How each measured setup is modelled (facts from the CSV row and its source; assumptions said).
SETUPS: dict[str, SetupDef] = {
    "ncclt290_h100_1n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 1), 8, "nvls",
                                 "NVIDIA's reply in the issue: NVLS; run with -g 8 (the row's note)",
                                 gpus_per_process=8),
    "ncclt309_h100_2n_xe9680": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 2), 16),
    "ncclt309_h100_4n_vm": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 4), 32),
    "aws_p5_2n": SetupDef(_ns("H100", 32, "100 Gb/s", "efa", 2), 16, why="EFA: 32 x 100 Gb/s per node"),
    "oci_a100_2n_full": SetupDef(_ns("A100", 16, "100 Gb/s", "oci_roce", 2), 16,
                                 why="assumption: 16 RDMA ports of 100 Gb/s (the source does not state the speed)"),
    "gcp_a4_2n_allgather": SetupDef(_ns("B200", 8, "400 Gb/s", "gcp_roce", 2), 16),
    "oci_gb300_1n": SetupDef(_ns("GB300", 8, "400 Gb/s", "oci_roce", 18, gpus=4, domain=72), 4,
                             why="4 GPUs of one NVL72 rack"),
    "oci_gb300_2n": SetupDef(_ns("GB300", 8, "400 Gb/s", "oci_roce", 18, gpus=4, domain=72), 8,
                             why="2 hosts of one NVL72 rack: one NVLink domain (MNNVL)"),
    "oci_gb200_1n": SetupDef(_ns("GB200", 4, "400 Gb/s", "oci_roce", 18, gpus=4, domain=72), 4,
                             why="4 GPUs of one NVL72 rack"),
    "oci_gb200_2n": SetupDef(_ns("GB200", 4, "400 Gb/s", "oci_roce", 18, gpus=4, domain=72), 8,
                             why="modelled as labelled (2 hosts, 8 ranks)",
                             exclude="busbw/algbw = 1.96875 implies 64 ranks, not the 8 labelled (see data README)"),
    "azure_ndh100v5_1n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 1), 8, "nvls",
                                  "labelled NVLS by the source; NCCL_ALGO=NVLS all_reduce_perf -g 8 (the source's "
                                  "NCCLBandwidth.py): one thread launches the 8 GPUs", gpus_per_process=8),
    "azure_nda100v4_1n": SetupDef(_ns("A100", 8, "200 Gb/s", "infiniband_hdr", 1), 8,
                                  why="run as NCCL_ALGO=NVLS all_reduce_perf -g 8 (the source's NCCLBandwidth.py): "
                                      "NCCL 2.18 drops NVLS on A100 and re-enables Ring and Tree: auto; one thread "
                                      "launches all 8 GPUs (the host's launch floor)", gpus_per_process=8),
}

NCCL527 = ("filed as 'slow bus bandwidth' (NVIDIA/nccl #527, NCCL 2.9.9): a run its reporter says is below its "
           "hardware")

JZ_CONGESTED = ("the author reports fabric-wide congestion from 16 nodes up (busbw swinging 2-3x between iterations, "
                "'well below the 350+ GB/s we'd expect'; JingchaoZhang.github.io 2026-03-03): below its hardware")

# The published measurements of data/measurements/extra_nccl_tests.csv (see its README for the sources).
EXTRA_SETUPS: dict[str, SetupDef] = {
    "cw_gb200_1rack": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 18, gpus=4, domain=72), 72,
                               why="one NVL72 rack, 72 ranks"),
    "cw_gb200_2racks": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 36, gpus=4, domain=72), 144,
                                why="two NVL72 racks; NICs per tray assumed 4 x 400G"),
    "cw_gb200_20racks": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 360, gpus=4, domain=72), 1440,
                                 why="20 NVL72 racks under one leaf group (the source gives no fabric)",
                                 no_fit="its NVLSTree runs at half the 2-rack rate for a cause topo does not model "
                                        "(NCCL's 64 KiB chunk from 4 nodes on is modelled, and priced at NCCL's step "
                                        "latency it does not explain it: docs/calibration-findings.md 33x): fitted, "
                                        "this run would drag the NVLSTree efficiency of every smaller multi-rack "
                                        "run down"),
    "cw_h100_8n_sharp": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 8), 64,
                                 why="the source ran its SHARP job; modelled without SHARP (auto)"),
    "cw92_b200_2n": SetupDef(_ns("B200", 8, "400 Gb/s", "infiniband_ndr", 2), 16),
    "cw92_h100_2n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 2), 16),
    "nccl527_p4dn_1n": SetupDef(_ns("A100", 4, "100 Gb/s", "efa", 1), 8),
    "nccl527_p4dn_2n": SetupDef(_ns("A100", 4, "100 Gb/s", "efa", 2), 16, why="4 NICs for 8 GPUs",
                                no_fit=NCCL527),
    "nccl527_p4dn_3n": SetupDef(_ns("A100", 4, "100 Gb/s", "efa", 3), 24, why="4 NICs for 8 GPUs",
                                no_fit=NCCL527),
    "nccl527_p4dn_4n": SetupDef(_ns("A100", 4, "100 Gb/s", "efa", 4), 32, why="4 NICs for 8 GPUs",
                                no_fit=NCCL527),
    "ncclt232_h100_2x1_4nic": SetupDef(_ns("H100", 4, "400 Gb/s", "roce", 2, gpus=1), 2, "tree",
                                       "1 GPU and 4 NICs per node, NCCL_ALGO=Tree"),
    "nccl652_a100_32n": SetupDef(_ns("A100", 4, "200 Gb/s", "infiniband_hdr", 32), 256,
                                 why="32 x 8 A100, 4 HDR NICs per node: latency floor at 32 nodes"),
    "dstack3961_p6b200_2n": SetupDef(_ns("B200", 8, "400 Gb/s", "efa", 2), 16, why="EFA B200 latency floor"),
    "oci_gb300_16n_1rack": SetupDef(_ns("GB300", 8, "400 Gb/s", "oci_roce", 18, gpus=4, domain=72), 64,
                                    why="16 hosts of one NVL72 rack, 64 ranks (MNNVL)"),
    "oci_gb300_32n_2racks": SetupDef(_ns("GB300", 8, "400 Gb/s", "oci_roce", 32, gpus=4, domain=64), 128,
                                     why="32 hosts on 2 NVL72 racks, 16 per rack: modelled as 2 NVLink domains "
                                         "of 64 GPUs (the trays the run used)"),
    "ocioke_gb200_32n_2racks": SetupDef(_ns("GB200", 4, "400 Gb/s", "oci_roce", 32, gpus=4, domain=64), 128,
                                        "^nvls,nvls_tree",
                                        why="32 trays on 2 NVL72 racks; the split per rack is not stated "
                                            "(assumed 16 + 16, as OCI's GB300 2-rack run); auto without NVLS, as "
                                            "the shape's manifest sets NCCL_NVLS_ENABLE=0"),
    "awsefaeks_p4d_2n": SetupDef(_ns("A100", 4, "100 Gb/s", "efa", 2), 16,
                                 why="p4d, 4 NICs for 8 GPUs, NCCL 2.8.3 with an early aws-ofi-nccl (2021)",
                                 no_fit="NCCL 2.8.3 (2021) with the aws-ofi-nccl of its time: the stack, not the "
                                        "hardware, sets its pace (43% of the p4de run's busbw at 1 GiB on the same NICs)"),
    "ncclt309gj_h100_2n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 2), 16,
                                   why="gj-aion's 8-node IB cluster (not the issue author's)"),
    "ncclt309gj_h100_4n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 4), 32,
                                   why="gj-aion's 8-node IB cluster, 4 nodes"),
    "ncclt309gj_h100_8n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 8), 64,
                                   why="gj-aion's 8-node IB cluster, all 8 nodes"),
    "ncclt309gj_h100_8n_ctas24": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 8), 64, channels=24,
                                          why="NCCL_MIN_CTAS=24 (24 channels); QPS_PER_CONNECTION=2 not modelled"),
    "ncclt309gj_h100_2n_ring": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 2), 16, "ring", channels=24,
                                        why="NCCL_ALGO=Ring, NCCL_MIN_CTAS=24 (24 channels)"),
    "ncclt322_h100_128n_roce_ring": SetupDef(_ns("H100", 8, "400 Gb/s", "roce", 128), 1024, "ring",
                                             protocol="LL128", channels=32,
                                             why="1,024 H100 over RoCE, NCCL_ALGO=Ring, NCCL_PROTO=LL128, 32 "
                                                 "channels; 8 x 400G per node assumed; one leaf group"),
    "gcp_a4xmax_gb300_2n_xdomain": SetupDef(_ns("GB300", 8, "400 Gb/s", "gcp_roce", 2, gpus=4, domain=4), 8,
                                            why="2 GB300 hosts in different NVLink domains: all traffic between "
                                                "them on RoCE; 3.2 Tb/s per host assumed"),
    "gcp_a4x_gb200_2n_mnnvl": SetupDef(_ns("GB200", 4, "400 Gb/s", "gcp_roce", 18, gpus=4, domain=72), 8,
                                       why="2 hosts of one NVL72 (IMEX), 8 ranks"),
    "gcp_a4x_gb200_8n_mnnvl": SetupDef(_ns("GB200", 4, "400 Gb/s", "gcp_roce", 18, gpus=4, domain=72), 32,
                                       why="8 hosts of one NVL72 sub-block, 32 ranks (from the row counts)"),
    "awsome_p5_2n_eks": SetupDef(_ns("H100", 32, "100 Gb/s", "efa", 2), 16,
                                 why="EFA: 32 x 100 Gb/s per node; NCCL 2.18.5, aws-ofi-nccl 1.7.3"),
    # NVIDIA/nccl#1801: three NVL partitions of one GB200 system each on a different rack, NVLS off
    "nccl1801_gb200_3racks_nvl4_ring": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 3, gpus=4, domain=4), 12,
                                                "ring", "3 partitions of 4 GPUs (1 tray each) on 3 racks, Ring"),
    "nccl1801_gb200_3racks_nvl4_tree": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 3, gpus=4, domain=4), 12,
                                                "tree", "3 partitions of 4 GPUs on 3 racks, NCCL_ALGO=Tree"),
    "nccl1801_gb200_3racks_nvl8_ring": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 6, gpus=4, domain=8), 24,
                                                "ring", "3 partitions of 8 GPUs (2 trays each) on 3 racks, Ring"),
    "nccl1801_gb200_3racks_nvl8_tree": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 6, gpus=4, domain=8), 24,
                                                "tree", "3 partitions of 8 GPUs on 3 racks, NCCL_ALGO=Tree"),
    "awsome_p4de_2n": SetupDef(_ns("A100", 4, "100 Gb/s", "efa", 2), 16,
                               why="p4de: 4 x 100 Gb/s EFA per 8 A100 (efa on A100 is efa_v1: Simple only)"),
    "a3mega_tcpxo_2n": SetupDef(_ns("H100", 8, "200 Gb/s", "gcp_tcpxo", 2), 16, "ring,tree", protocol="Simple",
                                why="GCP A3 Mega, GPUDirect-TCPXO; Google's TCPXO NCCL profile sets NCCL_PROTO=Simple "
                                    "(Simple,LL128 since May 2025; the run is undated), and every release that set "
                                    "Simple alone (Apr 2024 - Feb 2025) also set NCCL_ALGO=Ring,Tree and "
                                    "NCCL_NVLS_ENABLE=0 (GoogleCloudPlatform/container-engine-accelerators "
                                    "gpudirect-tcpxo/README.md; NVLSTree from the Aug 2025 release)"),
    "gcp_a3ultra_2n_allgather": SetupDef(_ns("H200", 8, "400 Gb/s", "gcp_roce", 2), 16,
                                         why="GCP A3 Ultra (H200), GPUDirect RDMA with gIB: a second gcp_roce setup"),
    "sky_a3ultra_2n_allgather": SetupDef(_ns("H200", 8, "400 Gb/s", "gcp_roce", 2), 16,
                                         why="the same machine type run through SkyPilot on GKE (another run, same page)"),
    "dstack_nebius_h100_2n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 2), 16,
                                      why="2 x 8 H100 on InfiniBand (Nebius); 8 x 400G NDR per node assumed"),
    "dstack_lambda_b200_2n": SetupDef(_ns("B200", 8, "400 Gb/s", "infiniband_ndr", 2), 16,
                                      why="2 x 8 B200 on InfiniBand (Lambda 1CC); 8 x 400G NDR per node assumed"),
    # dcoll helper
    "xxrjun_h100_10n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 10), 80,
                                why="10 x 8 H100, 5 collectives of one job (NCCL 2.29.2); one 400G NIC per GPU from "
                                    "the same nodes' 1/2/4-GPU runs; InfiniBand assumed"),
    "xxrjun_h100_2n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 2), 16,
                               why="2 of the same 10 nodes (pairwise run): alltoall and sendrecv, 4-16 GiB"),
    "mgcafe_a3mega_tcpxo_2n_allgather": SetupDef(_ns("H100", 8, "200 Gb/s", "gcp_tcpxo", 2), 16,
                                                 why="GCP A3 Mega, GPUDirect-TCPXO (NCCL 2.28.7, FasTrak 1.0.8, "
                                                     "2026 plugin: Google's profile allows Simple and LL128)"),
    "xxrjun_h100_10x1": SetupDef(_ns("H100", 1, "400 Gb/s", "infiniband_ndr", 10, gpus=1), 10,
                                 why="the same 10 nodes, 1 GPU (and 1 NIC) per node: a pure network ring / p2p"),
    "xxrjun_h100_2x1": SetupDef(_ns("H100", 1, "400 Gb/s", "infiniband_ndr", 2, gpus=1), 2,
                                why="2 of the same nodes, 1 GPU per node: NIC-to-NIC alltoall and sendrecv"),
    # dlead helper: Azure ND H100 v5 (JingchaoZhang.github.io), 8 GiB all-reduce on 2-64 nodes of one VMSS
    **{f"jz_ndv5_h100_{n}n{sfx}": SetupDef(
        _ns("H100", 8, "400 Gb/s", "infiniband_ndr", n), 8 * n, channels=32,
        why=(f"Azure ND96isr_H100_v5, {n} nodes, 8 x 400G NDR per node (stated); NCCL_MIN_NCHANNELS=32 (32 "
             f"channels; QPS_PER_CONNECTION=4 not modelled); {label}: adaptive routing off and on are the same "
             "hardware, modelled alike"),
        no_fit="" if n <= 8 else JZ_CONGESTED)
       for n in (2, 4, 8, 16, 32, 48, 64)
       for sfx, label in (("", "NCCL_IB_SL=0 (static routing)"), ("_ar", "NCCL_IB_SL=2 (adaptive routing)"))},
    "sky_a3high_tcpx_2n": SetupDef(_ns("H100", 4, "200 Gb/s", "gcp_tcpx", 2), 16, "ring", protocol="Simple",
                                   channels=8,
                                   why="GCP A3 High (a3-highgpu-8g), GPUDirect-TCPX on 4 GPU NICs (eth1-eth4) of 200 Gb/s "
                                       "assumed (GCP: 1000 Gbps in all with the host NIC); NCCL_ALGO=Ring, "
                                       "NCCL_PROTO=Simple, 8 channels (SkyPilot's nccl_tcpx_gcpvm_h100.yaml)"),
    "dstack_a3high_tcpx_2n_allgather": SetupDef(
        _ns("H100", 4, "200 Gb/s", "gcp_tcpx", 2), 16, protocol="Simple", channels=8,
        why="GCP A3 High, GPUDirect-TCPX: a second published run (dstack's A3 High example, all_gather 8 MiB - 8 GiB). "
            "Its run-allgather.sh prints no NCCL settings; Ring, Simple and 8 channels assumed as GKE's "
            "nccl-config-latest.yaml (container-engine-accelerators gpudirect-tcpx) sets them for the same image"),
    "jz_ndv5_h100_3n": SetupDef(_ns("H100", 8, "400 Gb/s", "infiniband_ndr", 3), 24, channels=32,
                                why="Azure ND96isr_H100_v5, 3 nodes (the author's second post), NCCL_MIN_NCHANNELS=32"),
}


# Held out: data/measurements/heldout_nccl_tests.csv, found for issue 33 and read by no fit (fit_groups refuses them)
HELDOUT_SETUPS: dict[str, SetupDef] = {
    "ncclt150_a100_2x1_hdr": SetupDef(_ns("A100", 1, "200 Gb/s", "infiniband_hdr", 2, gpus=1), 2, held_out=True,
                                      why="held out: 2 servers x 1 A100 80GB on HDR InfiniBand (one rank per node, "
                                          "one HDR NIC assumed), all-reduce 8-64 B"),
    "azure_ndh200v5_1n": SetupDef(_ns("H200", 8, "400 Gb/s", "infiniband_ndr", 1), 8, "nvls", held_out=True,
                                  why="held out: one ND H200 v5 VM (8 H200, Xeon 8480C), NCCL_ALGO=NVLS "
                                      "all_reduce_perf -g 8 (one thread launches the 8 GPUs), NCCL 2.20.5",
                                  gpus_per_process=8),
    "azure_ndgb200v6_1n": SetupDef(_ns("GB200", 4, "400 Gb/s", "infiniband_ndr", 18, gpus=4, domain=72), 4, "ring",
                                   held_out=True,
                                   why="held out: one ND GB200 v6 VM (the 4 GPUs of one NVL72 tray, Grace), "
                                       "NCCL_ALGO=Ring all_reduce_perf -g 4 (one thread), NCCL 2.25.1",
                                   gpus_per_process=4),
    # NVIDIA/nccl PR #1112: the same 8 p5 nodes and 4 GiB all-reduce, NVLSTree, before and after NCCL 2.19.3 capped
    # its chunk at 64 KiB from 4 nodes on (512 KiB without the cap): 81,146 against 30,196 us
    **{f"nccl1112_p5_8n_nvlstree_{v}": SetupDef(_ns("H100", 32, "100 Gb/s", "efa", 8), 64, "nvls_tree", held_out=True,
                                               why=f"held out: 8 x p5.48xlarge (EFA: 32 x 100 Gb/s per node), "
                                                   f"NVLSTree 4 GiB, NCCL {dot} (NVIDIA/nccl PR #1112)")
       for v, dot in (("2193", "2.19.3: 64 KiB chunk"), ("2191", "2.19.1: 512 KiB chunk"))},
}

ALL_SETUPS = {**SETUPS, **EXTRA_SETUPS, **HELDOUT_SETUPS}

# The host CPU where the instance's published specification names it and it differs from the catalog server's for
# that GPU (topo/data/catalog/servers.toml: AMD for A100 as DGX A100, Arm for the NVL72 trays, else Intel): NCCL's
# network overhead per step is 2 us on AMD x86, 1 us on Intel (tuning.cc getNetOverhead). The other setups take the
# catalog's: Azure NDv4 and OCI's A100 shapes are AMD EPYC (7V12; 7542 / 7J13), Azure ND H100 v5, GCP A3/A3 Ultra/A4,
# Dell XE9680, CoreWeave and Nebius H100 are Intel Xeon (as their specifications say); the rest do not say.
P4D_INTEL = "AWS EC2 P4 instances: 2nd Generation Intel Xeon Scalable (Cascade Lake P-8275CL) processors"
P5_AMD = "AWS EC2 P5 instances: 3rd Gen AMD EPYC processors (AMD EPYC 7R13)"
CPU_VENDOR = {
    "nccl527_p4dn_1n": ("intel", P4D_INTEL), "nccl527_p4dn_2n": ("intel", P4D_INTEL),
    "nccl527_p4dn_3n": ("intel", P4D_INTEL), "nccl527_p4dn_4n": ("intel", P4D_INTEL),
    "awsefaeks_p4d_2n": ("intel", P4D_INTEL), "awsome_p4de_2n": ("intel", P4D_INTEL),
    "aws_p5_2n": ("amd", P5_AMD), "awsome_p5_2n_eks": ("amd", P5_AMD),
    "nccl1112_p5_8n_nvlstree_2193": ("amd", P5_AMD), "nccl1112_p5_8n_nvlstree_2191": ("amd", P5_AMD),
    "dstack3961_p6b200_2n": ("intel", "AWS EC2 P6-B200 instances: 5th Generation Intel Xeon Scalable (Emerald Rapids)"),
}
for _sid, (_vendor, _src) in CPU_VENDOR.items():
    ALL_SETUPS[_sid].spec["server"]["cpu_vendor"] = _vendor


@dataclass
class Group:
    """One (setup, collective) sweep with its case (fabric, sizes, measured times) and tags."""

    setup: str
    collective: str
    d: SetupDef
    case: Case
    tags: frozenset = field(default_factory=frozenset)


def measured_time_s(row: dict, ranks: int) -> float | None:
    if row["time_us"]:
        return float(row["time_us"]) * 1e-6
    if row["busbw_GBps"] and float(row["busbw_GBps"]) > 0:
        size = int(row["size_bytes"])
        return size * busbw_factor(row["collective"], ranks) / (float(row["busbw_GBps"]) * 1e9)
    return None


def read_measurements(path: Path, setups) -> list[dict]:
    """The measured rows, or SystemExit with one line saying what is missing (never a traceback)."""
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            missing = COLUMNS - set(reader.fieldnames or ())
    except OSError as exc:
        _fail(f"{path}: cannot read the measurements ({exc.strerror}); they ship with the project in "
              "data/reference/ (or set TOPO_DATA_DIR to their folder)")
    if missing:
        _fail(f"{path}: not a measurements file, missing columns: {', '.join(sorted(missing))}")
    unknown = sorted({r["setup_id"] for r in rows} - set(setups))
    if unknown:
        _fail(f"{path}: setups without a model in benchmarks/accuracy.py: {', '.join(unknown)}")
    return rows


def _fail(message: str):
    """One line on stderr and exit status 2, as the command line does for bad input."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def load_groups(path, setups) -> list[Group]:
    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in read_measurements(path, setups):
        by_key.setdefault((r["setup_id"], r["collective"]), []).append(r)
    fabrics, groups = {}, []
    for (sid, coll), rows in by_key.items():
        d = setups[sid]
        if sid not in fabrics:
            fabrics[sid] = build_fabric(spec_from_dict(d.spec, source=sid))
        fab = fabrics[sid]
        pairs = [(int(r["size_bytes"]), measured_time_s(r, d.gpus)) for r in rows]
        pairs = [(s, t) for s, t in pairs if t]
        gen, tech = fab.spec.gpu_model.generation, fab.spec.fabric.technology
        setup = Setup(fab, d.gpus, d.algorithm if coll == "all_reduce" else "auto", protocol=d.protocol,
                      channels=d.channels, gpus_per_process=d.gpus_per_process)
        case = Case(setup, coll, [s for s, _ in pairs], [t for _, t in pairs],
                    profile_for(gen, tech).for_cpu(fab.spec.cpu_vendor),
                    label=f"{sid}:{coll}",
                    tags=frozenset({f"gpu:{gen}", f"network:{tech}", f"netfamily:{network_family(tech)}",
                                    f"netclass:{network_class(tech)}"}))
        groups.append(Group(sid, coll, d, case, case.tags))
    return groups


# --- the shared fitted constants, and the values a user has before any fit -------------------------------------

def unfitted(gen: str, tech: str):
    """The bundled profile with every fitted constant replaced by what NCCL's own model (or InfiniBand) gives."""
    p = profile_for(gen, tech)
    ib = profile_for(gen, "infiniband_ndr")
    eff = dict(p.proto_efficiency)
    if "nvls" in eff:
        eff["nvls_tree"] = {"Simple": eff["nvls"]["Simple"]}
    p = replace(p, pipeline_window_bytes=0.0, proto_efficiency=eff, p2p_channel_Bps=math.inf)  # no p2p cap
    if gen == "blackwell":  # Hopper's NVLink fraction, and no extra NVLink latency, in a tray or across (NCCL's own)
        p = replace(p, nvlink_efficiency=profile_for("hopper", tech).nvlink_efficiency, nvlink_hop_extra_s=0.0,
                    mnnvl_hop_extra_s=0.0, mnnvl_extra_s=0.0)
    if network_family(tech) == "roce":  # provider latency scales are fitted: NCCL's own constants instead
        p = replace(p, network_efficiency=ib.network_efficiency, net_hop_s=ib.net_hop_s,
                    peer_overhead_s=ib.peer_overhead_s)
    elif tech in TCP_NETS:  # Google's TCP offloads: NCCL's own constants, as for RoCE (TCPX's rate: its runs' reading)
        p = replace(p, network_efficiency=p.network_efficiency if tech in RATE_READ else ib.network_efficiency,
                    net_hop_s=ib.net_hop_s, peer_overhead_s=ib.peer_overhead_s)
    elif network_family(tech) == "efa":  # AWS's published tuner constant per step kept, topo's fitted extra not
        p = replace(p, network_efficiency=ib.network_efficiency, peer_overhead_s=ib.peer_overhead_s,
                    net_hop_s=p.nccl_net_hop_s)
    return p


TCP_NETS = ("gcp_tcpx", "gcp_tcpxo")  # GPUDirect-TCPX/TCPXO: their own efficiency and per-step latency
# networks whose efficiency is read from their published runs' plateaus, not fitted (the network file says how):
# a least-squares fit over TCPX's whole sweeps trades it against the latency term for a ramp topo's model does not
# have, and lands on a plateau above both runs (docs/calibration-findings.md, the TCPX rate section)
RATE_READ = ("gcp_tcpx",)


def network_class(tech: str) -> str:
    """``ethernet`` for every network on Ethernet (RoCE, EFA's SRD, Google's TCP offloads), else ``infiniband``:
    NCCL's latency constants (tuning.cc hwLat[NET]) are InfiniBand's, and every Ethernet stack measured here pays
    more per network step than they say."""
    return "infiniband" if tech.startswith("infiniband") else "ethernet"


def network_family(tech: str) -> str:
    """``roce`` for every RoCE provider file, ``efa`` for every EFA generation, else the technology."""
    return "roce" if tech.endswith("roce") else ("efa" if tech.startswith("efa") else tech)


def _set_nvls_tree(pr, e):
    eff = dict(pr.proto_efficiency)
    eff["nvls_tree"] = {"Simple": e}
    return replace(pr, proto_efficiency=eff)


def _set_nvls(pr, e):
    eff = dict(pr.proto_efficiency)
    eff["nvls"] = {"Simple": e}
    return replace(pr, proto_efficiency=eff)


def _scale_net(pr, m):
    return replace(pr, net_hop_s={f: {k: v * m for k, v in d.items()} for f, d in pr.net_hop_s.items()})


def _add_net_latency(pr, us):
    """NCCL's latencyInter: ``us`` added to every network step, twice for Simple (topo.profiles.net_step_table),
    times the network file's ``net_hop_scale`` as the bundled value is (EFA v4: the plugin's latency ratio)."""
    a = 1e-6 * pr.sources.get("net_hop_scale", {}).get("value", 1.0)
    return replace(pr, net_hop_s={f: {k: v + a * latency_inter_us(us, k) for k, v in d.items()}
                                  for f, d in pr.net_hop_s.items()})


# Each Ethernet family's departure from the Ethernet term (us per network step, either way). The prior of the fit
# (topo.calibrate.fit.PRIOR_WEIGHT over a quarter of the range) holds these 5x tighter than the Ethernet term, so
# the Ethernet term takes what the families share and a family left out is priced with it.
ETHERNET_RESIDUAL_US = 20.0
ETHERNET_FAMILIES = ("netfamily:roce", "netfamily:efa", "network:gcp_tcpxo")


def net_latency_totals(values: dict) -> dict:
    """The ``net_latency_us`` each Ethernet network file carries: the Ethernet term plus its family's departure
    (from fitted ``values`` as :func:`topo.calibrate.fit.fit_cases` names them)."""
    base = values.get("net_latency_us[netclass:ethernet]", 0.0)
    return {tag: base + values.get(f"net_latency_us[{tag}]", 0.0) for tag in ETHERNET_FAMILIES}


def net_latency_param(tag: str | None, hi_us: float = 100.0) -> FreeParam:
    return FreeParam("net_latency_us", "linear", 0.5, 0.0, hi_us, _add_net_latency, tag)  # from 0.5: inside the bound


def shared_params() -> list[FreeParam]:
    ib = profile_for("hopper", "infiniband_ndr")
    bw = profile_for("blackwell", "infiniband_ndr")
    out = [FreeParam("pipeline_window_MiB", "linear", 0.0, 0.0, 256.0,
                     lambda pr, w: replace(pr, pipeline_window_bytes=w * 2**20)),
           FreeParam("nvls_tree_efficiency", "linear", ib.proto_efficiency["nvls"]["Simple"], 0.3, 1.0,
                     _set_nvls_tree, "gpu:hopper"),
           FreeParam("nvlink_efficiency", "linear", ib.nvlink_efficiency, 0.3, 1.0,
                     lambda pr, e: replace(pr, nvlink_efficiency=e), "gpu:blackwell"),
           FreeParam("nvls_efficiency", "linear", bw.proto_efficiency["nvls"]["Simple"], 0.3, 1.0, _set_nvls,
                     "gpu:blackwell"),
           FreeParam("nvls_tree_efficiency", "linear", bw.proto_efficiency["nvls"]["Simple"], 0.3, 1.0,
                     _set_nvls_tree, "gpu:blackwell"),
           FreeParam("nvlink_hop_extra_us", "linear", 0.0, 0.0, 5.0,
                     lambda pr, us: replace(pr, nvlink_hop_extra_s=us * 1e-6), "gpu:blackwell"),
           # no mnnvl_hop_extra_us: in an NVL72 rack every NVLink step crosses one NVSwitch, in a tray or across
           # trays (blackwell.toml), and the RoCE NVL72 runs cannot tell a rack's step from Blackwell's: fitted beside
           # nvlink_hop_extra_us it went to 0 on every setup and took the whole step with Lambda's B200 left out
           FreeParam("mnnvl_extra_us", "linear", 0.0, 0.0, 50.0,
                     lambda pr, us: replace(pr, mnnvl_extra_s=us * 1e-6), "gpu:blackwell")]
    for fam in ("roce", "efa"):
        out.append(FreeParam("network_efficiency", "linear", ib.network_efficiency, 0.3, 1.0,
                             lambda pr, e: replace(pr, network_efficiency=e), f"netfamily:{fam}"))
    # the network latency over NCCL's (or AWS's) constants: one term for every Ethernet stack, which a family no
    # run measured inherits, and each family's own departure from it (ETHERNET_FAMILIES); TCPX through the host
    # its own (up to 1 ms); the TCP offloads' own efficiency
    out += [net_latency_param("netclass:ethernet")]
    out += [FreeParam("net_latency_us", "linear", 0.0, -ETHERNET_RESIDUAL_US, ETHERNET_RESIDUAL_US, _add_net_latency,
                      tag) for tag in ETHERNET_FAMILIES]
    out += [net_latency_param("network:gcp_tcpx", 1000.0)]
    out += [FreeParam("network_efficiency", "linear", ib.network_efficiency, 0.3, 1.0,
                      lambda pr, e: replace(pr, network_efficiency=e), f"network:{tech}") for tech in TCP_NETS
            if tech not in RATE_READ]
    # not fitted: LL's per-channel rate at small sizes (gpu files' ll_channel_busbw_GBps, absent: off) lowered LOSO
    # <= 64 KiB 13.0 -> 12.5% but raised RoCE family-out 15.0 -> 32.6% and the held-out 6.1 -> 10.9%
    # (docs/calibration-findings.md section 33x); to try it, a FreeParam per generation tagged f"gpu:{gen}", 4.4-45
    # one NCCL p2p channel to a network peer (send/receive); the fit starts from about a 400G NIC per channel
    out.append(FreeParam("p2p_channel_GBps", "linear", 45.0, 5.0, 200.0,
                         lambda pr, v: replace(pr, p2p_channel_Bps=v * 1e9), "network:infiniband_ndr"))
    out.append(FreeParam("peer_overhead_scale", "log", 0.0, math.log(0.1), math.log(20.0),
                         lambda pr, m: replace(pr, peer_overhead_s=pr.peer_overhead_s * m), "netfamily:efa"))
    return out


def _start(g: Group) -> Case:
    fab = g.case.setup.fabric
    return replace(g.case, profile=unfitted(fab.spec.gpu_model.generation, fab.spec.fabric.technology)
                   .for_cpu(fab.spec.cpu_vendor))


# --- scoring --------------------------------------------------------------------------------------------------

@dataclass
class Scored:
    setup: str
    collective: str
    sizes: list[int]
    errors: list[float]  # signed relative (model / measured - 1)
    algorithms: list[str] = field(default_factory=list)

    def mdape(self, regime: str):
        sel = [abs(e) * 100 for s, e in zip(self.sizes, self.errors) if _in(regime, s)]
        return (statistics.median(sel), len(sel)) if sel else (None, 0)


def _in(regime, s):
    return s >= BW_MIN if regime == "bw" else (s <= LAT_MAX if regime == "lat" else True)


def overall(scored: list[Scored], regime: str, excluded=()):
    apes = [abs(e) * 100 for x in scored if x.setup not in excluded for s, e in zip(x.sizes, x.errors)
            if _in(regime, s)]
    return (statistics.median(apes), len(apes)) if apes else (None, 0)


def score(g: Group, profile) -> Scored:
    from topo.calibrate.compare import modelled_times

    res = modelled_times(g.case.setup, g.collective, g.case.sizes, profile)
    errs = [r.time_s / m - 1 for r, m in zip(res, g.case.measured_s)]
    return Scored(g.setup, g.collective, g.case.sizes, errs, [r.algorithm for r in res])


_FOLDS: dict = {}  # the groups and parameters of a leave-one-out run, inherited by its worker processes


LATENCY_PARAMS = ("net_latency_us", "nvlink_hop_extra_us", "mnnvl_hop_extra_us", "mnnvl_extra_us")
MIN_LATENCY_SIZES = 4  # a latency constant is fitted only on at least this many sizes <= 1 MiB of its setups
LATENCY_EVIDENCE_MAX = 2**20  # (on every network here latency is a large part of the time up to 1 MiB)


def fit_groups(groups: list[Group], max_nfev: int = 40):
    """One fit of the shared constants over ``groups`` (from the unfitted start): (parameters, fit). A latency
    constant whose setups carry fewer than MIN_LATENCY_SIZES sizes up to 1 MiB stays at its unfitted value: a size
    or two of one run is not evidence enough for a per-step latency (it would be fitted to their noise)."""
    train = [_start(g) for g in groups]
    small: dict[str, int] = {}
    for c in train:
        for t in c.tags:
            small[t] = small.get(t, 0) + sum(1 for s in c.sizes if s <= LATENCY_EVIDENCE_MAX)
    if any(g.d.held_out for g in groups):
        raise ValueError("held-out setups are never fitted: "
                         + ", ".join(sorted({g.setup for g in groups if g.d.held_out})))
    ps = [p for p in shared_params() if p.tag is None or p.tag in small]
    ps = [p for p in ps if p.name not in LATENCY_PARAMS or p.tag is None or small[p.tag] >= MIN_LATENCY_SIZES]
    return ps, fit_cases(train, ps, max_nfev=max_nfev)


def fitted_profile(g: Group, ps, x):
    """``g``'s unfitted profile with the fitted constants its tags select."""
    prof = _start(g).profile
    for p, xi in zip(ps, x):
        if p.tag is None or p.tag in g.tags:
            prof = p.apply(prof, p.value(xi))
    return prof


def fitting_set(groups: list[Group]) -> list[Group]:
    """The groups constants are fitted on: every setup but those excluded or kept out of fits (with reasons)."""
    return [g for g in groups if not g.d.exclude and not g.d.no_fit and not g.d.held_out]


def _fold(held: str):
    groups, max_nfev = _FOLDS["groups"], _FOLDS["max_nfev"]
    ps, fit = fit_groups([g for g in fitting_set(groups) if g.setup != held], max_nfev)
    return [score(g, fitted_profile(g, ps, fit.x)) for g in groups if g.setup == held], fit.values


def leave_one_setup_out(groups: list[Group], max_nfev: int = 40, processes: int = 2, only=None):
    """Each setup scored with the constants fitted on every other setup (folds run in ``processes`` workers);
    ``only``: the setups to score (default every one not excluded)."""
    helds = sorted({g.setup for g in groups if not g.d.exclude and (only is None or g.setup in only)})
    _FOLDS.update(groups=groups, max_nfev=max_nfev)
    if processes > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.map(_fold, helds, chunksize=1)
    else:
        results = [_fold(h) for h in helds]
    out = [s for scored, _ in results for s in scored]
    return out, {h: values for h, (_, values) in zip(helds, results)}


NETWORK_FAMILIES = ("infiniband", "roce", "efa", "tcp")


def family_of(g: Group) -> str:
    """The network family a setup's fabric runs: InfiniBand, RoCE (every provider), EFA (every generation) or
    Google's TCP offloads (TCPX, TCPXO)."""
    tech = g.case.setup.fabric.spec.fabric.technology
    fam = network_family(tech)
    return "infiniband" if fam.startswith("infiniband") else ("tcp" if tech in TCP_NETS else fam)


def _family_fold(fam: str):
    groups, max_nfev = _FOLDS["groups"], _FOLDS["max_nfev"]
    ps, fit = fit_groups([g for g in fitting_set(groups) if family_of(g) != fam], max_nfev)
    return [score(g, fitted_profile(g, ps, fit.x)) for g in groups if family_of(g) == fam and not g.d.exclude]


def leave_one_family_out(groups: list[Group], max_nfev: int = 40, processes: int = 2) -> dict[str, list]:
    """Each network family's setups scored with the constants fitted on the other families only: a family the
    model has no run of (its latency and efficiency terms start from NCCL's InfiniBand values)."""
    _FOLDS.update(groups=groups, max_nfev=max_nfev)
    fams = [f for f in NETWORK_FAMILIES if any(family_of(g) == f for g in groups)]
    if processes > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.map(_family_fold, fams, chunksize=1)
    else:
        results = [_family_fold(f) for f in fams]
    return dict(zip(fams, results))


def _lonfo_lines(everything: list[Group], excluded) -> list[str]:
    by_fam = leave_one_family_out(everything)
    lines = ["### Leave-one-network-family-out", "",
             "Each family scored with the constants fitted on the other families' setups only (target <= 20% at "
             "<= 64 KiB).", ""]
    for fam, scored in by_fam.items():
        lines.append(f"- {fam} ({len({x.setup for x in scored})} setups): {_regimes(scored, excluded)}")
    pooled = [x for scored in by_fam.values() for x in scored]
    lines += [f"- pooled: {_regimes(pooled, excluded)}", ""]
    return lines


INTERVAL_REGIMES = (("latency", 0, LAT_MAX), ("middle", LAT_MAX + 1, BW_MIN - 1), ("bandwidth", BW_MIN, 2**63))
INTERVAL_QUANTILES = (0.1, 0.9)


def interval_lines(scored: list[Scored], excluded=()) -> list[str]:
    """The 10th and 90th percentiles of the signed errors (model / measured - 1) per size regime: the values of
    topo/data/accuracy/collective_interval.toml (measured = model / (1 + error))."""
    import numpy as np

    lines = ["Signed-error percentiles per size regime (model / measured - 1; topo/data/accuracy/"
             "collective_interval.toml):", ""]
    for name, lo, hi in INTERVAL_REGIMES:
        errs = np.array([e for x in scored if x.setup not in excluded for s, e in zip(x.sizes, x.errors)
                         if lo <= s <= hi])
        if errs.size:
            q = np.quantile(errs, INTERVAL_QUANTILES)
            lines.append(f"- {name}: p10 {q[0]:+.4f}, p90 {q[1]:+.4f}, median {np.median(errs):+.4f} "
                         f"({errs.size} sizes)")
    return lines + [""]


def _heldout_lines(everything: list[Group], held: list[Group]) -> list[str]:
    """The held-out setups scored with the bundled profiles and with the fit on every other setup (no fit reads
    them)."""
    if not held:
        return []
    ps, fit = fit_groups(fitting_set(everything))
    bundled = [score(g, g.case.profile) for g in held]
    refit = [score(g, fitted_profile(g, ps, fit.x)) for g in held]
    lines = ["### Held out (data/measurements/heldout_nccl_tests.csv: no fit reads it)", "",
             f"- bundled profiles: {_regimes(bundled)}", f"- fitted on every other setup: {_regimes(refit)}", ""]
    return lines + _table(bundled, ALL_SETUPS) + [""]


def _small_setups(groups: list[Group]) -> set[str]:
    return {g.setup for g in groups if any(s <= LAT_MAX for s in g.case.sizes)}


def calibrated(groups: list[Group], max_nfev: int = 60):
    """Fit on the even-indexed sizes of one sweep, score the odd ones; fit on all-reduce, score all-to-all. As
    ``topo calibrate`` fits: only the parameters the sweep determines (:func:`topo.calibrate.fit.fit_identified`)."""
    rows = []
    for g in groups:
        if g.d.exclude or len(g.case.sizes) < 8:
            continue
        train = replace(g.case, sizes=g.case.sizes[::2], measured_s=g.case.measured_s[::2])
        test = replace(g.case, sizes=g.case.sizes[1::2], measured_s=g.case.measured_s[1::2])
        fit = fit_identified([train], calibration_params(g.case.profile, [train]), max_nfev=max_nfev)
        before = case_errors(test)
        after = case_errors(replace(test, profile=fit.profiles[0]))
        rows.append(("half sizes", g.setup, g.collective, list(test.sizes), before, after, fit.seconds))
    by_setup: dict[str, dict[str, Group]] = {}
    for g in groups:
        by_setup.setdefault(g.setup, {})[g.collective] = g
    for sid, colls in by_setup.items():
        if "all_reduce" in colls and len(colls) > 1 and not colls["all_reduce"].d.exclude:
            ar = colls["all_reduce"].case
            fit = fit_identified([ar], calibration_params(ar.profile, [ar]), max_nfev=max_nfev)
            for coll, g in colls.items():
                if coll == "all_reduce":
                    continue
                before = case_errors(g.case)
                after = case_errors(replace(g.case, profile=fit.profiles[0]))
                rows.append(("all_reduce -> " + coll, sid, coll, list(g.case.sizes), before, after, fit.seconds))
    return rows


def fmt(x):
    return "-" if x is None else f"{x:.1f}%"


def _table(scored: list[Scored], setups: dict, title_note: str = "") -> list[str]:
    lines = ["| setup | collective | GPUs | algorithms chosen | MdAPE >= 64 MiB (n) | MdAPE <= 64 KiB (n) | "
             "median signed error | note |", "|---|---|---:|---|---:|---:|---:|---|"]
    for x in scored:
        d = setups[x.setup]
        bw, nbw = x.mdape("bw")
        lat, nlat = x.mdape("lat")
        note = "; ".join(s for s in (d.why, f"excluded: {d.exclude}" if d.exclude else "",
                                     f"kept out of fits: {d.no_fit}" if d.no_fit else "") if s)
        signed = statistics.median(x.errors) * 100
        lines.append(f"| {x.setup} | {x.collective} | {d.gpus} | {', '.join(sorted(set(x.algorithms))) or '-'} | "
                     f"{fmt(bw)} ({nbw}) | {fmt(lat)} ({nlat}) | {signed:+.0f}% | {note} |")
    return lines


def tuner_section(groups, insample, excluded) -> list[str]:
    """auto's choice as NCCL's tuner makes it (``choose = "nccl"``, topo/tuner.py) against the default
    (``choose = "fastest"``), bundled profiles: every size whose algorithm differs, with both errors."""
    nccl = [score(replace(g, case=replace(g.case, setup=replace(g.case.setup, choose="nccl"))), g.case.profile)
            for g in groups]
    out = ["", "### auto's choice as NCCL's tuner makes it (`choose = \"nccl\"`, topo/tuner.py) vs the routed "
               "fastest (`\"fastest\"`, the default), bundled profiles", "",
           "| regime | fastest | nccl |", "|---|---:|---:|"]
    for regime, name in (("bw", ">= 64 MiB"), ("lat", "<= 64 KiB"), ("all", "all sizes")):
        (x, nx), (y, _) = overall(insample, regime, excluded), overall(nccl, regime, excluded)
        out.append(f"| {name} ({nx}) | {fmt(x)} | {fmt(y)} |")
    out += ["", "Sizes where the two choose differently (signed error, model / measured - 1):", "",
            "| setup | size (B) | fastest | nccl |", "|---|---:|---|---|"]
    for a, b in zip(insample, nccl):
        for size, ea, aa, eb, ab in zip(a.sizes, a.errors, a.algorithms, b.errors, b.algorithms):
            if aa != ab:
                out.append(f"| {a.setup} | {size} | {aa} {ea * 100:+.1f}% | {ab} {eb * 100:+.1f}% |")
    return out


def _regimes(scored, excluded=()) -> str:
    (bw, nbw), (lat, nlat), (al, nal) = (overall(scored, r, excluded) for r in ("bw", "lat", "all"))
    return (f">= 64 MiB **{fmt(bw)}** ({nbw} sizes), <= 64 KiB **{fmt(lat)}** ({nlat}), all sizes {fmt(al)} "
            f"({nal})")


def _fit_values_line(fits: dict) -> list[str]:
    vals: dict[str, list[float]] = {}
    for values in fits.values():
        for k, v in values.items():
            vals.setdefault(k, []).append(v)
    return [f"- `{k}`: {min(v):.3g} - {max(v):.3g}" for k, v in sorted(vals.items())]


def _small_lines(groups, extra_groups, held, excluded) -> list[str]:
    """``--small``: the folds of the setups measured at <= 64 KiB only (their other sizes are scored too)."""
    everything = groups + extra_groups
    pooled, _ = leave_one_setup_out(everything, only=_small_setups(everything))
    lines = ["### Leave-one-setup-out, setups measured at <= 64 KiB only", "",
             f"- {len({x.setup for x in pooled})} setups: {_regimes(pooled, excluded)}", ""]
    lines += interval_lines(pooled, excluded)
    return lines + _lonfo_lines(everything, excluded) + _heldout_lines(everything, held)


def _loso_lines(groups, extra_groups, excluded, held_out=()) -> list[str]:
    everything = groups + extra_groups
    pooled, fits = leave_one_setup_out(everything)
    ref = [x for x in pooled if x.setup in SETUPS]
    ext = [x for x in pooled if x.setup in EXTRA_SETUPS]
    ref_only, _ = leave_one_setup_out(groups)
    kept = sorted({g.setup for g in everything if g.d.no_fit and not g.d.exclude})
    lines = ["### Headline: leave-one-setup-out over every measured setup", "",
             f"Each of the {len({x.setup for x in pooled})} setups (data/reference and data/measurements) is scored "
             "with the constants refitted on every other setup, never on itself. Targets: <= 10% (>= 64 MiB) and "
             "<= 25% (<= 64 KiB).", "",
             f"- all setups: {_regimes(pooled, excluded)}",
             f"- of them, the reference set (data/reference): {_regimes(ref, excluded)}",
             f"- of them, the published set (data/measurements): {_regimes(ext)}",
             f"- the reference set alone (fitted and left out within its {len(SETUPS)} setups, the first "
             f"definition): {_regimes(ref_only, excluded)}", "",
             f"Kept out of every fit, still scored: {', '.join(kept) or 'none'} (reasons in the table's notes).", ""]
    lines += interval_lines(pooled, excluded)
    lines += _table(pooled, ALL_SETUPS)
    lines += ["", "Refitted constants across the folds (min - max; the bundled values were fitted on all setups):",
              ""] + _fit_values_line(fits)
    # the reference set's fit, scored on the published set: a held-out set no constant of this fit saw
    ps, fit = fit_groups(fitting_set(groups))
    held = [score(g, fitted_profile(g, ps, fit.x)) for g in extra_groups]
    lines += ["", "### Fitted on the reference set only, scored on the published set", "",
              f"{_regimes(held)}. The published set's setups saw none of these constants.", ""]
    return lines + _lonfo_lines(everything, excluded) + _heldout_lines(everything, list(held_out))


def _args():
    """The command line: ``--quick``, ``--small``, ``--fit`` (one at a time) and ``--write``."""
    ap = arguments(__doc__)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="in-sample only (seconds); writes nothing")
    mode.add_argument("--small", action="store_true", help="only the folds of setups measured at <= 64 KiB "
                      "(a few minutes)")
    mode.add_argument("--fit", action="store_true", help="print the constants fitted on every setup (for "
                      "topo/data/profiles/; writes nothing)")
    return ap.parse_args()


def main() -> None:
    args = _args()
    quick = args.quick
    t0 = time.perf_counter()
    groups = load_groups(DATA, SETUPS)
    extra_groups = load_groups(EXTRA, EXTRA_SETUPS)
    held = load_groups(HELDOUT, HELDOUT_SETUPS)
    excluded = {k for k, d in ALL_SETUPS.items() if d.exclude}
    if args.small:
        print("\n".join(_small_lines(groups, extra_groups, held, excluded)))
        print(f"Run time: {time.perf_counter() - t0:.0f} s.")
        return
    insample = [score(g, g.case.profile) for g in groups + extra_groups]
    lines = [] if quick else _loso_lines(groups, extra_groups, excluded, held)
    if args.fit:  # the values to write into topo/data/profiles/ (fitted on every setup)
        _, fit = fit_groups(fitting_set(groups + extra_groups))
        print("\n".join(f"{k} = {v:.4g}" for k, v in fit.values.items()))
        print("\n".join(f"net_latency_us of {tag} (the value its files carry) = {v:.4g}"
                        for tag, v in net_latency_totals(fit.values).items()))
        print(f"MdAPE {fit.mdape_before_pct:.1f}% unfitted -> {fit.mdape_after_pct:.1f}% ({fit.seconds:.0f} s)")
        return
    lines += ["### In-sample (the bundled profiles, whose fitted constants saw every setup below)", "",
              f"{_regimes(insample, excluded)}. In-sample: not a measure of accuracy on a cluster the model has "
              "not seen.", ""]
    lines += _table(insample, ALL_SETUPS)
    if not quick:
        cal = calibrated(groups + extra_groups)
        lines += ["", "### Calibrated on one sweep of the same cluster (`topo calibrate`'s fit)", "",
                  "| split | setup | scored collective | held-out sizes | MdAPE before | MdAPE after | fit (s) |",
                  "|---|---|---|---:|---:|---:|---:|"]
        pooled: dict[str, tuple[list, list]] = {}
        secs = []
        for split, sid, coll, sizes, before, after, sec in cal:
            b = statistics.median(abs(before)) * 100
            a = statistics.median(abs(after)) * 100
            kind = "half" if split == "half sizes" else "cross"
            pooled.setdefault(kind, ([], []))[0].extend(abs(before) * 100)
            pooled[kind][1].extend(abs(after) * 100)
            secs.append(sec)
            lines.append(f"| {split} | {sid} | {coll} | {len(sizes)} | {b:.1f}% | {a:.1f}% | {sec:.1f} |")
        hb, ha = (statistics.median(x) for x in pooled["half"])
        lines += ["", f"Other sizes of the calibrated sweep, pooled: MdAPE {hb:.1f}% with the bundled profile, "
                      f"**{ha:.1f}%** after calibrating (target <= 5%)."]
        if "cross" in pooled:
            cb, ca = (statistics.median(x) for x in pooled["cross"])
            lines.append("Other collectives of the same cluster (fit on its all-reduce, score its other sweeps: "
                         f"all-to-all, all-gather, reduce-scatter, send/receive): {cb:.1f}% -> **{ca:.1f}%**: an "
                         "all-reduce sweep says little about point-to-point and all-to-all costs, which its fit "
                         "leaves free.")
        lines.append(f"Each fit took {min(secs):.1f}-{max(secs):.1f} s.")
    lines += tuner_section(groups + extra_groups, insample, excluded)
    lines += ["", f"Run time: {time.perf_counter() - t0:.0f} s."]
    text = "\n".join(lines)
    print(text)
    detail = ["", "<details><summary>Every size, in-sample: measured vs model</summary>", "",
              "| setup | collective | size (B) | error | algorithm |", "|---|---|---:|---:|---|"]
    for x in insample:
        for size, e, a in zip(x.sizes, x.errors, x.algorithms):
            detail.append(f"| {x.setup} | {x.collective} | {size} | {e * 100:+.1f}% | {a} |")
    detail.append("</details>")
    if not quick:  # written to RESULTS.md only with --write (benchmarks/_results.py)
        update_section("Accuracy against nccl-tests measurements", text + "\n" + "\n".join(detail),
                       "python benchmarks/accuracy.py")

if __name__ == "__main__":
    main()
