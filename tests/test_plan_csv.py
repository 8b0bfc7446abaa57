"""The bill of materials as CSV (`topo plan --bom-csv`) and `topo report --plan-file` (issue 23)."""

from __future__ import annotations

import csv
import io

import pytest

from conftest import run_cli
from topo.plan import plan


def test_the_bill_of_materials_as_csv(tmp_path):
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--bom-csv", "bom.csv", cwd=tmp_path, check=True)
    assert "wrote bom.csv" in p.stderr and p.stdout.startswith("dgx-h100-superpod:")
    text = (tmp_path / "bom.csv").read_text()
    # issue 30: the header is the first line (pandas.read_csv and spreadsheets open it as is); provenance in a column
    assert text.startswith("design,kind,where,item,")
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv(tmp_path / "bom.csv")
    assert list(frame.columns)[-1] == "written_by" and frame["written_by"].str.startswith("written by topo").all()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(frame) == len(rows)
    r = plan("dgx-h100-superpod", collectives=False)
    count = {k: sum(int(x["count"]) for x in rows if x["kind"] == k) for k in ("switch", "transceiver", "cable")}
    assert count == {"switch": r.bom.num_switches, "transceiver": r.bom.num_transceivers, "cable": r.bom.num_cables}
    total = sum(float(x["price_usd"]) for x in rows)
    assert total == pytest.approx(r.capex.parts()["switches"] + r.capex.parts()["optics"] + r.capex.parts()["cables"],
                                  rel=1e-6)
    # again: topo's own file is replaced; a file topo did not write is kept; '-' is the CSV alone on stdout
    run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--bom-csv", "bom.csv", cwd=tmp_path, check=True)
    (tmp_path / "mine.csv").write_text("keep me\n")
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--bom-csv", "mine.csv", cwd=tmp_path)
    assert p.returncode == 2 and "was not written by topo" in p.stderr
    assert (tmp_path / "mine.csv").read_text() == "keep me\n"
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--bom-csv", "-", cwd=tmp_path, check=True)
    assert p.stdout == text


def test_a_failed_plan_writes_no_csv(tmp_path):
    p = run_cli("plan", "dgx-h100-superpod", "--pue", "0.8", "--bom-csv", "bom.csv", cwd=tmp_path)
    assert p.returncode == 2 and not (tmp_path / "bom.csv").exists()


def test_report_takes_the_plan_file_of_topo_plan(tmp_path):
    (tmp_path / "prices.toml").write_text("[switches.QM9700]\nprice_usd = 1e9\n")
    p = run_cli("report", "dgx-h100-superpod", "--plan-file", "prices.toml", "-o", "r.html", cwd=tmp_path,
                check=True)
    html = (tmp_path / "r.html").read_text()
    assert "32,000.0" in html  # 32 leaf switches at $1B each, in $M: the plan file's price, not the catalog's
    (tmp_path / "bad.toml").write_text("[switches.QM9700]\nprice_usd = -5\n")
    p = run_cli("report", "dgx-h100-superpod", "--plan-file", "bad.toml", "-o", "r2.html", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("error: bad.toml: plan.switches.QM9700.price_usd"), p.stderr
    assert not (tmp_path / "r2.html").exists()
