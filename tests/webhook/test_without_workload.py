"""A state without one admitted Workload (what the tracker predicts its admission on) is a
ledger delta of the state's own snapshots, and equals a state built without that Workload."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.model import HOSTNAME_LABEL, PODS, Mode, PodSetRequest, TopologyRequest
from tests.webhook.test_workload_usage import BLOCK, GPU, RACK, gpu_node, kueue
from webhook.state.cluster import ClusterState, build_state
from webhook.state.workloads import AssignedUse

HOSTS = [gpu_node(f"n{i}", f"r{i // 2}", f"b{i // 4}") for i in range(8)]
OBJECTS = [
    *HOSTS,
    *kueue("hosts", [BLOCK, RACK, HOSTNAME_LABEL], "by-host"),
    *kueue("racks", [BLOCK, RACK], "by-rack"),
]
REQUESTS = [PodSetRequest("w", 4, {GPU: 2}, TopologyRequest(Mode.REQUIRED, RACK))]


@st.composite
def uses(draw: st.DrawFn) -> tuple[AssignedUse, ...]:
    found = []
    for _ in range(draw(st.integers(0, 8))):
        workload = ("team", f"w{draw(st.integers(0, 3))}")
        i, count = draw(st.integers(0, 8)), draw(st.integers(1, 3))  # n8: a host the view lacks
        requests = ((GPU, 2 * count), (PODS, count))
        if draw(st.booleans()):
            found.append(AssignedUse("by-host", (HOSTNAME_LABEL,), (f"n{i}",), requests, workload))
        else:
            found.append(
                AssignedUse("by-rack", (BLOCK, RACK), (f"b{i // 4}", f"r{i // 2}"), requests, workload)
            )
    return tuple(found)


def _snapshots(state: ClusterState) -> dict:
    return {key: state.flavor_snapshot(flavor, state.topologies[flavor.topology_name or ""])
            for key, flavor in (((f.name,), f) for f in state.flavors.values())}  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(uses(), st.integers(0, 3), st.booleans())
def test_the_delta_equals_a_state_built_without_the_workload(
    assigned: tuple[AssignedUse, ...], which: int, built_first: bool
) -> None:
    state = build_state(OBJECTS, generation=3, assigned=assigned)
    if built_first:
        state.prepare()
    workload = ("team", f"w{which}")
    without = state.without_workload(workload)
    fresh = replace(state, assigned=tuple(u for u in assigned if u.workload != workload), _snapshots={})
    mine, theirs = _snapshots(without), _snapshots(fresh)
    for key, cluster in mine.items():
        other = theirs[key]
        assert cluster.now.tree is _snapshots(state)[key].now.tree, "the origin's tree, not a rebuild"
        assert list(cluster.now.free) == list(other.now.free), key
        assert list(cluster.never.free) == list(other.never.free), key
        assert cluster.now.place(REQUESTS) == other.now.place(REQUESTS)
    assert without.assigned == fresh.assigned
    if not any(u.workload == workload for u in assigned):
        assert without is state
