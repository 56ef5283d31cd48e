"""The compiled engine and its pure-Python twin give the same answers, value for value."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scorer
from scorer import Cluster
from scorer.model import Node, PodSetRequest, TopologyRequest
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
        with pytest.raises(ValueError, match="out of range"):
            ENGINES["compiled"].place_group(view.tree, view.free, bad)
