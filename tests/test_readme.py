"""The README's set-up commands are the ones CI runs, and its Python tour runs."""

import re

from conftest import ROOT


def readme():
    return (ROOT / "README.md").read_text()


def setup_commands():
    blocks = re.findall(r"```sh\n(.*?)```", readme(), flags=re.S)
    return [b.strip() for b in blocks[:2]]


def test_readme_starts_with_the_two_commands_and_ci_runs_them():
    main_job, tests = setup_commands()
    assert "topo describe" in main_job
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert main_job in ci and tests in ci


def test_readme_python_tour_runs():
    code = re.findall(r"```python\n(.*?)```", readme(), flags=re.S)
    assert code
    for block in code:
        exec(compile(block, "README.md", "exec"), {})
