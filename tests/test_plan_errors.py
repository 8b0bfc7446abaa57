"""Bad plan input: one line naming the file that holds the value and the key, what is wrong and what is allowed
(issue 22's list, each found on the code before it)."""

import pytest

from conftest import ROOT, run_cli
from topo import TopoError
from topo.plan import plan


def _plan_file(tmp_path, text):
    f = tmp_path / "plan.toml"
    f.write_text(text)
    return f


def _err(*args):
    p = run_cli("plan", *args, "--no-collectives")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    return p.stderr.removeprefix("error: ").rstrip("\n")


def test_a_plan_files_stages_is_blamed_on_the_plan_file(tmp_path):
    f = _plan_file(tmp_path, "[tiers.core]\nstages = 3\n")
    assert _err("h100-100k-4tier", "--plan-file", str(f)) == (
        f"{f}: plan.tiers.core.stages: must be 1 (one physical switch) or 2 (a non-blocking two-stage Clos of "
        "physical switches), got 3")


def test_a_plan_files_unknown_switch_names_the_plan_file(tmp_path):
    f = _plan_file(tmp_path, '[tiers.core]\nstages = 2\nswitch = "NOPE"\n')
    msg = _err("h100-100k-4tier", "--plan-file", str(f))
    assert msg.startswith(f"{f}: plan.tiers.core.switch: switch model 'NOPE' is not in the catalog; allowed: QM9700")


def test_a_tier_without_a_switch_model_says_it_is_missing(tmp_path):
    # walk6: a spec whose tiers name no `model` (describe takes it) planned to "switch model '' is not in the catalog"
    spec = tmp_path / "nomodel.toml"
    text = (ROOT / "topologies" / "dgx-h100-superpod.toml").read_text()
    assert text.count('model = "QM9700"') == 2
    spec.write_text(text.replace('model = "QM9700"', ""))
    msg = _err(str(spec))
    assert msg.startswith(f"{spec}: fabric.tiers[0].model: no switch model is given, and the planner prices a part "
                          "by it; give one of QM9700, "), msg
    assert msg.endswith(" (or add yours under plan.switches)") and "''" not in msg, msg


def test_a_typod_part_says_did_you_mean(tmp_path):
    f = _plan_file(tmp_path, "[switches.QM970]\nprice_usd = 25000\n")
    msg = _err("--plan-file", str(f))
    assert msg.startswith(f"{f}: plan.switches.QM970: no switch named 'QM970' in the catalog; did you mean 'QM9700'?")


@pytest.mark.parametrize("text, key, wording", [
    ("[switches.QM9700]\nports_per_cage = 0.5\n", "plan.switches.QM9700.ports_per_cage",
     "must be a whole number >= 1, got 0.5"),
    ("[facility]\npue = 1e9\n", "plan.facility.pue", "must be <= 3"),
    ("[tiers.core]\nstages = 0\n", "plan.tiers.core.stages", "must be 1 (one physical switch) or 2"),
    ("[tiers.core]\nstages = 'two'\n", "plan.tiers.core.stages", "got 'two'"),
    ("[floor]\ncopper = 'fibre'\n", "plan.floor.copper", "must be one of dac, dac_aec, none, got 'fibre'"),
    ("[layout]\nservers_per_rack = 2\n", "plan.layout", "did you mean 'floor'? (plan.layout is now plan.floor)"),
    ("server_model = 'DGX H10'\n", "plan.server_model", "did you mean 'DGX H100'?"),
    ("server_model = 'DGX A100'\n", "plan.server_model", "holds A100 GPUs, the spec's GPU is H100"),
    # review findings: a bare value where a table belongs was an internal TypeError or AttributeError ...
    ("switches = 5\n", "plan.switches", "must be a table ([plan.switches] with its keys), got 5"),
    ("gpus = 'H100'\n", "plan.gpus", "must be a table ([plan.gpus] with its keys), got 'H100'"),
    ("[tiers]\ncore = 5\n", "plan.tiers.core", "must be a table ([plan.tiers.core] with its keys), got 5"),
    ("tiers = [1]\n", "plan.tiers", "must be a table ([plan.tiers] with its keys), got [1]"),
    ("[reliability]\ncheckpoint = 5\n", "plan.reliability.checkpoint",
     "must be a table ([plan.reliability.checkpoint] with its keys), got 5"),
    # ... or asked a price range for a { value, source, status } table
    ("[price_ranges]\nranges = 5\n", "plan.price_ranges.ranges", "must be a table of ranges by price key"),
    ("[price_ranges.ranges]\n'switches.QM9700.price_usd' = 5\n", "plan.price_ranges.ranges.switches.QM9700.price_usd",
     "must be a table { low, high } (each a number or a table { value, source, status }), got 5"),
])
def test_bad_values_are_one_clear_line(tmp_path, text, key, wording):
    f = _plan_file(tmp_path, text)
    msg = _err("h100-100k-4tier", "--plan-file", str(f))
    assert msg.startswith(f"{f}: {key}: ") and wording in msg
    assert "Input should" not in msg  # never pydantic's own wording


