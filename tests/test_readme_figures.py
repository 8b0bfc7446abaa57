"""Figures the README quotes in its prose are what the commands print (round 2's walk of the README on a fresh
install found three that were not: the one-site plan's cost per GPU-hour, an uncertainty line no command printed,
and a memory figure whose flags the README did not give).

Each case: a command (given verbatim in the README's prose or an sh block, or a variant its prose describes: a batch of
768, ``--vpp 1``, ``--json``), and pairs (as the README writes the figure, as the command prints it); both must hold,
so a change of output fails here until the README follows.
"""

import re
import shlex

import pytest

from conftest import ROOT, run_cli

README = (ROOT / "README.md").read_text()
FLAT = re.sub(r"\s+", " ", README)  # prose wraps anywhere
COMMANDS = re.sub(r"\s+", " ", README.replace("\\\n", " ").replace("`", " "))  # sh lines continued, prose's quotes

BY_SIZE = ("topo train two-site-h100 --set 'sites[1].set=[\"cluster.num_units=2\"]' --model llama3-8b --tp 8 "
           "--global-batch 512")
HYBRID = ("topo train dgx-h100-superpod --model nemotron-3-nano-30b-a3b --gpus 1024 --pp 4 --cp 2 --ep 16 "
          "--global-batch 1024")
