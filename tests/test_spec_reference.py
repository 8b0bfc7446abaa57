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
