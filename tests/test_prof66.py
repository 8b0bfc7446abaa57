"""A calibrated profile reaches ``topo train`` (one site, ``--search``) and ``topo report`` (prof66, issue 29;
walk25 left 2): the step's collectives and the report's are priced by the engine exactly as ``topo estimate
--profile`` prices them, and the output says which profile timed them."""

import json
import os
import re

import pytest

from conftest import run_cli

SPEC = ("dgx-h100-superpod", "--set", "cluster.num_units=1")  # 256 H100 on InfiniBand NDR, two tiers
# One DP group of 16 ranks, no sharding (one all-reduce of the fp32 gradients), not overlapped, alone on the
# fabric: the step's exposed DP time is that all-reduce's time, calls x one call.
JOB = ("--model", "llama3-8b", "--tp", "1", "--dp", "16", "--gpus", "16", "--global-batch", "32",
       "--dp-sharding", "none", "--overlap", "dp=off", "--no-contention")


def _profile(tmp_path, name: str, base: str, efficiency: float):
    """A profile file as ``topo calibrate`` writes it: a base and the network efficiency it overrides."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[profile]\nkind = "user"\nname = "{name}"\nbase = "{base}"\n'
                    f'[network_efficiency]\nvalue = {efficiency}\nsource = "a test"\nfitted = true\n'
                    f'fitted_on = "a test log"\n')
    return str(path)


def _train(*extra):
    out = run_cli("train", *SPEC, *JOB, "--json", *extra, check=True)
    return json.loads(out.stdout), out.stderr


def _estimate_s(size_bytes: int, *extra) -> tuple[float, str]:
    out = run_cli("estimate", *SPEC, "-c", "all_reduce", "-g", "16", "-b", str(size_bytes), "-e", str(size_bytes),
                  "--json", *extra, check=True)
    doc = json.loads(out.stdout)
    return doc["results"][0]["time_s"], doc["profile"]


def test_a_calibrated_network_efficiency_moves_the_steps_dp_time_as_it_moves_estimates_all_reduce(tmp_path):
    half = _profile(tmp_path, "half-net", "nccl", 0.5)  # based on the fabric's own (hopper+infiniband_ndr)
    base, _ = _train()
    mine, _ = _train("--profile", half)
    assert (base["profile"], mine["profile"]) == ("hopper+infiniband_ndr", "half-net")
    (dp,) = [c for c in base["comm"] if c["dim"] == "dp"]
    (dp_mine,) = [c for c in mine["comm"] if c["dim"] == "dp"]
    assert dp["collective"] == "all_reduce" and dp["size_bytes"] == dp_mine["size_bytes"]
    size, calls = int(dp["size_bytes"]), dp["calls_per_step"]
    t_base, p_base = _estimate_s(size)
    t_mine, p_mine = _estimate_s(size, "--profile", half)
    assert (p_base, p_mine) == ("hopper+infiniband_ndr", "half-net")
    assert t_mine > 1.2 * t_base  # the network-bound all-reduce slows with half the usable network rate
    # the same engine call: the step's exposed DP time is calls x estimate's time, with and without the profile
    assert base["breakdown_s"]["dp"] == pytest.approx(calls * t_base, rel=1e-9)
    assert mine["breakdown_s"]["dp"] == pytest.approx(calls * t_mine, rel=1e-9)
    assert mine["breakdown_s"]["dp"] - base["breakdown_s"]["dp"] == pytest.approx(calls * (t_mine - t_base),
                                                                                 rel=1e-9)
    assert mine["breakdown_s"]["compute"] == base["breakdown_s"]["compute"]


def test_the_text_and_the_search_say_which_profile_timed_the_step(tmp_path):
    half = _profile(tmp_path, "half-net", "nccl", 0.5)
    text = run_cli("train", *SPEC, *JOB, "--profile", half, check=True).stdout
    assert "collectives priced with profile half-net (--profile to change)" in text
    plain = run_cli("train", *SPEC, *JOB, check=True).stdout
    assert "collectives priced with profile hopper+infiniband_ndr" in plain
    args = ("train", *SPEC, "--model", "llama3-8b", "--gpus", "16", "--global-batch", "32", "--search", "--top", "2")
    found = json.loads(run_cli(*args, "--json", "--profile", half, check=True).stdout)
    assert found["profile"] == "half-net" and {r["profile"] for r in found["ranked"]} == {"half-net"}
    again = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert again["profile"] == "hopper+infiniband_ndr"
    assert found["ranked"][0]["breakdown_s"]["dp"] > again["ranked"][0]["breakdown_s"]["dp"]


def test_a_profile_fitted_on_another_network_is_noted_as_estimate_notes_it(tmp_path):
    roce = _profile(tmp_path, "roce-cal", "hopper+roce", 1.0)
    _, said = _train("--profile", roce)
    est = run_cli("estimate", *SPEC, "-c", "all_reduce", "-g", "16", "--size", "1G", "--profile", roce, check=True)
    (line,) = [x for x in est.stderr.splitlines() if "fitted on a hopper+roce cluster" in x]
    assert line in said.splitlines()


def _cell(html: str, column: str) -> list[str]:
    """The comparison table's cells under ``column``, one per spec."""
    table = html[html.index("busbw, cluster, 1 GiB") - 400:]
    table = table[:table.index("</table>")]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in table.split("<tr>")[2:]]
    heads = heads[-len(rows[0]):]  # the table's own heads (the slice may start inside an earlier table)
    return [r[heads.index(column)] for r in rows]


def test_the_reports_busbw_is_estimates_with_the_same_profile(tmp_path):
    half = _profile(tmp_path, "half-net", "nccl", 0.5)
    out = tmp_path / "r.html"
    args = ("report", "dgx-h100-superpod", "dgx-h100-superpod", "--set", "cluster.num_units=2", "-o", str(out))
    run_cli(*args, "--profile", half, check=True)
    html = out.read_text()
    assert html.count('cost profile</th><td class="l">half-net') == 2
    est = run_cli("estimate", "dgx-h100-superpod", "--set", "cluster.num_units=2", "-c", "all_reduce", "--size",
                  "1G", "--json", "--profile", half, check=True)
    busbw = json.loads(est.stdout)["results"][0]["busbw_Bps"] / 1e9
    assert _cell(html, "busbw, cluster, 1 GiB") == [f"{busbw:.1f} GB/s"] * 2
    run_cli(*args, "--force", check=True)
    own = _cell(out.read_text(), "busbw, cluster, 1 GiB")
    assert own != [f"{busbw:.1f} GB/s"] * 2  # the fabric's own profile gives another figure


@pytest.mark.parametrize("command", ["train", "report"])
def test_a_bad_profile_is_one_line(tmp_path, command):
    bad = tmp_path / "bad.toml"
    bad.write_text('[profile]\nkind = "user"\nbase = [\n')
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    rest = (("train", *SPEC, *JOB) if command == "train"
            else ("report", *SPEC, "-o", str(tmp_path / "r.html")))
    for given, said in ((str(tmp_path / "none.toml"), "no such profile file"),
                        (str(fifo), "is not a regular file (a named pipe)"), (str(bad), "invalid TOML"),
                        ("nosuch+thing", "")):
        out = run_cli(*rest, "--profile", given)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
        assert said in out.stderr and out.stderr.startswith("error: ")
    assert not (tmp_path / "r.html").exists()
