"""Outputs never destroy anything (issue 8): no write over an input, a folder, a device or a file topo did not
write; '-' is standard output; default names stay in the working folder."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import threading
import zlib

import networkx as nx
import pytest

from conftest import ROOT, run_cli
from topo import TopoError, build_fabric, load_spec
from topo.atomic import SIGNATURE, atomic_open, is_ours, open_output, safe_file_name
from topo.report.files import sign_image

SMALL = ("--set", "cluster.num_units=1")
SPEC = ROOT / "topologies" / "dgx-h100-superpod.toml"


@pytest.fixture
def victim(tmp_path):
    p = tmp_path / "victim.toml"
    p.write_bytes(SPEC.read_bytes())
    return p


def one_line_error(proc, fragment):
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert fragment in proc.stderr, proc.stderr


@pytest.mark.parametrize("cmd", [["export", "--format", "json"], ["export"], ["report"]])
def test_an_input_spec_is_never_overwritten(victim, cmd):
    before = victim.read_bytes()
    proc = run_cli(cmd[0], str(victim), *cmd[1:], *SMALL, "-o", str(victim), "--force")
    one_line_error(proc, "is an input")
    assert victim.read_bytes() == before
    # not through a symbolic link or a hard link either
    link, hard = victim.parent / "link.out", victim.parent / "hard.out"
    link.symlink_to(victim)
    os.link(victim, hard)
    for out in (link, hard):
        one_line_error(run_cli(cmd[0], str(victim), *cmd[1:], *SMALL, "-o", str(out), "--force"), "is an input")
    assert victim.read_bytes() == before and link.is_symlink()


@pytest.mark.parametrize("cmd", [["export"], ["report"], ["report", "--format", "svg"]])
def test_a_directory_as_output_is_one_clean_line(tmp_path, cmd):
    proc = run_cli(*cmd, "dgx-h100-superpod", *SMALL, "-o", str(tmp_path))
    one_line_error(proc, "is a directory")
    assert list(tmp_path.iterdir()) == []


def test_a_file_topo_did_not_write_needs_force_and_ours_does_not(tmp_path):
    mine = tmp_path / "notes.txt"  # a suffix of no format: GraphML, then JSON, go into the same file
    mine.write_text("my notes\n")
    proc = run_cli("export", "dgx-h100-superpod", *SMALL, "-o", str(mine))
    one_line_error(proc, "was not written by topo")
    assert "--force" in proc.stderr and mine.read_text() == "my notes\n"
    run_cli("export", "dgx-h100-superpod", *SMALL, "-o", str(mine), "--force", check=True)
    assert is_ours(mine)
    run_cli("export", "dgx-h100-superpod", *SMALL, "--format", "json", "-o", str(mine), check=True)  # ours now
    assert json.loads(mine.read_text())["generator"].startswith(SIGNATURE)
    page = tmp_path / "r.html"
    for _ in range(2):  # a second report replaces the first without --force
        run_cli("report", "dgx-h100-superpod", *SMALL, "-o", str(page), check=True)
    assert is_ours(page)


def test_dash_is_standard_output(tmp_path):
    proc = run_cli("export", "dgx-h100-superpod", *SMALL, "--format", "json", "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    g = nx.node_link_graph(json.loads(proc.stdout))
    assert g.number_of_nodes() == build_fabric(load_spec("dgx-h100-superpod", [SMALL[1]])).num_nodes
    assert list(tmp_path.iterdir()) == []


def _private_device(tmp_path, name, minor):
    """A character device node of our own in tmp_path (root only): a regression replaces it, never /dev's."""
    node = tmp_path / name
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        return None
    return node


