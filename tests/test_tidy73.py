"""tidy73: the reviews' leftovers (issue 29), each rule in one place."""

import copy
import dataclasses
import json
import tomllib

import numpy as np
import pytest

from topo.cli.main import main
from topo.engine.estimate import estimate
from topo.engine.options import EstimateOptions
from topo.engine.placement import Placement
from topo.engine.schedule import NodeShape
from topo.fabric.builders import build_fabric
from topo.errors import TopoError
from small_regions import loss_crossing_s
from topo.fabric.region import build_region
from topo.plan import plan
from topo.plan.train_time import job_layer
from topo.resources import data_dir
from topo.spec import load_spec
from topo.training import ep_dispatch, ep_internode
from topo.training.ep_internode import internode_table
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout
from topo.training.step import estimate_step, left_out_notes


@pytest.fixture(scope="module")
def llama_step():
    """Llama 3 8B at tp 8, dp 128 on the bundled DGX H100 SuperPOD (the README's plan --model job), contention off."""
    fabric = build_fabric(load_spec("dgx-h100-superpod"))
    return estimate_step(fabric, load_model("llama3-8b"), make_layout(tp=8, dp=128, global_batch=256),
                         contention=False)


def test_plan_and_train_intervals_are_one_formula(llama_step):
    """rev72 Left (section 326): plan's interval (PlanResult.time_to_train) and train's (StepResult.train_budget) were
    two expressions of one formula. Both now call train_time.time_to_train_interval_s: at goodput 1 they are equal to
    the bit, and at the plan's goodput the plan's ends are train's over the goodput, to the bit (at_step / goodput)."""
    step = llama_step
    assert "low_s" in step.uncertainty and step.uncertainty["low_s"] < step.uncertainty["high_s"]
    train = step.train_budget(1e12)["time_to_train_interval_s"]
    _, job = job_layer("llama3-8b", step, "bf16", 8e9, tokens=1e12)
    r = plan("dgx-h100-superpod", collectives=False, training=job)
    g = r.reliability.goodput
    assert 0 < g < 1
    assert r.time_to_train["time_to_train_interval_s"] == [x / g for x in train]
    one = dataclasses.replace(r, reliability=dataclasses.replace(r.reliability, goodput=1.0))
    assert one.time_to_train["time_to_train_interval_s"] == train
    # the closed form: tokens x step_end / tokens_per_step (256 sequences of 8,192 tokens a step)
    assert train == pytest.approx([1e12 * step.uncertainty[k] / (256 * 8192) for k in ("low_s", "high_s")],
                                  rel=1e-12)


# ---- 3. every communicator of a placement, not the first ------------------------------------------------------

