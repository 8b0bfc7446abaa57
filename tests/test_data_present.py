"""The reference data travels with the project, and its absence is a clean failure (issue 8: a traceback from
benchmarks/accuracy.py, and tests that skipped silently)."""

import os
import subprocess
import sys

from conftest import ROOT


def test_reference_data_is_in_the_project(reference):
    for name in ("nccl_tests_measurements.csv", "clusters.json", "hardware.md"):
        assert (reference / name).is_file()


def test_accuracy_without_data_is_one_clean_line(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accuracy.py"), "--quick"],
                          capture_output=True, text=True, env={**os.environ, "TOPO_DATA_DIR": str(tmp_path / "none")})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {tmp_path / 'none' / 'nccl_tests_measurements.csv'}: cannot read")


def test_accuracy_with_a_wrong_file_is_one_clean_line(tmp_path):
    (tmp_path / "nccl_tests_measurements.csv").write_text("a,b\n1,2\n")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accuracy.py"), "--quick"],
                          capture_output=True, text=True, env={**os.environ, "TOPO_DATA_DIR": str(tmp_path)})
    assert proc.returncode == 2 and "missing columns: busbw_GBps, collective" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_the_missing_data_fixture_fails_not_skips(tmp_path):
    test = tmp_path / "test_x.py"
    test.write_text("def test_uses(reference):\n    pass\n")
    for helper in ("conftest.py", "cli_runner.py"):  # the conftest and the CLI runner it imports
        (tmp_path / helper).write_text((ROOT / "tests" / helper).read_text())
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "TOPO_DATA_DIR": str(tmp_path / "none")})
    assert proc.returncode == 1 and "reference data not found" in proc.stdout and "skipped" not in proc.stdout


def test_every_package_data_file_is_shipped_by_pyproject():
    # a plain `pip install .` ships only the patterns of [tool.setuptools.package-data] (issue 8: no bundled specs)
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["topo"]
    data = ROOT / "topo" / "data"
    files = [p.relative_to(ROOT / "topo").as_posix() for p in data.rglob("*") if p.is_file()
             and "__pycache__" not in p.parts]
    assert "data/hardware/host_links.toml" in files
    for f in files:
        assert any(fnmatch.fnmatch(f, pat.replace("**/", "*/")) for pat in patterns), f"{f} would not be installed"


def test_bundled_specs_ship_once_from_topologies():
    # issue 19: the design card's top-level topologies/ folder is the only copy; the wheel maps it into the package
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setup["package-dir"]["topo.topologies"] == "topologies"
    assert setup["package-data"]["topo.topologies"] == ["*.toml"]
    assert sorted((ROOT / "topologies").glob("*.toml")) and not (ROOT / "topo" / "data" / "topologies").exists()


def test_every_package_is_listed_in_pyproject():
    # the packages are listed by hand (the mapped topologies/ folder rules out find:): a new one must be added
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "topo").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found == listed - {"topo.topologies"}


def test_an_install_without_bundled_specs_says_so(tmp_path):
    # issue 8: a wheel without package data listed nothing with exit status 0 and describe failed obscurely.
    # A copy of the package without its data folder stands for such an install.
    import shutil

    pkg = tmp_path / "topo"
    shutil.copytree(ROOT / "topo", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for args in (["list"], ["describe"]):
        proc = subprocess.run([sys.executable, "-m", "topo", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "this installation of topo is incomplete" in proc.stderr and proc.stderr.count("\n") == 1