def test_devices_and_links_to_them_are_streamed_to_never_replaced(tmp_path):
    # /dev/null (1, 3) and /dev/full (1, 7), as private nodes: the tests never risk the system's own devices
    null, full = _private_device(tmp_path, "null", 3), _private_device(tmp_path, "full", 7)
    if null is None:
        pytest.skip("creating device nodes needs root; the named-pipe test covers non-regular files")
    link = tmp_path / "out.graphml"
    link.symlink_to(null)
    run_cli("export", "dgx-h100-superpod", *SMALL, "-o", str(link), check=True)
    run_cli("export", "dgx-h100-superpod", *SMALL, "-o", str(null), check=True)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(null).st_mode)
    one_line_error(run_cli("export", "dgx-h100-superpod", *SMALL, "-o", str(full)), "No space left on device")
    assert stat.S_ISCHR(os.stat(full).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null", "out.graphml"]


def test_a_named_pipe_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    run_cli("export", "dgx-h100-superpod", *SMALL, "--format", "json", "-o", str(fifo), check=True)
    reader.join(30)
    if reader.is_alive():  # the pipe was replaced, not written: unblock the reader before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["graph"]["name"] == "dgx-h100-superpod"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("cmd", [["export"], ["report"]])
def test_a_named_pipe_nothing_reads_is_refused_not_waited_on(tmp_path, cmd):
    # fuzz136 (section 472): `topo export -o pipe` with no reader blocked for ever in open() (fifo(7): opening a
    # FIFO for writing waits for a reader); now refused once FIFO_READER_WAIT_S passes. The timeout keeps a
    # regression from blocking the suite.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, "-m", "topo", *cmd, "dgx-h100-superpod", *SMALL, "-o", str(fifo)],
                              capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"topo {cmd[0]} -o FIFO blocked waiting for a reader")
    one_line_error(proc, f"{fifo}: is a named pipe with no reader after 5.000 s")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_default_name_from_the_spec_stays_in_the_working_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = work / "evil.toml"
    spec.write_text(SPEC.read_text().replace('name = "dgx-h100-superpod"', 'name = "../escaped-by-name"'))
    run_cli("export", str(spec), *SMALL, "--format", "json", cwd=work, check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert (work / "escaped-by-name.json").is_file()


@pytest.mark.parametrize("name, expected", [("../x", "x.json"), ("a/b\\c", "a-b-c.json"), (".hidden", "hidden.json"),
                                            ("--rm", "rm.json"), ("/", "topo.json"), ("..", "topo.json"),
                                            ("ok_name-1.2", "ok_name-1.2.json")])
def test_safe_file_name(name, expected):
    assert safe_file_name(name, ".json") == expected


def test_library_writers_refuse_too(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(TopoError, match="is a directory"):
        with atomic_open(d) as fh:
            fh.write("x")
    keep = tmp_path / "keep.txt"
    keep.write_text("keep")
    with pytest.raises(TopoError, match="not written by topo"):
        with open_output(keep) as fh:
            fh.write("x")
    assert keep.read_text() == "keep"
    with pytest.raises(TopoError, match="is an input"):
        open_output(keep, inputs=[keep], force=True)


def _png_chunks(data: bytes):
    pos, out = 8, []
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body, crc = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n], data[pos + 8 + n:pos + 12 + n]
        assert struct.unpack(">I", crc)[0] == zlib.crc32(kind + body) & 0xFFFFFFFF
        out.append((kind, body))
        pos += 12 + n
    return out


def test_signed_png_is_a_valid_png_with_our_text_chunk(tmp_path):
    # a 1x1 grey PNG (IHDR, IDAT, IEND) made by hand
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))
    signed = sign_image(png, "png")
    kinds = [k for k, _ in _png_chunks(signed)]
    assert kinds == [b"IHDR", b"tEXt", b"IDAT", b"IEND"]
    p = tmp_path / "x.png"
    p.write_bytes(signed)
    assert is_ours(p)
    p.write_bytes(png)
    assert not is_ours(p)


