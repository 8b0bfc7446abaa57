"""Typed errors: code that must tell failures apart catches a type, never reads a message's text."""

import pytest

import topo
from topo.engine.estimate import estimate
from topo.errors import AlgorithmUnavailable, ProtocolUnavailable, TopoError


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_the_one_algorithm_asked_for_that_cannot_run_is_typed_with_its_reason(pod):
    with pytest.raises(AlgorithmUnavailable) as err:
        estimate(pod, "all_reduce", "1G", gpus=16, algorithm="sharp")
    e = err.value
    assert isinstance(e, TopoError) and e.key == "algorithm" and not isinstance(e, ProtocolUnavailable)
    assert e.message == f"sharp cannot run here: {e.reason}" and "sharp" not in e.reason.split()[0]


def test_a_pinned_protocol_no_candidate_runs_is_keyed_by_the_protocol(pod):
    with pytest.raises(ProtocolUnavailable) as err:
        estimate(pod, "all_reduce", "1G", gpus=16, algorithm="nvls_tree", protocol="LL")
    assert err.value.key == "algorithm" and "Simple" in err.value.reason
    # among several candidates: the error names the protocol as what is at fault
    with pytest.raises(TopoError) as err:
        estimate(pod, "all_reduce", "1G", gpus=16, algorithm="nvls,nvls_tree", protocol="LL")
    assert err.value.key == "protocol"
    # no candidate left out for its protocol: the algorithms are at fault
    with pytest.raises(TopoError) as err:
        estimate(pod, "all_reduce", "1G", gpus=16, algorithm="nvls,sharp")
    assert err.value.key == "algorithm"


def test_with_source_keeps_the_type():
    e = AlgorithmUnavailable("x cannot run here: why", key="algorithm", reason="why").with_source("f.toml")
    assert isinstance(e, AlgorithmUnavailable) and e.reason == "why"
    assert e.line() == "f.toml: algorithm: x cannot run here: why"
