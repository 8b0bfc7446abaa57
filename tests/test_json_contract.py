"""One JSON contract across the commands: every key a snake_case name, every quantity's key names its unit.

Each command's ``--json`` document (and a sweep's parquet figure columns) is walked key by key. A key fails when it
holds a space, or when it holds a number (a float; an integer is a count) whose name carries no unit suffix and is
not a ratio, a unit itself or one of the few unitless names below, each with why. A map keyed by names (tiers,
precisions, causes) takes the unit of the key that holds it (``peak_flop_per_s: {bf16, fp8}``,
``longest_m: {nic-leaf, ...}``). json52 (walk17, section 187): ``reliability.lost_by_part`` had the keys
``"checkpoint stall"`` and ``"catch-up"``, and ``peak_flops`` held FLOP/s.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, run_cli
from topo.sweep.point import FIGURES

LOG = str(ROOT / "tests" / "data" / "nccl_logs" / "dstack_nebius_h100_allreduce_2n.txt")

# unit suffixes: time, bytes, rates, power, energy, money, length, area, mass, volume, counts per period, FLOP
UNITS = ("s", "us", "ms", "bytes", "MiB", "Bps", "GBps", "Gbps", "W", "MW", "kW", "Wh", "usd", "m", "m2", "km", "kg",
         "L", "kWh", "hours", "days", "years", "day", "year", "quarter", "step", "flop", "tokens", "pct", "95pct")
# a key that is a unit itself: a count of FLOP, of bytes, of seconds, days or years
UNIT_KEYS = {"flop", "bytes", "seconds", "days", "years"}
# words that make a key a ratio of like quantities (unitless by nature): efficiencies, shares, utilization,
# slowdowns and contention factors, MFU, PUE, goodput, oversubscription, throughput against one site, and a
# profile's multipliers and divisors (net_hop_scale, pat_net_step_divisor)
RATIO_WORDS = {"efficiency", "share", "fraction", "utilization", "ratio", "slowdown", "mfu", "pue", "factor",
               "oversubscription", "goodput", "vs", "contention", "scale", "divisor"}
# unitless floats that are none of those, each with why
UNITLESS = {
    "params": "a count of model parameters (plan's checkpoint), a float for 1e12-scale counts",
    "servers_in_repair": "the expected number of servers in repair at any time (a mean count)",
    "servers_in_repair_per_domain": "the expected number of servers in repair at once in the job's fullest NVLink "
                                    "domain (a mean count; plan134)",
    "expected_in_lead_time": "the expected number of failures of a part within its lead time (a mean count)",
    "wrong": "nccl-tests' #wrong column as the log prints it (NaN where the log says N/A)",
    "p50": "uncertainty: the 50th percentile of the signed relative errors (a fraction)",
    "p90": "uncertainty: the 90th percentile of the absolute relative errors (a fraction)",
    "median": "uncertainty: the signed median relative error (a fraction)",
}
# generic statistics beside a "key" naming the data file's entry they are (plan's inputs, assumptions, price
# ranges: "servers.HGX H100.price_usd"), whose schema gives the unit
STATISTICS = {"value", "low", "high", "expected"}
# maps keyed by a data file's key path, whose names hold the catalog's own words (e.g. "SN5600 (64 x 800G)")
NAME_MAPS = {"sources"}
# calibrate's fitted parameters by name, as the written profile's `fitted` table: multipliers of the base
# profile's values (x0.96), efficiencies and pipeline_window_MiB
PARAMETER_MAPS = {"values"}

_TRAILERS = re.compile(r"(_each|_per_gpu|_per_gpu_link|_per_param|_by_[a-z]+|_for_[a-z0-9]+)$")


def has_unit(key: str) -> bool:
    """The key names its unit (``time_s``, ``power_W_each``, ``peak_flop_per_s_per_gpu``) or is a ratio/unit."""
    base = _TRAILERS.sub("", key)
    words = set(key.lower().replace("-", "_").split("_"))
    return (base.rsplit("_", 1)[-1] in UNITS and "_" in base) or key in UNIT_KEYS or bool(words & RATIO_WORDS)


def faults(doc, path: str = "", inherited: bool = False) -> list[str]:
    """Every key of ``doc`` with a space, or a float under a name without a unit."""
    out: list[str] = []
    if isinstance(doc, list):
        for item in doc:
            out += faults(item, path + "[]", inherited)
        return out
    if not isinstance(doc, dict):
        return out
    sibling = str(doc.get("key", ""))
    for k, v in doc.items():
        where = f"{path}.{k}"
        names = path.rsplit(".", 1)[-1].rstrip("[]") in NAME_MAPS
        if " " in k and not names:
            out.append(f"{where}: a key with a space")
        unit = inherited or has_unit(k) or k in PARAMETER_MAPS
        if isinstance(v, float) and not unit and k not in UNITLESS and not (
                k in STATISTICS and sibling):
            out.append(f"{where}: a quantity without a unit suffix")
        out += faults(v, where, unit)
    return out


def float_byte_counts(doc, path: str = "") -> list[str]:
    """Byte counts (``bytes``, ``*_bytes``, ``*_bytes_per_step``) given as floats; a layout's ``weight_bytes`` and
    the like are bytes per parameter (2.0 in BF16), not counts, and are not checked."""
    if isinstance(doc, list):
        return [x for item in doc for x in float_byte_counts(item, path + "[]")]
    if not isinstance(doc, dict):
        return []
    out = [f"{path}.{k}" for k, v in doc.items() if isinstance(v, float)
           and (k == "bytes" or k.endswith(("_bytes", "_bytes_per_step")))]
    return out + [x for k, v in doc.items() if k != "layout" for x in float_byte_counts(v, f"{path}.{k}")]


def test_the_checker_catches_what_it_guards():
    assert faults({"reliability": {"lost_by_part": {"checkpoint stall": 0.05, "catch-up": 0.06}}}) == [
        ".reliability.lost_by_part.checkpoint stall: a key with a space",
        ".reliability.lost_by_part.checkpoint stall: a quantity without a unit suffix",
        ".reliability.lost_by_part.catch-up: a quantity without a unit suffix"]
    assert faults({"peak_flops": {"bf16": 1e18}, "compute": {"reference_cluster_flops": 6e18}}) == [
        ".peak_flops.bf16: a quantity without a unit suffix",
        ".compute.reference_cluster_flops: a quantity without a unit suffix"]
    assert float_byte_counts({"comm": [{"size_bytes": 67108864.0}], "layout": {"weight_bytes": 2.0}, "n_bytes": 1}) == [
        ".comm[].size_bytes"]
    assert faults({"peak_flop_per_s": {"bf16": 1e18}, "lost_fraction_by_part": {"catch_up": 0.1}, "n": 3,
                   "power_W_each": 1.0, "peak_flop_per_s_per_gpu": 9.89e14, "inputs": [{"key": "a.price_usd",
                                                                                        "value": 2.0}]}) == []


COMMANDS = {
    "describe": ["describe", "meta-llama3-24k"],
    "describe region": ["describe", "two-site-h100"],
    "estimate": ["estimate", "-g", "64", "--size", "1GiB"],
    "estimate alltoall": ["estimate", "-c", "alltoall", "-g", "64", "--size", "1GiB"],
    "train": ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "1024", "--tp", "8", "--pp", "2",
              "--dp", "64", "--global-batch", "256"],
    "train search": ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64",
                     "--search", "--top", "2"],
    "train region": ["train", "three-site-chain", "--model", "llama3-8b", "--tp", "8", "--global-batch", "288"],
    "plan": ["plan"],
    "plan side by side": ["plan", "h100-100k", "dgx-h100-superpod"],
    "plan region": ["plan", "two-site-h100"],
    "compare": ["compare", LOG, "--gpu", "H100"],
    "profile": ["profile", "show", "hopper+roce"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_json_key_is_snake_case_and_names_its_unit(name):
    doc = json.loads(run_cli(*COMMANDS[name], "--json", check=True).stdout)
    assert faults(doc) == [], f"topo {' '.join(COMMANDS[name])} --json"
    # one type for byte counts: whole numbers, as capacity_bytes (walk17: comm[].size_bytes 67108864.0)
    assert float_byte_counts(doc) == [], f"topo {' '.join(COMMANDS[name])} --json"


def test_calibrate_json_keys(tmp_path):
    doc = json.loads(run_cli("calibrate", LOG, "--gpu", "H100", "-o", str(tmp_path / "p.toml"), "--json",
                             check=True).stdout)
    assert faults(doc) == []


def test_sweep_figure_columns_name_their_units():
    bad = [f"{c}.{k}" for c, cols in FIGURES.items() for k, (kind, _) in cols.items()
           if " " in k or (kind == "float64" and not has_unit(k) and k not in UNITLESS)]
    assert bad == []


def test_train_reports_the_sequence_length_its_step_ran():
    """walk17: ``layout.seq_len`` was null while the step ran Llama 3 8B's 8,192 tokens (the model file's
    seq_len, topo/data/models/llama3-8b.toml); tokens_per_step = global batch x that length."""
    doc = json.loads(run_cli(*COMMANDS["train"], "--json", check=True).stdout)
    assert doc["layout"]["seq_len"] == 8192 and doc["tokens_per_step"] == 256 * 8192
    given = json.loads(run_cli(*COMMANDS["train"], "--seq", "4096", "--json", check=True).stdout)
    assert given["layout"]["seq_len"] == 4096 and given["tokens_per_step"] == 256 * 4096