def test_an_empty_output_name_is_an_error_not_a_default_or_nothing(tmp_path):
    # Review finding: `-o ""` (an unset shell variable) made `calibrate` fit, then write nothing and print nothing
    # (exit 0), and `export`/`report` write their default file names; each is now one error line, no file
    log = str(ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt")
    for args in (("calibrate", log, "--gpu", "H100"), ("export", "dgx-h100-superpod", "--format", "json"),
                 ("report", "dgx-h100-superpod")):
        p = run_cli(*args, "-o", "", cwd=tmp_path)
        assert p.returncode == 2 and p.stdout == "", (args, p.stderr)
        assert p.stderr.splitlines()[-1] == "error: -o: an empty file name; give a file name, or - for standard output"
    assert list(tmp_path.iterdir()) == []


# --- tidy9: every file a command reads is an input, not only the spec named on the command line ------------------

MODEL = ROOT / "topo" / "data" / "models" / "llama3-8b.toml"


@pytest.mark.parametrize("which", ["model", "layout"])
def test_a_report_never_overwrites_its_training_job_files(tmp_path, which):
    # found walking the README: `topo report SPEC --train model.toml --layout ... -o model.toml --force` wrote the
    # report over the user's model file (only the specs and --plan-file were inputs)
    model, layout = tmp_path / "model.toml", tmp_path / "layout.toml"
    model.write_bytes(MODEL.read_bytes())
    layout.write_text("tp = 8\ndp = 4\nglobal_batch = 32\n")
    victim = model if which == "model" else layout
    before = victim.read_bytes()
    proc = run_cli("report", "dgx-h100-superpod", *SMALL, "--train", str(model), "--layout", str(layout), "-o",
                   str(victim), "--force", cwd=tmp_path)
    one_line_error(proc, f"error: {victim}: -o: is an input")
    assert victim.read_bytes() == before


def test_a_region_report_never_overwrites_a_site_spec(tmp_path):
    # a region file's [[sites]] read spec files beside it: `topo report region.toml -o site.toml --force` replaced one
    (tmp_path / "site.toml").write_bytes(SPEC.read_bytes())
    region = (ROOT / "topologies" / "two-site-h100.toml").read_text()
    assert region.count('spec = "dgx-h100-superpod"') == 2
    (tmp_path / "region.toml").write_text(region.replace('spec = "dgx-h100-superpod"', 'spec = "site.toml"'))
    before = (tmp_path / "site.toml").read_bytes()
    proc = run_cli("report", "region.toml", "-o", "site.toml", "--force", cwd=tmp_path)
    one_line_error(proc, "error: site.toml: -o: is an input")
    assert (tmp_path / "site.toml").read_bytes() == before
    proc = run_cli("report", "region.toml", "-o", "region.html", cwd=tmp_path)  # another name is written
    assert proc.returncode == 0 and (tmp_path / "region.html").stat().st_size > 0, proc.stderr


@pytest.mark.parametrize("flag", ["--csv", "--report"])
@pytest.mark.parametrize("victim", ["site.toml", "model.toml"])
def test_a_sweep_never_overwrites_a_file_its_study_reads(tmp_path, flag, victim):
    # `topo sweep study.toml --csv site.toml --force` wrote the CSV over the spec the study reads (only the study
    # file was an input); likewise a model file an axis names
    (tmp_path / "site.toml").write_bytes(SPEC.read_bytes())
    (tmp_path / "model.toml").write_bytes(MODEL.read_bytes())
    (tmp_path / "study.toml").write_text('name = "s"\ncompute = ["train"]\n[axes]\nspec = "site.toml"\n'
                                         'model = "model.toml"\nlayout = "tp=8,dp=4"\nglobal_batch = 32\n')
    before = (tmp_path / victim).read_bytes()
    proc = run_cli("sweep", "study.toml", "--scheduler", "serial", "-o", "out", flag, victim, "--force",
                   cwd=tmp_path)
    one_line_error(proc, f"error: {victim}: {flag}: is an input")
    assert (tmp_path / victim).read_bytes() == before


@pytest.mark.parametrize("which", ["model", "layout"])
def test_a_plan_never_writes_its_bom_over_its_training_job_files(tmp_path, which):
    # `topo plan SPEC --model model.toml --layout layout.toml --bom-csv model.toml --force` wrote the CSV over it
    model, layout = tmp_path / "model.toml", tmp_path / "layout.toml"
    model.write_bytes(MODEL.read_bytes())
    layout.write_text("tp = 8\ndp = 4\nglobal_batch = 32\n")
    victim = model if which == "model" else layout
    before = victim.read_bytes()
    proc = run_cli("plan", "dgx-h100-superpod", *SMALL, "--no-collectives", "--model", str(model), "--layout",
                   str(layout), "--bom-csv", str(victim), "--force", cwd=tmp_path)
    one_line_error(proc, f"error: {victim}: --bom-csv: is an input")
    assert victim.read_bytes() == before


def test_calibrate_never_writes_its_profile_over_the_spec(tmp_path, victim):
    # walk6: `topo calibrate LOG --spec site.toml -o site.toml --force` replaced the user's spec with the fitted
    # profile (only the logs were inputs); the library refuses it too
    from topo.calibrate.calibrate import calibrate_logs

    log = ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt"
    before = victim.read_bytes()
    proc = run_cli("calibrate", str(log), "--spec", str(victim), "-o", str(victim), "--force", cwd=tmp_path)
    one_line_error(proc, f"error: {victim}: -o: is an input")
    with pytest.raises(TopoError, match="is an input"):
        calibrate_logs([log], output=victim, spec=str(victim), force=True, max_nfev=5)
    assert victim.read_bytes() == before


def test_a_figure_renders_on_kaleidos_second_try():
    """kaleido can call its page's script before the page defined it when the machine is loaded (a clean-clone CI
    dry run: ``ReferenceError: kaleido_scopes is not defined``): the image is rendered once more before the
    one-line error; a figure that fails twice is the error."""
    pytest.importorskip("kaleido")
    from topo.cli.report import _image
    from topo.errors import TopoError

    class Fig:
        class layout:
            height = 400

        def __init__(self, fails):
            self.fails, self.calls = fails, 0

        def to_image(self, **kw):
            self.calls += 1
            if self.calls <= self.fails:
                raise RuntimeError("ReferenceError: kaleido_scopes is not defined")
            return b"<svg/>"

    once = Fig(1)
    assert _image(once, "svg") == b"<svg/>" and once.calls == 2
    with pytest.raises(TopoError, match="kaleido could not render"):
        _image(Fig(2), "svg")


@pytest.mark.parametrize("cmd, out, fix", [
    (["export"], "g.json", "add --format json, or name it g.graphml"),
    (["export", "--format", "json"], "g.GRAPHML", "add --format graphml, or name it g.json"),
    (["report"], "r.png", "add --format png, or name it r.html"),
    (["report", "--format", "svg", "--figure", "fabric"], "r.png", "add --format png, or name it r.svg"),
])
def test_an_output_named_for_another_format_is_refused(tmp_path, cmd, out, fix):
    # walk13: 'topo export -o g.json' wrote GraphML (the default format) into g.json, and 'topo report -o r.png'
    # an HTML page into r.png; json.load and an image viewer then fail on them
    proc = run_cli(cmd[0], "dgx-h100-superpod", *cmd[1:], *SMALL, "-o", out, cwd=tmp_path)
    one_line_error(proc, fix)
    assert list(tmp_path.iterdir()) == []
    ok = run_cli("export", "dgx-h100-superpod", *SMALL, "--format", "json", "-o", "g.json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "g.json").read_text())["generator"].startswith(SIGNATURE)


def test_an_export_with_a_failed_switch_counts_its_cables_in_num_failed(tmp_path):
    # walk13: README's Output files says failed cables stay in num_links and bandwidth_Bps and are counted in
    # num_failed; every cable of a failed switch is failed, and no other
    run_cli("export", "dgx-h100-superpod", *SMALL, "--fail", "spine0", "--format", "json", "-o", "f.json",
            cwd=tmp_path, check=True)
    g = nx.node_link_graph(json.loads((tmp_path / "f.json").read_text()))
    touching = [a for u, v, a in g.edges(data=True) if "spine0" in (u, v)]
    assert touching and all(a["num_failed"] == a["num_links"] > 0 for a in touching)
    assert all(a["bandwidth_Bps"] == a["num_links"] * a["link_bandwidth_Bps"] for _, _, a in g.edges(data=True))
    assert sum(a["num_failed"] for _, _, a in g.edges(data=True)) == sum(a["num_links"] for a in touching)