def test_a_placements_domains_are_every_groups():
    """rev71 Left (section 321): Placement.domains / num_domains read the first group alone. Groups of 3 on 8-GPU
    domains, GPUs 0-2 and 6-8: the second spans domains 0 and 1, so a communicator spans 2, in either group order."""
    for rows in ([[0, 1, 2], [6, 7, 8]], [[6, 7, 8], [0, 1, 2]]):
        pl = Placement(groups=np.array(rows), kind="list", gpus_per_domain=8)
        assert pl.num_domains == 2
        assert pl.domains.tolist() == [[r // 8 for r in row] for row in rows]
    assert Placement(groups=np.array([[0, 1, 2], [3, 4, 5]]), kind="list", gpus_per_domain=8).num_domains == 1


@pytest.fixture(scope="module")
def nvl72():
    return build_fabric(load_spec("gb200-nvl72-superpod"))  # 4-GPU trays in a 72-GPU NVLink domain


def _all_reduce_s(fabric, ranks):
    opts = EstimateOptions(ranks=ranks, groups=2, group_layout="blocked", rank_order="given")
    return estimate(fabric, "all_reduce", [8192], opts).results[0].time_s


def test_any_group_across_trays_takes_the_mnnvl_hop(nvl72):
    """rev71 Left: estimate's multi-node NVLink flag read groups[0] alone. Two groups of 3 on GB200's 4-GPU trays,
    GPUs 0-2 (tray 0) and 3-5 (trays 0 and 1): the second crosses trays, so the pair takes the MNNVL terms
    (blackwell.toml's mnnvl_*_us) whichever group is listed first, and costs more than 0-2 with 4-6 (tray 1 alone)."""
    assert NodeShape.of(nvl72).spans_servers([[0, 1, 2], [3, 4, 5]])
    assert not NodeShape.of(nvl72).spans_servers([[0, 1, 2], [4, 5, 6]])
    first, second = _all_reduce_s(nvl72, [0, 1, 2, 3, 4, 5]), _all_reduce_s(nvl72, [3, 4, 5, 0, 1, 2])
    assert first == second
    assert first > _all_reduce_s(nvl72, [0, 1, 2, 4, 5, 6])


# ---- 4. the NICs of each site's share, in site order --------------------------------------------------------------

UNLIKE = (("east", ["cluster.num_units=1"]),  # 256 GPUs, one 400 Gb/s ConnectX-7 a GPU (DGX H100)
          ("west", ["cluster.num_units=2", "server.nic_rate=100 Gb/s", "fabric.tiers[0].port_rate=100 Gb/s",
                    "fabric.tiers[1].port_rate=100 Gb/s"]))  # 512 GPUs at 100 Gb/s a NIC


def test_each_sites_share_crosses_through_its_own_nics_in_site_order(tmp_path):
    """rev71 Left (section 321): multisite's nic_gpus was read from the site_gpus dict's order. By size, dp 3 of tp 8
    splits 1 : 2 (east 8 GPUs, west 16); the hierarchical reduction's crossing goes through each share's own NICs,
    so west's 16 NICs of 12.5 GB/s bind: V / (16 x 12.5 GB/s) (east's 8 x 50 GB/s is faster; the sites swapped
    would give V / (8 x 12.5 GB/s)). The hierarchical form is set: since regions82 auto compares the job's steps and
    takes the flat ring here (the test is about the hierarchical crossing's NICs)."""
    sites = "".join(f'[[sites]]\nname = "{n}"\nspec = "dgx-h100-superpod"\nset = {json.dumps(s)}\n' for n, s in UNLIKE)
    path = tmp_path / "unlike.toml"
    path.write_text(f'name = "unlike"\ndescription = "two unlike sites"\n{sites}[interconnect]\ntopology = "mesh"\n'
                    'distance_km = 40\nlatency_per_km = "4.9 us"\nequipment_latency = "50 us"\nwaves = 16\n'
                    'wave_rate = "800 Gb/s"\nattach = "top"\n[nccl]\ndp_reduction = "hierarchical"\n')
    region = build_region(str(path))
    job = estimate_across_sites(region, load_model("llama3-8b"),
                                make_layout(tp=8, dp=3, global_batch=6, seq_len=4096), shares="by-size")
    assert job.site_gpus == {"east": 8, "west": 16}
    s = job.strategies[0]
    assert s.bottleneck == "nic"
    loss = loss_crossing_s(region, job)  # regions76: the logged loss's all-reduce, in the DCI time
    assert s.dci_time_s == pytest.approx(s.latency_s + s.dci_bytes_per_step / (16 * 12.5e9) + loss, rel=1e-12)


# ---- 5. a dispatcher table missing a key ------------------------------------------------------------------------

def _edited(monkeypatch, module, loader, edit):
    data = copy.deepcopy(getattr(module, loader)())
    edit(data)
    monkeypatch.setattr(module, loader, lambda: data)


def test_train_says_a_dispatcher_tables_missing_key_in_one_line(monkeypatch, capsys):
    """tidy71 Left (a), section 320: a table stating api_includes_copy = true without its published shape (tokens,
    hidden, topk) ended `topo train` in a KeyError. Now exit 2 and one line naming the file, the key and what is
    allowed (tidy71's run: Qwen3 30B-A3B, EP 8 on a GB200 NVL72 rack, which reads [flex.GB200])."""
    _edited(monkeypatch, ep_dispatch, "_tables", lambda d: d["flex"]["GB200"].pop("tokens"))
    rc = main(["train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "256",
               "--dp", "8", "--ep", "8", "--layout", "ep_dispatcher=deepep"])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("error: ep_dispatch.toml: flex.GB200.tokens: is missing: allowed a table that states "
                               "tokens, hidden, topk, local_experts (the shape of the call its rates were published "
                               "at)\n")  # route79: the routing its bytes are counted from needs the local experts


def test_the_internode_table_says_its_missing_key(monkeypatch):
    _edited(monkeypatch, ep_internode, "_data", lambda d: d["internode"]["H100"].pop("gpus_per_node"))
    with pytest.raises(TopoError, match=r"^ep_internode.toml: internode.H100.gpus_per_node: is missing: allowed a "
                                        r"table that states ranks, tokens, hidden, topk, gpus_per_node \("):
        internode_table("H100", 16)


# ---- 6. a `not modelled:` note quotes the measured size of what it misses ------------------------------------------

def test_the_not_modelled_notes_quote_the_findings_figures():
    """tidy72 Left (b), section 323: the notes named no figure. Each now ends with left_out.toml's measured size and
    its section: section 231's 1.95-2.44 ms a MoE layer and micro-batch (Blackwell Qwen3-30B-A3B), sections 301 and
    438's 9-25 ms a sequence (Nemotron 3 Nano after the SSD's measured backward: 16 / 25 H100, 18 / 20 GB200, 9 / 17
    B300), sections 293, 438 and 442's 22-29% (Nemotron-H 56B's Blackwell mixer at state 256)."""
    table = tomllib.loads((data_dir("compute") / "left_out.toml").read_text(encoding="utf-8"))
    eager = make_layout(tp=1, ep=8, dp=8, global_batch=64)
    [moe] = left_out_notes(load_model("qwen3-30b-a3b"), eager, "hopper")
    [mamba] = left_out_notes(load_model("nemotron-h-56b"), make_layout(tp=8, dp=1, global_batch=8), "blackwell")
    for note, kind, figures in ((moe, "eager_moe_host", ("1.95-2.44 ms a MoE layer", "9-25 ms a sequence",
                                                         "section 231", "section 301", "section 438")),
                                (mamba, "blackwell_mamba", ("22-29% longer", "state 64", "section 293", "section 442"))):
        assert note.endswith(table[kind]["measured"]), note
        assert all(f in note for f in figures), note
        assert all(f"section {n}" in note for n in table[kind]["sections"])