def test_days_have_an_upper_bound_and_big_figures_their_separators():
    # review finding: --days 1e12 planned "1e+12 days ... = 279328438414.9x GPT-4"; the plan's days end where its
    # years do (economics.years <= 50, in 365-day years as power.py's HOURS_PER_YEAR)
    assert _err("--days", "1e12").startswith("--days: plan.workload.days: must be <= 18250 (50 years of 365 days")
    p = run_cli("plan", "--days", "18250")
    assert p.returncode == 0, p.stderr
    # closed form: 100,352 H100 x 1,979 TFLOP/s dense FP8 (NVIDIA H100 SXM datasheet) x MFU 0.35 x 18,250 days x
    # 86,400 s / GPT-4's 2.15e25 FLOP (planner.md line 22) = 5,097.6x, printed with its thousands separator
    line = next(ln for ln in p.stdout.splitlines() if "days at fp8" in ln)
    assert line.strip().startswith("18,250 days at fp8") and "x GPT-4" in line
    ratio_text = line.split(" = ")[1].split("x GPT-4")[0]
    assert "," in ratio_text
    assert float(ratio_text.replace(",", "")) == pytest.approx(100352 * 1979e12 * 0.35 * 18250 * 86400 / 2.15e25,
                                                                rel=0.001)


def test_pue_has_an_upper_bound_on_the_command_line():
    assert _err("--pue", "1e9").startswith("--pue: plan.facility.pue: must be <= 3")


def test_no_failures_at_all_is_an_error_not_a_100_percent_goodput(tmp_path):
    # issue 32: every cause at 0 gave "0.0 interruptions/day (none expected)" and 100% goodput, silently
    f = _plan_file(tmp_path, "[reliability.causes]\ngpu = 0\nnetwork = 0\nnic = 0\nhost = 0\nsoftware = 0\n")
    p = run_cli("plan", "dgx-h100-superpod", "--plan-file", str(f), "--no-collectives")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    line = p.stderr.strip()
    assert line.startswith("error: ") and len(line.splitlines()) == 1
    assert "plan.reliability.causes: every failure rate is 0" in line and "give at least one cause" in line


def test_links_beyond_every_transceiver_blame_the_floor_the_user_changed():
    # issue 23: errors pointed into the package's own catalog files instead of the user's input
    msg = _err("dgx-h100-superpod", "--set", "plan.floor.slack_m=5000")
    # issue 32: the value came from --set, and the line says so
    assert msg.startswith("topologies/dgx-h100-superpod.toml (--set plan.floor.slack_m=5000): plan.floor: the floor "
                          "plan makes NIC links up to 5,005 m long")
    assert "the longest reaches 2,000 m" in msg and "topo/data/catalog" not in msg


