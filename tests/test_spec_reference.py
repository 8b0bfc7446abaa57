"""docs/spec-reference.md is generated from the spec model and must stay current (issue 8)."""

from conftest import ROOT
from pydantic import BaseModel
from topo.spec.model import Spec
from topo.spec.reference import SECTIONS, field_docs, spec_reference


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
            assert field_docs(model).get(name)  # a field without a docstring would be undocumented
    assert "| `radix` | integer (>= 1, <= 4,096) | required |" in text
    assert ('| `nic_rate` | bandwidth with its unit, e.g. "400 Gb/s", "450 GB/s" (<= 9 TB/s) | `"400 Gb/s"` |'
            in text)  # the bound: 10 x the catalog's fastest GPU link (topo.spec.model.max_link_Bps)
    assert '| `latency` | time with its unit, e.g. "130 ns", "1.5 us" (<= 1 ms) | `"0 s"` |' in text


class _Example(BaseModel):
    """Not a field's docstring."""

    documented: int = 1
    """Says what it is,
        on two lines."""
    bare: int = 2
    after_a_comment: int = 3  # a comment is no docstring


def test_field_docs_reads_the_string_under_each_field():
    assert field_docs(_Example) == {"documented": "Says what it is,\non two lines."}


def test_a_field_without_a_docstring_stops_the_reference(monkeypatch):
    import pytest

    import topo.spec.reference as ref

    monkeypatch.setattr(ref, "SECTIONS", [("[example]", _Example)])
    with pytest.raises(ValueError, match="_Example.bare has no docstring"):
        ref.spec_reference()


def test_the_spec_models_do_not_read_their_source_when_imported():
    # pydantic's use_attribute_docstrings ran inspect.getsource on every spec model at import: ~90 ms of every
    # command's start-up (python -X importtime, topo.spec.model 124 -> 32 ms); the reference reads them instead
    assert Spec.model_fields["name"].description is None
    assert field_docs(Spec)["name"].startswith("The cluster's name")


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


def test_host_cpu_lists_every_cpu_of_the_catalog():
    # walk10: the field's doc listed four of host_cpu.toml's five CPUs (xeon_6776p, DGX B300's, missing), so
    # docs/spec-reference.md did not name a value the spec takes and README lists
    import tomllib

    cpus = tomllib.loads((ROOT / "topo" / "data" / "compute" / "host_cpu.toml").read_text())["cpu"]
    doc = field_docs(Spec.model_fields["server"].annotation)["host_cpu"]
    assert len(cpus) >= 5
    for key in cpus:
        assert f"``{key}``" in doc, key