CASES = [
    # walk20: DeepSeek-V3's published layout and token count (arXiv 2412.19437: 2,048 GPUs, PP16 DualPipe, EP64,
    # 14.8T tokens; its table 1: 2.664M H800 GPU-hours for pre-training; sec. 3.3.2's recompute, sec. 3.3.3's BF16
    # AdamW moments: 8 bytes of optimizer state a parameter) with --tokens
    ("topo train dgx-h100-superpod --set cluster.num_units=8 --model deepseek-v3-671b --gpus 2048 --pp 16 --dp 128 "
     "--ep 64 --etp 1 --global-batch 15360 --precision fp8 --pipeline-schedule dualpipe --overlap ep=on "
     "--recompute selective --recompute-modules layernorm,mla_up_proj,moe_act --layout optimizer_bytes_per_param=8 "
     "--tokens 14.8e12",
     [("gives 65.3 days, 3.21M GPU-hours", "tokens: 65.3 days, 3.21M GPU-hours on 2,048 GPUs"),
      ("without them the layout does not fit", "GB of 85.5 GB: fits")]),
    ("topo plan two-site-h100 --no-collectives --one-site",
     [("$1.714 per GPU-hour against the two sites' $1.700", "$1.714 per GPU-hour (the region: $1.700)"),
      ("the DCI's share of the cost per GPU-hour (3.2% on `two-site-h100`)", "3.2% of the region's $1.700")]),
    # walk38: the region's job plan (the README said 2.617 s where the plan prints 2.6175 s as 2.618 s)
    ("topo plan two-site-h100 --model llama3-70b --layout tp=8,pp=4,global_batch=576 --tokens 15T --no-collectives",
     [("step 2.808 s across the sites, goodput 75.2%", "data parallel: step 2.808 s,"),
      ("goodput 75.2%", "goodput   75.2%"), ("137.3 days (103.3 at", "137.3 days with goodput 75.2% (103.3 days at"),
      ("$1.048 per million tokens", "$1.048 per million tokens")]),
    ("topo estimate two-site-h100 --size 1GiB -a hierarchical_pipelined", [("(19 chunks)", "(19 chunks)")]),
    ("topo estimate two-site-h100 --size 1GiB --json",  # the README's line without --json prints the fastest
     [("hierarchical 23.6 ms, pipelined 20.2 ms (19 chunks), tree 16.5 ms, flat ring 30.7 s", '"hierarchical": [\n      0.0236'),
      ("pipelined 20.2 ms", '"hierarchical_pipelined": [\n      0.0201'),
      ("tree 16.5 ms", '"tree": [\n      0.0165'), ("flat ring 30.7 s", '"ring": [\n      30.7')]),
    ("topo estimate gb200-nvl72-superpod --set cluster.num_units=448 --size 1GiB",  # tidy11: what bounds NVLSTree
     [("it is 71.3% x 77.8% x 50.0% x 92.9%", "# util 26% at 1 GiB = 71.3% of gpu0->nvswitch0's line rate"),
      ("77.8% x", "x 77.8% carried by nvls_tree Simple"), ("50.0% x", "x 50.0% steady (all 1 GiB go at half speed"),
      ("92.9%, the whole", "x 92.9% of the time in the bandwidth part")]),
    ("topo train two-site-h100 --model nemotron4-340b --tp 8 --pp 8 --vpp 12 --global-batch 2304 --outer-every 50",
     [("gives 94.4% with `dp`", "        94.4%"), ("1.80 TB/s per direction keeps 95%", " 1.804 TB/s")]),
    # walk16: the README said 80.2% at 4 waves where the study's point (this step at 1,000 km) gives 80.0%
    ("topo train two-site-h100 --model nemotron4-340b --tp 8 --pp 8 --vpp 12 --global-batch 2304 "
     "--set interconnect.waves=4", [("(81.0% at 4 waves", "        81.0%")]),
    ("topo train two-site-h100 --model nemotron4-340b --tp 8 --pp 8 --vpp 12 --global-batch 2304 "
     "--set interconnect.waves=64", [("98.5% at 64, at 1,000 km", "        98.5%")]),
    ("topo train two-site-h100 --model nemotron4-340b --tp 8 --pp 8 --vpp 12 --global-batch 768",
     [("with a batch of 768 it would be 85.4%", "        85.4%")]),
    # share72: a region's replicas by its sites' size (regshare71), and the equal split the README gives beside it
    (BY_SIZE,
     [("by size: east dp 192, west dp 64, 411.4 ms (90.3%)", "(east dp 192, west dp 64)"),
      ("411.4 ms (90.3%)", "411.4 ms        90.3%"), ("by size: east dp 192", "all 2,048 GPUs of the region run it")]),
    (BY_SIZE + " --shares equal",
     [("--shares equal: dp 64 a site, 1,024 GPUs idle, 692.8 ms", "692.8 ms"),
      ("1,024 GPUs idle", "1,024 of the region's 2,048 GPUs run no part of it")]),
    ("topo train dgx-h100-superpod --model llama3-8b --gpus 1024 --tp 8 --pp 2 --dp 64 --global-batch 256",
     [("(a step of 456 ms)", "step time   456.7 ms"),
      ('"uncertainty 403.8 ms - 525.5 ms: on 20 published Hopper runs of dense BF16 models whose family the fit '
       'never saw, half were within 3%', "uncertainty 403.8 ms - 525.5 ms: on 20 published Hopper runs of dense BF16 "
       "models whose family the fit never saw, half were within 3%")]),
    # walk41: the README quoted a span of 7 hybrid runs (1 family, 8-16 GPUs) where the command prints 11 (3 families)
    (HYBRID,
     [("interval from 11 hybrid Mamba-2 / attention runs (3 families (nemotron-3-nano, nemotron-3-super, "
       "nemotron-3-ultra); ...; 8-256 GPUs; pp up to 2; no context parallelism; ...); this job is outside them: "
       "1,024 GPUs, pp 4, cp 2",
       "interval from 11 hybrid Mamba-2 / attention runs (3 families (nemotron-3-nano, nemotron-3-super, "
       "nemotron-3-ultra); "),
      ("8-256 GPUs; pp up to 2; no context parallelism;", "8-256 GPUs; pp up to 2; no context parallelism;"),
      ("this job is outside them: 1,024 GPUs, pp 4, cp 2", "this job is outside them: 1,024 GPUs, pp 4, cp 2\n")]),
    ("topo train meta-llama3-24k --model llama3-405b --gpus 8192 --tp 8 --pp 16 --dp 64 --vpp 8 --seq 8192 "
     "--global-batch 2048 --dp-sharding fsdp_grad_op --pipeline-embedding",
     [("needs 84.1 GB of the 85.5 GB an H100 holds", "total 84.1 GB of 85.5 GB: fits")]),
    ("topo train meta-llama3-24k --model llama3-405b --gpus 8192 --tp 8 --pp 16 --dp 64 --vpp 4 --seq 8192 "
     "--global-batch 2048 --dp-sharding fsdp_grad_op --pipeline-embedding",
     [("(`--vpp 4`) it would hold 77 of them, 154 layers' worth, and need 91.0 GB",
       "total 91.0 GB of 85.5 GB: DOES NOT FIT by 5.5 GB")]),
    ("topo train meta-llama3-24k --model llama3-405b --gpus 8192 --tp 8 --pp 16 --dp 64 --vpp 1 --seq 8192 "
     "--global-batch 2048 --dp-sharding fsdp_grad_op --pipeline-embedding",
     [("with plain 1F1B (`--vpp 1`) the same layout needs 72.9 GB", "total 72.9 GB of 85.5 GB: fits")]),
    ("topo train meta-llama3-24k --model llama3-405b --gpus 16384 --tp 8 --pp 16 --dp 128 --vpp 8 --seq 8192 "
     "--global-batch 2048 --dp-sharding fsdp_grad_op --pipeline-embedding --tokens 15.6e12",
     [("76.8 GB, it fits", "total 76.8 GB of 85.5 GB: fits")]),
    # walk14: the README quoted "(3% of the model)" where compare printed 4% (the log the README names)
    ("topo compare tests/data/nccl_logs/nccl1453_h100_allreduce_tagged.txt --gpu H100",
     [("this run reaches 2% of what its hardware allows at sizes >= 64 MiB",
       "this run reaches 2% of what its hardware allows at sizes >= 64 MiB"),
      ("the gap is at 1 MiB-512 MiB (4% of the model), where latency dominates in the model at 1 MiB-4 MiB and "
       "bandwidth at 8 MiB-512 MiB",
       "the gap is at 1 MiB-512 MiB (4% of the model), where latency dominates in the model at 1 MiB-4 MiB and "
       "bandwidth at 8 MiB-512 MiB")]),
]


