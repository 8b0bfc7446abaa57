"""`topo estimate --help` says where the range(us) column is printed and which --json / --csv fields carry it; the
size it names is the data file's (topo/data/accuracy/collective_interval.toml) and the fields are the outputs'."""

import csv
import io
import json
import re

from conftest import run_cli
from topo.engine.interval import regimes

ARGS = ["estimate", "dgx-h100-superpod", "-g", "16"]


def _help():
    return " ".join(run_cli("estimate", "--help", check=True).stdout.split())


def test_help_names_the_range_bound_the_data_file_sets():
    last_shown = max(r.max_bytes for r in regimes() if r.in_table)
    mib = (last_shown + 1) / 2 ** 20
    assert f"Below {mib:g} MiB, where the model is weaker, the range(us) column" in _help()


def test_the_fields_help_names_are_in_the_outputs():
    text = _help()
    named = re.search(r"--json (\w+) and (\w+), --csv (\w+) and (\w+)\)", text)
    assert named, text
    js = json.loads(run_cli(*ARGS, "--size", "1K", "--json", check=True).stdout)["results"][0]
    assert js[named[1]] < js["time_s"] < js[named[2]]
    row = next(csv.DictReader(io.StringIO(run_cli(*ARGS, "-b", "1K", "-e", "1K", "--csv", check=True).stdout)))
    assert float(row[named[3]]) < float(row["time_us"]) < float(row[named[4]])
    table = run_cli(*ARGS, "-b", "1K", "-e", "1K", check=True).stdout
    assert "range(us)" in table
