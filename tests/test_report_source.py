"""Where ``topo report``'s page says its spec came from (topo.report.build._source): a bundled spec by its name as
errors name it (topo.spec.load.display_path, walk14), with the checkout's ``topologies/`` path only when that
folder is below the working folder; a wheel's page once said ``(topologies/NAME.toml)``, a folder the user has
not got (fix49, from a new-user walk)."""

import os
import shutil
import subprocess
import sys

from conftest import ROOT
from topo.report.build import _source
from topo.spec import load_spec

CODE = ("from topo.report.build import _source; from topo.spec import load_spec; "
        "print(_source('dgx-h100-superpod', load_spec('dgx-h100-superpod'), []))")


def test_a_checkout_below_the_working_folder_shows_the_name_and_the_path(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert _source("dgx-h100-superpod", load_spec("dgx-h100-superpod"), []) == (
        "bundled spec dgx-h100-superpod (topologies/dgx-h100-superpod.toml)")


def test_a_bundled_spec_outside_the_working_folder_is_its_name_alone(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert _source("dgx-h100-superpod", load_spec("dgx-h100-superpod"), ["fabric.tiers[0].oversubscription=2"]) == (
        "bundled spec dgx-h100-superpod --set fabric.tiers[0].oversubscription=2")


def test_a_wheels_bundled_spec_is_its_name_alone_also_from_a_venv_below_the_working_folder(tmp_path):
    site = tmp_path / ".venv" / "lib" / "site-packages"  # as walk14's test: where a wheel puts the package
    shutil.copytree(ROOT / "topo", site / "topo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "topologies", site / "topo" / "topologies")
    p = subprocess.run([sys.executable, "-c", CODE], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "bundled spec dgx-h100-superpod\n"
