"""The compiled engine and its pure-Python twin give the same answers, value for value."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scorer
from scorer import Cluster, EngineError
from scorer.model import HOSTNAME_LABEL as HOST
from scorer.model import Mode, Node, PodSetRequest, TopologyRequest
from scorer.request import GroupRequest
from tests.scorer.strategies import Scenario, gpu_scenarios, scenarios

ENGINES = scorer.engines()


def test_compiled_engine_is_built_and_active() -> None:
    # `make test` installs the extension; running the suite on the twin alone proves nothing.
    assert "compiled" in ENGINES
    assert scorer.IMPLEMENTATION == "compiled"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(scenarios(), gpu_scenarios()))
def test_compiled_equals_reference(case: Scenario) -> None:
    cluster = Cluster.build("default", case.levels, case.nodes)
    for view in (cluster.now, cluster.never):
        want = view.place(case.pod_sets, engine=ENGINES["reference"])
        got = view.place(case.pod_sets, engine=ENGINES["compiled"])
        assert got == want


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_engine_rejects_inconsistent_arrays(engine: str) -> None:
    cluster = Cluster.build("t", ("rack",), [Node("a", {"rack": "r"}, {"pods": 1})])
    view = cluster.now
    placements = view.place([PodSetRequest("p", 1, {}, TopologyRequest())], engine=ENGINES[engine])
    assert placements[0].fits
    if engine == "compiled":
        bad = GroupRequest(
            req_col=array("i", [5]),
            req_val=array("q", [1]),
            leader_val=array("q"),
            count=1,
            slice_size=1,
            requested_level=0,
            slice_level=0,
            inner_sizes=array("i", [0]),
            required=True,
            unconstrained=False,
            layer_levels=array("i"),
            layer_sizes=array("i"),
            check_nodes=False,
            class_excluded=array("b", [0]),
        )
        with pytest.raises(EngineError, match="out of range"):
            ENGINES["compiled"].place_group(view.tree, view.free, bad)


def test_a_scratch_overflow_is_an_engine_error_never_a_placement() -> None:
    """The compiled core's buffer guard raises; it used to reuse Kueue's "assumptions violated"
    status, which the decision admits with a warning."""
    from scorer import _core  # noqa: PLC0415 - the compiled module itself, for its test hook

    nodes = [Node(f"n{i}", {"rack": f"r{i % 4}", HOST: f"n{i}"}, {"pods": 1}) for i in range(16)]
    cluster = Cluster.build("t", ("rack", HOST), nodes, engine=ENGINES["compiled"])
    request = PodSetRequest("p", 8, {}, TopologyRequest(Mode.PREFERRED, "rack"))
    assert cluster.now.place([request])[0].fits
    _core._set_scratch_capacity(2)
    try:
        with pytest.raises(EngineError, match="working buffer overflow"):
            cluster.now.place([request])
    finally:
        _core._set_scratch_capacity(0)
    assert cluster.now.place([request])[0].fits
