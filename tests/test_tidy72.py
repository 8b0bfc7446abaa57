"""tidy72: this session's small leftovers, each one rule in one place (findings section "tidy72")."""

from pathlib import Path

import pytest

from topo.fabric.region import build_region
from topo.sweep.point import clear_cache, run_point
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

ROOT = Path(__file__).resolve().parents[1]
SMALL_WEST = ["cluster.num_units=2"]  # the README's region example: east 1,536 GPUs, west 512 (share72)


def _sweep_point(**extra):
    text = (ROOT / "topologies" / "two-site-h100.toml").read_text()
    head, west = text.split('name = "west"')
    text = head + 'name = "west"' + west.replace("cluster.num_units=6", SMALL_WEST[0])  # a sweep sets no list
    clear_cache()
    return run_point({"spec": "small-west", "model": "llama3-8b", "layout": "tp=8,dp=128", "global_batch": 512,
                      **extra}, ["train"], {"small-west": ("small-west", text)})


def test_a_sweeps_region_point_takes_shares_as_train_does():
    """share72 Left 4: a sweep's region point split by size with no way to ask for equal shares. Its ``shares`` key
    now runs the split ``topo train REGION --shares`` runs (one default, by-size), the library's figures exactly."""
    region = build_region("two-site-h100", ['sites[1].set=["%s"]' % SMALL_WEST[0]])
    lay = make_layout("job", tp=8, dp=128, global_batch=512)
    model = load_model("llama3-8b")
    for shares in ("by-size", "equal"):
        row = _sweep_point(shares=shares)
        m = estimate_across_sites(region, model, lay, shares=shares)
        assert row["error"] is None, row
        assert row["step_time_s"] == pytest.approx(m.one_site_step_s / m.throughput_vs_one_site, rel=1e-12)
        assert row["shares"] == shares and tuple(m.site_dp.values()) == ((96, 32) if shares == "by-size" else (64, 64))
    assert _sweep_point()["shares"] == "by-size"  # the default, as topo train's
    bad = _sweep_point(shares="half")
    assert bad["error_kind"] == "input" and "shares" in bad["error"] and "by-size, equal" in bad["error"]


def test_a_sweeps_shares_axis_is_checked_before_the_sweep(tmp_path):
    """A bad ``shares`` value is one line naming the axis before any point runs (the one check, check_shares)."""
    from topo.errors import TopoError
    from topo.sweep import study_from_dict
    study = {"name": "t", "specs": ["two-site-h100"], "compute": ["train"],
             "axes": {"model": ["llama3-8b"], "layout": ["tp=8,dp=384"], "shares": ["equal", "half"]}}
    with pytest.raises(TopoError) as got:
        study_from_dict(study, source="t.toml", folder=tmp_path)
    assert got.value.key == "axes.shares" and "'half'" in got.value.message
    assert "allowed: by-size, equal" in got.value.message


@pytest.fixture(scope="module")
def nvl_region(tmp_path_factory):
    """Two GB200 NVL72 sites, east 16 racks and west 8 (tests/test_tidy70.py's)."""
    from small_regions import region_file, two_sites
    return region_file(tmp_path_factory, two_sites("tidy72", "two NVL72 sites", "gb200-nvl72-superpod", 16, 8),
                       "tidy72")


def test_a_dp_larger_than_the_sites_hold_past_a_skip_names_the_short_site(nvl_region):
    """skip72 Left 1: `--skip-domains 3 --dp 50` was refused "--dp: the job needs GPUs 0 to 1,159, but the fabric
    has 1,152", the placement's line without the site. The sites hold 15 x 72 = 1,080 (east) and 7 x 72 = 504
    (west) GPUs past rack 3, 33 + 15 replicas of tp 8 x pp 4 = 32; dp 50 by size (1,080 : 504, largest remainder)
    gives east 34 replicas = 1,088 GPUs, which from GPU 0 past rack 3 reach GPU 1,088 + 72 - 1 = 1,159. The line now
    names east, its share and the replicas its placement holds, the placement's words after it, by --dp still."""
    from conftest import run_cli
    p = run_cli("train", nvl_region, "--model", "llama3-8b", "--tp", "8", "--pp", "4", "--fail", "east:nvswitch3",
                "--skip-domains", "3", "--dp", "50", "--global-batch", "100")
    assert p.returncode == 2 and p.stderr.startswith(
        "error: --dp: site east: its share of the job (34 replicas; its placement holds 33) needs GPUs 0 to 1,159, "
        "but the fabric has 1,152; grow the spec's [cluster]"), p.stderr