# tidy74 (walk31 Left 4): the tour's line on fabric.grow_tiers; the same spec without it is refused (tests/test_tidy74.py)
GROW = "topo describe dgx-h100-superpod --set cluster.num_units=256 --set fabric.grow_tiers=true"
CASES.append((GROW, [("builds 3 tiers where the 2-tier spec is refused", "3 tiers;")]))

GIVEN = ("topo plan two-site-h100 --no-collectives --one-site",
         "topo estimate gb200-nvl72-superpod --set cluster.num_units=448 --size 1GiB",
         "topo train two-site-h100 --model nemotron4-340b --tp 8 --pp 8 --vpp 12 --global-batch 2304 --outer-every 50",
         "topo train dgx-h100-superpod --model llama3-8b --gpus 1024 --tp 8 --pp 2 --dp 64 --global-batch 256",
         "topo train meta-llama3-24k --model llama3-405b --gpus 8192 --tp 8 --pp 16 --dp 64 --vpp 8 --seq 8192 "
         "--global-batch 2048 --dp-sharding fsdp_grad_op --pipeline-embedding",
         "topo train meta-llama3-24k --model llama3-405b --gpus 16384 --tp 8 --pp 16 --dp 128 --vpp 8 --seq 8192 "
         "--global-batch 2048 --dp-sharding fsdp_grad_op --pipeline-embedding --tokens 15.6e12",
         CASES[0][0], BY_SIZE, GROW, HYBRID)


def test_the_commands_behind_the_figures_are_in_the_readme():
    for cmd in GIVEN:
        assert cmd in COMMANDS, f"the README does not give: {cmd}"


@pytest.mark.parametrize("cmd,pairs", CASES, ids=[c[0][5:60] for c in CASES])
def test_a_figure_the_readme_quotes_is_what_its_command_prints(cmd, pairs):
    out = run_cli(*shlex.split(cmd)[1:], check=True).stdout
    for in_readme, in_output in pairs:
        assert in_readme in FLAT, f"README no longer says {in_readme!r}"
        assert in_output in out, f"{cmd}: prints no {in_output!r}; the README's {in_readme!r} is stale"
