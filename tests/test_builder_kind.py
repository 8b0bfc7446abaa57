"""Each builder builds only its own fabric kind: handed a spec of another kind it refuses with a clean error."""

import pytest

from conftest import spec_dict
from topo import TopoError, build_fabric, fat_tree, rail_only, rail_optimized, spec_from_dict

BUILDERS = {"fat_tree": fat_tree, "rail_optimized": rail_optimized, "rail_only": rail_only}


@pytest.mark.parametrize("builder", sorted(BUILDERS))
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_builder_refuses_another_kind(builder, kind):
    spec = spec_from_dict(spec_dict(kind=kind))
    if builder == kind:
        f = BUILDERS[builder](spec)
        assert f.layout.kind == kind == build_fabric(spec).layout.kind
        return
    with pytest.raises(TopoError) as e:
        BUILDERS[builder](spec)
    assert e.value.key == "fabric.kind"
    assert builder in e.value.message and repr(kind) in e.value.message
