"""benchmarks/_results.py: timing a child that writes more than a pipe buffer, and RESULTS.md only with --write
(issue 23)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _results  # noqa: E402


def test_peak_rss_of_a_child_writing_more_than_a_pipe_buffer_does_not_deadlock():
    # 1 MB on stdout and 200 KB on stderr: far more than a 64 KiB pipe buffer; waiting for the child before
    # reading its pipes blocks forever (the timeout turns that into a failure)
    code = "import sys; sys.stdout.write('x' * 1_000_000); sys.stderr.write('y' * 200_000)"
    out = subprocess.run([sys.executable, "-c", f"""
import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r})
import _results
wall, rss, out = _results.peak_rss_of([sys.executable, "-c", {code!r}])
print(len(out), rss > 0)
"""], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["1000000", "True"], out.stderr


def test_update_section_leaves_results_md_alone_without_write(tmp_path, monkeypatch, capsys):
    target = tmp_path / "RESULTS.md"
    target.write_text("untouched\n")
    monkeypatch.setattr(_results, "RESULTS", target)
    monkeypatch.setattr(sys, "argv", ["bench_x.py"])
    _results.update_section("x", "body", "python benchmarks/bench_x.py")
    assert target.read_text() == "untouched\n"
    assert "body" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--write"])
    _results.update_section("x", "body", "python benchmarks/bench_x.py")
    assert "<!-- begin x -->" in target.read_text() and "body" in target.read_text()
