"""walk26's fixes (a capacity planner comparing three 50 MW bids): an HGX B200 floor placed as a rack-scale
system's, a search row rerun without the dispatcher it was ranked with, a token count written as 15T."""

from conftest import run_cli, spec_dict, tier
from topo.plan import plan
from topo.spec import spec_from_dict


def _hgx_b200_units_of_64(units: int = 2) -> dict:
    """HGX B200 with 8 x 400G under SN5600 (128 x 400G) leaves: scalable units of 64 servers (walk26's bid B)."""
    return spec_dict(name="b200-units-of-64", gpu="B200", server={"nics": 8, "nic_rate": "400 Gb/s",
                                                                   "nic_model": "ConnectX-7"},
                     cluster={"num_units": units},
                     fabric={"kind": "rail_optimized", "technology": "roce", "servers_per_unit": 64,
                             "tiers": [tier("leaf", 128, "400 Gb/s", oversubscription=1, model="SN5600"),
                                       tier("spine", 128, "400 Gb/s", model="SN5600")]})


def test_hgx_b200_units_take_whole_racks_of_their_own():
    """walk26: an HGX B200 of 14.3 kW fits 3 to the default 45 kW rack (the planner's fitted count), and that
    count reached the floor as a rack-scale system's own (an NVL72 tray's 18 per rack), so units of 64 servers
    shared racks across units and pods (128 servers in ceil(128 / 3) = 43 racks) with a note that "a rack-scale
    system's rack holds one NVLink domain" and that the hall was planned for "racks' switch trays": an HGX server
    is its own 8-GPU NVLink domain and its rack has no switch trays. Units of a server that is not rack-scale take
    whole racks of their own, the last one part full (topo/plan/floor.py, _unit_rack_starts): ceil(64 / 3) = 22
    racks a unit, 44 for two."""
    r = plan(spec_from_dict(_hgx_b200_units_of_64()), collectives=False)
    assert r.floor.servers_per_rack == 3
    assert r.floor.server_racks == 2 * 22
    assert not any("share racks" in n or "switch trays" in n for n in r.floor.notes)
    assert any("3 HGX B200 servers of 14,300 W per rack" in n for n in r.notes)  # the fitted count is still said


def test_a_search_names_the_flags_that_step_its_first_row_again():
    """walk26: DeepSeek-V3's search on 32,768 H200 ranked tp 2 pp 2 vpp 4 ep 64 fsdp_grad_op with the flex
    dispatcher (deepep/hybridep) first at 2.716 s, and said "topo train with a row's sizes shows its breakdown";
    those sizes without the dispatcher (the alltoall default) and the sharding (zero1) stepped in 3.630 s. The
    search now prints #1's flags, the chosen dispatcher as --layout among them; run as printed, they give the row's
    step (Qwen3-30B-A3B on 64 H100, where the flex dispatcher also wins)."""
    spec = ("dgx-h100-superpod", "--set", "cluster.num_units=1")
    out = run_cli("train", *spec, "--gpus", "64", "--model", "qwen3-30b-a3b", "--global-batch", "64", "--search",
                  "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    flags = next(line for line in out.splitlines() if line.startswith("#1's breakdown: topo train "))
    flags = flags.removeprefix("#1's breakdown: topo train ").split()  # the spec and --set first (walk28)
    assert "deepep/hybridep" in row and "--layout" in flags and "--dp-sharding" in flags
    again = run_cli("train", *flags, check=True).stdout
    step = again.splitlines()[1].split()[2:4]  # "step time   441.1 ms ..."
    assert " ".join(step) in row


def test_tokens_take_a_decimal_suffix():
    """walk26: `topo train ... --tokens 15T` (a token budget as model cards write it: Llama 3's 15T, arXiv
    2407.21783) failed with argparse's "invalid float value: '15T'"; it now reads 15e12 tokens, the same line as
    15e12 gives, and a suffix it does not know is one error line naming --tokens and the forms allowed."""
    args = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--dp", "8",
            "--global-batch", "8")

    def line(tokens):
        out = run_cli(*args, "--tokens", tokens, check=True).stdout
        return next(x for x in out.splitlines() if x.startswith("time to train"))

    assert line("15T") == line("15e12") and line("15T").startswith("time to train 15T tokens:")
    assert line("2.5B").startswith("time to train 2.5B tokens:")
    bad = run_cli(*args, "--tokens", "15X")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == ("error: --tokens: expected a count such as 15e12, 15T, 2.5B, 400M or 10K "
                                  "(decimal: K 1e3, M 1e6, B or G 1e9, T 1e12), got '15X'")


def test_a_region_search_names_its_first_rows_flags_for_the_whole_job():
    """walk26: a region's search said "train the layout" without the flags; its #1 (a site's share ranked again
    across the sites) is now printed as the whole job's flags, dp the job's (dp x sites, as the table's "dp (job)"
    column and `topo train REGION --dp` count it) with the chosen dispatcher; run as printed they give the row's
    step across the sites."""
    base = ("train", "three-site-chain", "--model", "qwen3-30b-a3b", "--global-batch", "288")
    out = run_cli(*base, "--search", "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    flags = next(line for line in out.splitlines() if line.startswith("#1 across sites: topo train three-site-chain "))
    flags = flags.split(" --global-batch 288 ")[1].split()
    assert flags[flags.index("--dp") + 1] == row.split()[5]  # the job's dp
    again = run_cli(*base, *flags, check=True).stdout
    dp_row = next(line for line in again.splitlines() if line.startswith("dp "))
    assert " ".join(dp_row.split()[1:3]) in row  # the step across sites, "499.9 ms"
