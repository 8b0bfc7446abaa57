"""The bundled example nccl-tests log (topo/data/examples/, package data): a wheel user can try ``topo compare``
and ``topo calibrate`` by its name, as the README offers, with no checkout (fix49, from a new-user walk: the README
pointed to tests/data/..., which a wheel does not ship). .ci/run's wheel check runs ``topo compare`` on it from an
empty folder."""

import pytest

from conftest import ROOT, run_cli
from topo.calibrate.parse import parse_file
from topo.errors import TopoError
from topo.resources import example_logs

NAME = "nccl1453-h100-allreduce"
TESTS_COPY = ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt"  # NVIDIA/nccl#1453


def test_the_example_is_the_sourced_log_of_the_tests():
    assert list(example_logs()) == [NAME]
    assert example_logs()[NAME].read_bytes() == TESTS_COPY.read_bytes()
    assert NAME + ".log" in (ROOT / "topo" / "data" / "examples" / "README.md").read_text()  # its source


def test_a_bundled_name_reads_the_example_where_no_file_has_it(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (run,) = parse_file(NAME)
    assert run.source == f"example log {NAME}" and run.rows == parse_file(TESTS_COPY)[0].rows


def test_a_file_of_that_name_wins_over_the_example(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / NAME).write_text("not a log\n")
    with pytest.raises(TopoError) as exc:
        parse_file(NAME)
    assert exc.value.source == NAME


def test_a_missing_log_lists_the_bundled_examples(tmp_path):
    with pytest.raises(TopoError) as exc:
        parse_file(tmp_path / "nope.log")
    assert exc.value.message == f"no such log file; bundled example logs: {NAME}"


def test_compare_on_the_example_from_an_empty_folder_gives_the_readmes_verdict(tmp_path):
    out = run_cli("compare", NAME, "--gpu", "H100", cwd=tmp_path, check=True).stdout
    assert "verdict: this run reaches 2% of what its hardware allows at sizes >= 64 MiB" in out