def test_plan_tokens_gives_the_interval_train_tokens_gives_over_the_goodput():
    """walk30 Left 2: `plan --tokens` gave the days at the step and with the goodput, no interval, where `train
    --tokens` gives the days at the step's out-of-family interval's ends (step_uncertainty.toml). The plan's are
    now train's ends over the plan's goodput: t = tokens x step_end / tokens_per_step / goodput, one rule."""
    import json
    from conftest import run_cli
    args = ("dgx-h100-superpod", "--model", "llama3-8b", "--layout", "tp=8,global_batch=256")
    d = json.loads(run_cli("plan", *args, "--tokens", "1T", "--no-collectives", "--json", check=True).stdout)
    t = json.loads(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "256",
                           "--tokens", "1T", "--json", check=True).stdout)
    ends = d["time_to_train"]["time_to_train_interval_s"]
    assert ends == pytest.approx([x / d["goodput"] for x in t["time_to_train_interval_s"]], rel=1e-9)
    low, high = t["uncertainty"]["low_s"], t["uncertainty"]["high_s"]
    tokens_per_step = 256 * 8192  # Llama 3 8B's 8,192-token sequences
    assert ends == pytest.approx([1e12 * s / tokens_per_step / d["goodput"] for s in (low, high)], rel=1e-9)
    text = run_cli("plan", *args, "--tokens", "1T", "--no-collectives", check=True).stdout
    days = [f"{x / 86400:,.1f} days" for x in ends]  # train --tokens's words (format_in: the unit at each end)
    assert f"; {days[0]} - {days[1]} at the uncertainty's ends" in text, text


@pytest.mark.parametrize("units, leaf, spine", [(2, 16, 8), (4, 32, 16), (8, 64, 32)])
def test_the_bundled_dgx_b200_superpod_is_the_reference_architectures(units, leaf, spine):
    """walk30 Left 5: no B200 spec was bundled. dgx-b200-superpod against NVIDIA's DGX SuperPOD with DGX B200 RA
    (RA-11334-001, "DGX SuperPOD Architecture", the larger-SuperPOD table: 2 / 4 / 8 SUs of 32 DGX B200 -> 16 / 32 /
    64 leaf and 8 / 16 / 32 spine switches, one node-leaf and one leaf-spine cable a GPU) and the DGX B200 User
    Guide (8 x B200; NVLink switches of 14.4 TB/s aggregate = 8 x 1.8 TB/s bidirectional, 900 GB/s a GPU each way;
    8 single-port ConnectX-7 at 400 Gb/s; 4 OSFP cages, so 2 ports a NIC-side module)."""
    import json
    from conftest import run_cli
    from topo.plan.catalog import load_catalog
    d = json.loads(run_cli("describe", "dgx-b200-superpod", "--set", f"cluster.num_units={units}", "--json",
                           check=True).stdout)
    assert (d["gpu"], d["num_gpus"], d["num_servers"], d["gpus_per_server"]) == ("B200", 256 * units, 32 * units, 8)
    assert [(t["name"], t["num_switches"]) for t in d["tiers"]] == [("leaf", leaf), ("spine", spine)]
    assert d["num_scale_out_links"] == 2 * 256 * units  # node-leaf + leaf-spine cables, the RA's columns
    assert d["nics_per_server"] == 8 and d["nic_rate_Bps"] == 400e9 / 8
    assert d["scale_up"]["bandwidth_per_gpu_Bps"] == 14.4e12 / 8 / 2
    assert d["largest_nonblocking_gpus"] == d["num_gpus"]  # non-blocking, rail-optimized
    server = load_catalog().servers["DGX B200"]
    assert (server.gpus.value, server.nic_module_ports.value, server.max_power_W.value) == (8, 2, 14300)


def test_train_names_what_the_model_leaves_out_for_an_eager_moe_or_a_blackwell_mamba():
    """walk30 Left 1: `topo train` named nothing the model leaves out for an MoE or hybrid of one's own (the README's
    closing paragraphs did). An eager grouped-expert MoE block's host work is priced at the counted launches and
    calls (findings sections 305, 313: a floor); no published Mamba-2 SSD rate exists on Blackwell (section 293).
    Each is one `not modelled:` note where it applies, in the step's notes (text and --json), nowhere else."""
    import json
    from conftest import run_cli
    from topo.training.step import left_out_notes
    moe, hybrid, dense = (load_model(n) for n in ("qwen3-30b-a3b", "nemotron-h-56b", "llama3-8b"))
    eager = make_layout("job", tp=1, ep=8, dp=8, global_batch=64)
    [note] = left_out_notes(moe, eager, "hopper")
    assert note.startswith("not modelled: an eager MoE block's host work")
    graphed = eager.model_copy(update={"cuda_graph_scope": ("full_iteration",)})
    assert left_out_notes(moe, graphed, "hopper") == []  # the host launches nothing a graph holds
    assert left_out_notes(dense, make_layout("job", tp=8, dp=1, global_batch=8), "blackwell") == []
    lay = make_layout("job", tp=8, dp=1, global_batch=8)
    assert left_out_notes(hybrid, lay, "hopper") == []
    [note] = left_out_notes(hybrid, lay, "blackwell")
    assert note.startswith("not modelled: a published Mamba-2 SSD kernel rate on Blackwell")
    d = json.loads(run_cli("train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--tp", "1", "--ep", "8",
                           "--global-batch", "1024", "--json", check=True).stdout)
    assert sum(n.startswith("not modelled: an eager MoE block's") for n in d["notes"]) == 1, d["notes"]
