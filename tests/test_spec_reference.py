"""docs/spec-reference.md is generated from the spec model and must stay current (issue 8)."""

from conftest import ROOT
from topo.spec.model import Spec
from topo.spec.reference import SECTIONS, spec_reference


def test_committed_reference_equals_the_generated_one():
    committed = (ROOT / "docs" / "spec-reference.md").read_text()
    assert committed == spec_reference(), ("docs/spec-reference.md is stale: run "
                                           "python -m topo.spec.reference docs/spec-reference.md")


def test_every_field_of_every_section_is_in_the_reference():
    text = spec_reference()
    models = [m for _, m in SECTIONS]
    assert Spec in models
    for model in models:
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in text
            assert field.description  # a field without a docstring would be undocumented
    assert "| `radix` | integer (>= 1, <= 4,096) | required |" in text
    assert '| `nic_rate` | bandwidth with its unit, e.g. "400 Gb/s", "450 GB/s" | `"400 Gb/s"` |' in text


def test_help_prints_usage_and_writes_no_file(tmp_path, capsys, monkeypatch):
    # Review finding: `python -m topo.spec.reference --help` wrote the reference to a file named "--help" (one was
    # committed at the root of the repository)
    from topo.spec.reference import main

    monkeypatch.chdir(tmp_path)
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m topo.spec.reference [FILE]")
    assert main(["--bogus"]) == 2 and main(["a.md", "b.md"]) == 2
    assert "expected one output file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    assert main(["ref.md"]) == 0 and (tmp_path / "ref.md").read_text() == spec_reference()
