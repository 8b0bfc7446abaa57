"""``topo report A B --set A:KEY=VALUE`` sets the key on design A alone, as ``topo plan`` takes it (walk43,
docs/calibration-findings.md section 440): a lab comparing 512 H100 (two 256-GPU scalable units) with 8 GB200 NVL72
racks learnt ``--set SPEC:KEY`` from ``topo plan``, and ``topo report`` said "dgx-h100-superpod:cluster: unknown key".
DGX SuperPOD H100 scalable units hold 32 DGX H100 of 8 GPUs (256 GPUs, the bundled spec's source), GB200 NVL72 racks
72 GPUs."""

import re

from conftest import run_cli

from topo.report import build_reports

H100, GB200 = "dgx-h100-superpod", "gb200-nvl72-superpod"


def test_each_design_takes_its_own_overrides():
    h, g = build_reports([H100, GB200], {H100: ["cluster.num_units=2"], GB200: ["cluster.num_units=8"]},
                         sizes=("1G", "1G", 2), extra_algorithms=[])
    assert (h.inventory.num_gpus, g.inventory.num_gpus) == (2 * 32 * 8, 8 * 72)
    assert (h.overrides, g.overrides) == (["cluster.num_units=2"], ["cluster.num_units=8"])
    (one,) = build_reports([H100], ["cluster.num_units=1"], sizes=("1G", "1G", 2), extra_algorithms=[])
    assert one.inventory.num_gpus == 256  # a plain list: every spec's, as before


def test_the_command_line_takes_spec_prefixed_sets(tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", H100, GB200, "--set", f"{H100}:cluster.num_units=2", "-o", str(out), check=True)
    text = re.sub(r"<[^>]+>", " ", out.read_text())
    # the spec's label: "bundled spec NAME (its path) --set ..." (the path shown where the bundled file sits)
    assert re.search(rf"bundled spec {H100}( \([^)]*\))? --set cluster.num_units=2\s+cost profile", text)
    assert re.search(rf"bundled spec {GB200}( \([^)]*\))?\s+cost profile", text)
    err = run_cli("report", H100, GB200, "--set", "dgx-h200:cluster.num_units=2", "-o", str(out)).stderr.strip()
    assert err.startswith("error: --set: 'dgx-h200:cluster.num_units=2' names the design 'dgx-h200', which is not "
                          "among the SPECs")
