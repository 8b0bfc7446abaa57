"""walk30's fixes (an MoE research team with its own 200B-A20B model file choosing between 2,048 H100 and 1,152
B200 / GB200): a search's first-row line that named the model inside the file, not the file; concurrent rings split
unlike over NVL72 racks ordered by the first ring's split, so every channel of the others left by one NIC."""

import json
import shlex

import numpy as np

import topo
from conftest import ROOT, run_cli
from topo.engine.algorithms.ring import channels_for, ring_orders
from topo.engine.placement import place
from topo.engine.schedule import NodeShape

LAB = ("dgx-h100-superpod", "--set", "cluster.num_units=1")


def _own_model(tmp_path):
    """Llama 3 8B's bundled file under another file name and model name, as a team writes its own."""
    text = (ROOT / "topo" / "data" / "models" / "llama3-8b.toml").read_text()
    path = tmp_path / "our-model.toml"
    path.write_text(text.replace('name = "llama3-8b"', 'name = "ours-8b"'))
    return str(path)


def test_a_searchs_breakdown_line_names_the_model_file_it_was_given(tmp_path):
    """walk30: `topo train ... --model moe200.toml --search` printed "#1's breakdown: topo train ... --model
    moe200 ...", the name inside the file, which is neither a file nor a bundled model, so the line run as printed
    was "error: moe200: model: no such model file or bundled model". It now repeats --model as given; run as
    printed it gives the row's step."""
    model = _own_model(tmp_path)
    out = run_cli("train", *LAB, "--gpus", "16", "--model", model, "--global-batch", "32", "--seq", "2048",
                  "--search", "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    line = next(line for line in out.splitlines() if line.startswith("#1's breakdown: topo train "))
    flags = shlex.split(line.removeprefix("#1's breakdown: topo train "))
    assert flags[flags.index("--model") + 1] == model
    again = run_cli("train", *flags, check=True).stdout
    assert again.splitlines()[0].startswith("ours-8b on dgx-h100-superpod")
    step = again.splitlines()[1].split()[2:4]  # "step time   304.0 ms ..."
    assert " ".join(step) in row


def test_concurrent_rings_that_split_unlike_over_racks_each_leave_by_their_own_nics():
    """walk30: a 200B MoE at tp 1 pp 9 dp 128 on 16 GB200 NVL72 racks (1,152 GPUs) ran its nine DP rings at once,
    and the second ring (GPUs 128-255: 16 + 72 + 40 of three racks) was ordered by the first one's runs (72 + 56):
    every channel crossed racks through the same pair of NICs, so one 400G NIC carried the whole reduce-scatter and
    the DP phase took 1.03 s of the step (a 464 MiB reduce-scatter: 1.20 ms for one ring alone, 11.4 ms beside
    the others). Each ring now rotates its own racks' runs, so its channels leave through different NICs. Two
    96-rank rings on three 72-GPU racks (72 + 24, 48 + 48): every channel of each crosses racks twice (a ring over
    two racks), no two channels of a ring through the same GPU pair, and the pair of rings takes no longer than
    one ring alone plus a margin (they share rack 1's NVLink switches)."""
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", overrides=["cluster.num_units=3"]))
    shape = NodeShape.of(fabric)
    groups = place(fabric, 192, groups=2, group_layout="blocked").groups
    C = channels_for(shape, groups)
    orders = ring_orders(shape, groups, C)
    for g in range(2):
        crossings = set()
        for c in range(C):
            ring = orders[c, g]
            assert sorted(ring.tolist()) == sorted(groups[g].tolist())
            cross = [(int(a), int(b)) for a, b in zip(ring, np.roll(ring, -1)) if a // 72 != b // 72]
            assert len(cross) == 2, (g, c, cross)
            crossings.update(cross)
        assert len(crossings) == 2 * C, g  # every channel leaves and enters by its own GPUs' NICs
    both, one = (run_cli("estimate", "gb200-nvl72-superpod", "--set", "cluster.num_units=3", "-c", "reduce_scatter",
                         *g, "--size", "464MiB", "--json", check=True).stdout for g in
                 (("-g", "192", "--groups", "2", "--group-layout", "blocked"), ("-g", "96")))
    t_both, t_one = (json.loads(x)["results"][0]["time_s"] for x in (both, one))
    assert t_both < 1.5 * t_one, (t_both, t_one)
