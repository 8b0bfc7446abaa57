"""``topo plan A B --set A:KEY=VALUE`` sets a key on design A alone; ``--set KEY=VALUE`` still sets it on every SPEC
(plan78; walk34 Left 2: ``--set cluster.num_units=696`` on a GB200 and a B200 spec at once was refused by the B200's
fabric, so two designs of ~50k GPUs each needed two spec files)."""

import json
import shutil

from conftest import run_cli

from topo.spec.load import resolve_spec_path

H100, B200 = "dgx-h100-superpod", "dgx-b200-superpod"  # 4 scalable units each: 32 DGX x 8 GPUs = 256 GPUs a unit


def _gpus(*args):
    p = run_cli("plan", H100, B200, "--no-collectives", "--json", *args)
    assert p.returncode == 0, p.stderr
    return [d["num_gpus"] for d in json.loads(p.stdout)["designs"]]


def test_a_prefixed_set_reaches_one_design():
    assert _gpus() == [1024, 1024]
    assert _gpus("--set", f"{H100}:cluster.num_units=2") == [512, 1024]  # 2 x 256, B200 as the file gives
    assert _gpus("--set", f"{H100}:cluster.num_units=2", "--set", f"{B200}:cluster.num_units=3") == [512, 768]


def test_a_plain_set_still_reaches_every_design():
    assert _gpus("--set", "cluster.num_units=2") == [512, 512]
    # in the order given: the plain one, then the design's own
    assert _gpus("--set", "cluster.num_units=2", "--set", f"{B200}:cluster.num_units=1") == [512, 256]


def test_a_file_is_named_by_its_name_without_toml(tmp_path):
    path = tmp_path / "mine.toml"
    shutil.copy(resolve_spec_path(H100), path)
    p = run_cli("plan", str(path), B200, "--no-collectives", "--json", "--set", "mine:cluster.num_units=1")
    assert p.returncode == 0, p.stderr
    assert [d["num_gpus"] for d in json.loads(p.stdout)["designs"]] == [256, 1024]


def test_a_design_not_among_the_specs_is_one_line():
    p = run_cli("plan", H100, B200, "--set", "b200:cluster.num_units=2")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr == (f"error: --set: 'b200:cluster.num_units=2' names the design 'b200', which is not among the "
                        f"SPECs ('{H100}', '{B200}'); allowed: SPEC:KEY=VALUE with SPEC as given or a file's name "
                        "without .toml, or KEY=VALUE for every SPEC\n")
    p = run_cli("plan", H100, "--unset", "x:cluster.num_units")
    assert p.returncode == 2 and p.stderr.startswith("error: --unset: 'x:cluster.num_units' names the design 'x'")