def test_a_bundled_spec_outside_the_working_folder_is_named_not_pathed(tmp_path):
    # review finding: after a plain `pip install`, every error on a bundled spec began with the package's own
    # folder ("error: /.../site-packages/topo/topologies/h100-100k.toml (--set ...)"); below the working folder
    # (a checkout) the relative path stays, as the README shows
    p = run_cli("plan", "--set", "plan.economics.years=-1", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr == ("error: bundled spec h100-100k (--set plan.economics.years=-1): plan.economics.years: must "
                        "be > 0, got -1\n")
    p = run_cli("plan", "--set", "plan.economics.years=-1")
    assert p.stderr.startswith("error: topologies/h100-100k.toml (--set plan.economics.years=-1)")


def test_a_bundled_spec_of_a_virtual_environment_below_the_working_folder_is_named_not_pathed(tmp_path):
    # walk14: `python3 -m venv .venv` in the project folder, as the README says, then a wheel install: the package's
    # bundled specs lie below the working folder, and errors began "error: .venv/lib/.../topo/topologies/..."
    import os
    import shutil
    import subprocess
    import sys

    site = tmp_path / ".venv" / "lib" / "site-packages"
    shutil.copytree(ROOT / "topo", site / "topo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "topologies", site / "topo" / "topologies")  # where the wheel puts them
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = subprocess.run([sys.executable, "-m", "topo", "plan", "--set", "plan.economics.years=-1"], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr == ("error: bundled spec h100-100k (--set plan.economics.years=-1): plan.economics.years: must "
                        "be > 0, got -1\n")


def test_the_library_names_the_keyword_that_was_wrong_and_merges_the_others():
    # plan(days=, mfu=, pue=) are the library's keywords (a sweep's axes): an error names the keyword, never
    # "argument" or a CLI flag, and the keywords given together all apply
    with pytest.raises(TopoError) as exc:
        plan("dgx-h100-superpod", days=-1, collectives=False)
    assert str(exc.value) == "days: plan.workload.days: must be > 0, got -1"
    with pytest.raises(TopoError) as exc:
        plan("dgx-h100-superpod", days=30, pue=0.5, collectives=False)
    assert str(exc.value).startswith("pue: plan.facility.pue: must be >= 1")
    c = plan("dgx-h100-superpod", days=30, mfu=0.4, pue=1.3, collectives=False).to_dict()
    assert (c["compute"]["days"], c["compute"]["mfu"], c["power"]["pue"]) == (30, 0.4, 1.3)


def test_a_tier_radix_beyond_its_switch_model_is_an_error():
    # issue 30: --set 'fabric.tiers[0].radix=128' on a tier of QM9700 (64 x 400G, switches.toml) was priced as 64-port
    # switches carrying 128 links each, silently
    msg = _err("dgx-h100-superpod", "--set", "fabric.tiers[0].radix=128")
    assert msg.startswith("topologies/dgx-h100-superpod.toml (--set fabric.tiers[0].radix=128): fabric.tiers[0].radix:")
    assert "a QM9700 has 64" in msg and "at most 64" in msg


@pytest.mark.parametrize("setting, says", [
    ("plan.floor.hall_power_W=30", "plan.floor.hall_power_W: a hall of 30 W cannot feed one rack of 40,800 W"),
    ("plan.switches.QM9700.power_W=0.747", "plan.switches.QM9700.power_W: must be >= 10 (W: a switch draws"),
    ("plan.cables.DAC.reach_m=1000", "plan.cables.DAC.reach_m: a DAC copper cable reaching 1000 m"),
    ("plan.facility.electricity_usd_per_kWh=78", "plan.facility.electricity_usd_per_kWh: must be <= 2 (USD per kWh"),
    ("plan.floor.hall_depth_m=1", "plan.floor.hall_depth_m: a hall 1 m deep holds no row of racks"),
])
def test_unit_slips_get_one_clear_line_blamed_on_the_set(setting, says):
    # issue 32: each of these (a unit slip by 1000x, a hall too small for one rack) gave a silently absurd plan
    msg = _err("h100-100k", "--set", setting)
    assert msg.startswith(f"topologies/h100-100k.toml (--set {setting}): {says}"), msg


def test_keys_beside_a_plan_files_plan_table_are_refused_not_dropped(tmp_path):
    # walk15: `[plan]` then `[facility] pue = 1.3` planned at the cooling's PUE 1.4 (the [facility] table was dropped
    # unread), and a spec file given as --plan-file planned as if only its [plan] table had been given
    f = _plan_file(tmp_path, '[plan]\nserver_model = "DGX H100"\n[facility]\npue = 1.3\n')
    assert _err("dgx-h100-superpod", "--plan-file", str(f)) == (
        f"{f}: facility: outside the [plan] table, where a plan file that has one reads nothing; allowed: the plan's "
        "keys inside [plan] (write [plan.facility]), or no [plan] table and the plan's keys at the top")
    spec = ROOT / "topologies" / "dgx-h100-superpod.toml"
    assert "[plan]" in spec.read_text()
    assert _err("dgx-h100-superpod", "--plan-file", str(spec)).endswith(
        "this is a spec file: give it as the SPEC argument, its [plan] table is read from there")
    # either form alone still plans: one [plan] table, or its keys at the top
    for text in ("[plan.facility]\npue = 1.3\n", "[facility]\npue = 1.3\n"):
        assert plan("dgx-h100-superpod", plan_file=_plan_file(tmp_path, text), collectives=False).power.pue == 1.3


def test_a_plan_key_that_is_not_a_table_is_one_line(tmp_path):
    # rev53: `plan = 3` raised "internal error (TypeError: 'int' object is not iterable)"
    f = _plan_file(tmp_path, "plan = 3\n")
    assert _err("dgx-h100-superpod", "--plan-file", str(f)) == (
        f"{f}: plan: must be a table ([plan]), got 3; allowed: the plan's keys inside [plan], or no [plan] table and "
        "the plan's keys at the top")


def test_a_failure_table_in_thousands_of_gpus_is_refused_not_an_internal_error():
    # walk46: observed_gpus = 16.384 (Llama 3's 16,384 H100 in thousands) ended in "internal error (ValueError:
    # math domain error)"; a GPU count is whole
    msg = _err("meta-llama3-24k", "--set", "plan.reliability.observed_gpus=16.384")
    assert msg.endswith("plan.reliability.observed_gpus: must be a whole number >= 1, got 16.384"), msg


@pytest.mark.parametrize("key", ["plan.reliability.observed_gpus=16", "plan.reliability.rate_scale=1000"])
def test_a_job_that_could_never_finish_a_restart_is_refused_in_one_line(key):
    # walk46: 1,000x Llama 3's rate (its 419 interruptions in 54 days on 16 GPUs, not 16,384): one every 7 s against
    # a recovery of minutes; e^(lambda R) overflowed ("internal error (OverflowError: math range error)")
    msg = _err("meta-llama3-24k", "--set", key)
    assert f"(--set {key}): plan.reliability: the job is interrupted every 7." in msg, msg
    assert "it would never get past a restart" in msg and "observed_gpus: GPUs, observed_days: days" in msg, msg


def test_a_typod_failure_cause_is_refused_not_added_as_a_new_cause():
    # walk46: --set plan.reliability.causes.gpus=100 (for gpu) planned 7.14 + 100 interruptions' worth more, a sixth
    # cause 'gpus' beside Llama 3's 262 GPU ones; the causes are Table 5's groups, each with a meaning in the model
    msg = _err("meta-llama3-24k", "--set", "plan.reliability.causes.gpus=100")
    assert msg.endswith("plan.reliability.causes.gpus: unknown key 'gpus'; allowed: gpu, network, nic, host, "
                        "software; did you mean 'gpu'?"), msg
