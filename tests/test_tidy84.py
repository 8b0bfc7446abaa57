"""tidy84: four small items left by walk36 (section 379) and plan81 (section 377): a region job's model faults before
its batch, the host-link note's remedy worded by the command, ``topo report REGION --plan --across``, the README's
calibrate paragraph."""
import html
import re
from pathlib import Path

import pytest

from conftest import run_cli
from topo.cli.main import main
from topo.training.model import load_model

ROOT = Path(__file__).resolve().parents[1]


def _err(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err.strip()


def test_a_region_job_names_tp_against_the_heads_before_its_batch(capsys):
    # Llama 3 8B has 32 attention heads ("The Llama 3 Herd of Models", arXiv 2407.21783, Table 3): tp 3
    # cannot split them, whatever the batch; one site's topo train checks the layout against the model before the
    # batch (check_layout), and the region's job did the batch first: "512 sequences do not split into dp (1024, over
    # the 2 sites)" hid the real fault (walk36 Left 2)
    assert load_model("llama3-8b").heads % 3
    rc, err = _err(capsys, ["train", "two-site-h100", "--model", "llama3-8b", "--tp", "3", "--global-batch", "512"])
    assert rc == 2
    assert err == "error: --tp: 3 does not divide the 32 attention heads; allowed: a divisor of 32"


def test_a_region_job_with_a_good_tp_still_says_its_batch_over_the_sites(capsys):
    # two-site-h100 holds 3,072 GPUs: tp 8 fills dp = 384 replicas, and 512 sequences do not split into 384 x 1
    rc, err = _err(capsys, ["train", "two-site-h100", "--model", "llama3-8b", "--tp", "8", "--global-batch", "512"])
    assert rc == 2 and "512 sequences do not split into dp (384, over the 2 sites)" in err


def test_compare_without_a_spec_tells_its_user_to_pass_one_for_the_host_link(capsys):
    # a 1.6 Tb/s NIC (200 GB/s) on H100's PCIe gen5 x16 host link, 64 GB/s per direction
    # (topo/data/hardware/host_links.toml): the note told the user to give server.nic_model or server.pcie_bandwidth,
    # spec keys no flag of compare sets; without --spec the way is a spec file (walk36 Left 1)
    for argv in (["compare", "nccl1453-h100-allreduce"], ["calibrate", "nccl1453-h100-allreduce", "-o", "-"]):
        rc, err = _err(capsys, [*argv, "--gpu", "H100", "--nic-rate", "1600 Gb/s"])
        line = next(x for x in err.splitlines() if "caps each 1.6 Tb/s NIC at 64 GB/s" in x)
        assert rc == 0
        assert line.endswith("if the servers' is faster, pass --spec FILE, a spec giving server.nic_model (e.g. "
                             "ConnectX-8 for 800 Gb/s, PCIe Gen6) or server.pcie_bandwidth")


def test_describe_and_a_spec_keep_the_spec_keys_as_the_remedy(tmp_path, capsys):
    # a user with a spec can set its keys: describe's sentence is unchanged, and so is compare --spec's. The DGX
    # H100 SuperPOD with 800 Gb/s NICs and ports: ConnectX-7 on PCIe gen5 x16, 64 GB/s per direction, caps them
    text = (ROOT / "topologies" / "dgx-h100-superpod.toml").read_text()
    assert text.count('"400 Gb/s"') == 3  # the NICs and two tiers' ports
    spec = tmp_path / "fast.toml"
    spec.write_text(text.replace('"400 Gb/s"', '"800 Gb/s"'))
    rc = main(["describe", str(spec)])
    out = capsys.readouterr().out
    assert rc == 0 and ("caps each 800 Gb/s NIC at 64 GB/s; give server.nic_model (e.g. ConnectX-8 for 800 Gb/s, "
                        "PCIe Gen6) or server.pcie_bandwidth if the servers differ") in out
    rc, err = _err(capsys, ["compare", "nccl1453-h100-allreduce", "--spec", str(spec)])
    assert rc == 0 and "800 Gb/s NIC at 64 GB/s; give server.nic_model" in err and "--spec FILE" not in err


JOB = ("--layout", "tp=8,pp=4,global_batch=576", "--tokens", "15T")  # plan81's job on two-site-h100 (section 377)


def _work_block(text: str) -> list[str]:
    """``topo plan REGION --model``'s job lines: from its work line to the first note."""
    return text[text.index("work      llama3-70b"):].split("\nnote: ")[0].splitlines()


def test_a_regions_report_takes_across_and_shows_the_job_plan_across_pp_shows(tmp_path):
    # plan81 Left 1: topo report REGION --plan --train had no --across, so its page showed the job data parallel
    # across the sites whatever topo plan REGION --across pp planned (2.4411 s a step against dp's 2.6175 s)
    page = tmp_path / "r.html"
    rc = main(["report", "two-site-h100", "--plan", "--train", "llama3-70b", *JOB, "--across", "pp", "-o", str(page)])
    assert rc == 0
    shown = html.unescape(page.read_text())
    pp = _work_block(run_cli("plan", "two-site-h100", "--model", "llama3-70b", *JOB, "--across", "pp",
                             check=True).stdout)
    dp = _work_block(run_cli("plan", "two-site-h100", "--model", "llama3-70b", *JOB, check=True).stdout)
    assert "pipeline stages across them" in pp[0] and pp[0] != dp[0]
    for line in pp:
        assert line in shown, line
    assert dp[0] not in shown


@pytest.mark.parametrize("spec, flags, said", [
    ("dgx-h100-superpod", ("--across", "pp"), "--across: applies to a region of several sites"),
    ("two-site-h100", ("--plan", "--across", "pp"), "--across: pp: a region's plan without --model times no job"),
    ("two-site-h100", ("--plan", "--train", "llama3-70b", "--layout", JOB[1], "--outer-every", "0"),
     "--outer-every: must be a whole number >= 1, got 0"),
    ("two-site-h100", ("--plan", "--train", "llama3-70b", "--layout", JOB[1], "--across", "outer"),
     "--outer-every: --across outer needs the outer synchronisation's period"),
])
def test_report_refuses_across_as_plan_does(tmp_path, spec, flags, said):
    out = tmp_path / "r.html"
    bad = run_cli("report", spec, *flags, "-o", str(out))
    plan_flags = [f if f != "--train" else "--model" for f in flags if f != "--plan"]
    planned = run_cli("plan", spec, *plan_flags, "--no-collectives")
    assert bad.returncode == planned.returncode == 2 and not out.exists()
    assert bad.stderr == planned.stderr and bad.stderr.startswith(f"error: {said}")
    assert len(bad.stderr.splitlines()) == 1


def _readme() -> str:
    return " ".join((ROOT / "README.md").read_text().split())  # one line: a quote may wrap


def test_the_readmes_calibrate_paragraph_says_the_nic_notes_compare_prints(capsys):
    # walk36 Left 5: the README's calibrate/compare paragraph did not say they print describe's NIC notes
    text = _readme()
    quoted = re.findall(r"`(note: [^`]*?) \.\.\.`", text)
    assert len(quoted) == 2, quoted
    rc, err = _err(capsys, ["compare", "nccl1453-h100-allreduce", "--gpu", "H100", "--nic-rate", "400 GB/s"])
    assert rc == 0
    notes = [x for x in err.splitlines() if x.startswith("note: the ")]
    for said in quoted:  # "note: the host link ... caps": the words either side of the elision are the CLI's
        head, _, tail = said.partition(" ... ")
        assert any(x.startswith(head) and tail in x for x in notes), said
    assert "pass --spec FILE, a spec giving server.nic_model" in notes[-1]
    assert "without `--spec` the note says to pass a spec giving `server.nic_model` or `server.pcie_bandwidth`" in text


def test_the_readmes_calibrate_paragraph_says_the_output_refusals(tmp_path, capsys):
    text = _readme()
    assert "`-o` takes a `.toml` name (`-o p.json` is one error line, `name it p.toml`, and nothing is written)" in text
    assert "`--json` with `-o -` is refused (both would print on stdout" in text
    out = tmp_path / "p.json"
    rc, err = _err(capsys, ["calibrate", "nccl1453-h100-allreduce", "--gpu", "H100", "-o", str(out)])
    assert rc == 2 and err.endswith("name it p.toml") and not out.exists()
    rc, err = _err(capsys, ["calibrate", "nccl1453-h100-allreduce", "--gpu", "H100", "-o", "-", "--json"])
    assert rc == 2 and "--json and -o - both print on stdout" in err
