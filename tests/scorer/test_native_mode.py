"""The native mode's choices where they differ from Kueue's BestFit, on hand-made racks."""

from __future__ import annotations

import pytest

from scorer.model import Node, Taint
from scorer.native import NativeRequest, native_engines, place_native

ENGINES = sorted(native_engines())
GPU = "nvidia.com/gpu"


def _rack(rack: str, hosts: int) -> list[Node]:
    alloc = {"cpu": 32000, "memory": 256 << 30, "pods": 110, GPU: 8}
    return [Node(f"{rack}-h{i}", {"rack": rack}, alloc) for i in range(hosts)]


@pytest.mark.parametrize("engine", ENGINES)
def test_equal_racks_are_a_tie_the_scheduler_breaks_at_random(engine: str) -> None:
    req = NativeRequest("g", 2, 2, {GPU: 8, "cpu": 1000}, "rack")
    found = place_native(_rack("a", 2) + _rack("b", 2), req, None, False, native_engines()[engine])
    assert found.fits and found.domain == "a" and found.tied == ("a", "b")


@pytest.mark.parametrize("engine", ENGINES)
def test_the_fuller_rack_wins_not_the_tightest(engine: str) -> None:
    """Rack a has more hosts (Kueue's BestFit would take the smaller b); a is busier in cpu and
    memory, so MostAllocated prefers it."""
    nodes = _rack("a", 3) + _rack("b", 2)
    usage = {"a-h0": {"cpu": 30000, "memory": 200 << 30, "pods": 1}}
    req = NativeRequest("g", 2, 2, {GPU: 8, "cpu": 1000}, "rack")
    found = place_native(nodes, req, usage, False, native_engines()[engine])
    a, b = sorted(found.domains, key=lambda d: d.value)
    assert a.fit_score > b.fit_score and found.domain == "a" and found.tied == ("a",)


@pytest.mark.parametrize("engine", ENGINES)
def test_pods_without_requests_are_scored_as_100m_and_200mi(engine: str) -> None:
    req = NativeRequest("g", 10, 1, {}, "rack")
    node = Node("n", {"rack": "a"}, {"cpu": 1000, "memory": 2000 * 1024 * 1024, "pods": 10})
    (d,) = place_native([node], req, None, True, native_engines()[engine]).domains
    assert d.placed == 10 and d.fit_score == 100  # 10 x 100m of 1 cpu, 10 x 200Mi of 2000Mi


@pytest.mark.parametrize("engine", ENGINES)
def test_cordoned_and_tainted_nodes_count_in_the_score_but_take_no_pod(engine: str) -> None:
    alloc = {"cpu": 8000, "memory": 64 << 30, "pods": 110, GPU: 8}
    nodes = [
        Node("a0", {"rack": "a"}, alloc),
        Node("a1", {"rack": "a"}, alloc, unschedulable=True),
        Node("a2", {"rack": "a"}, alloc, (Taint("node.kubernetes.io/not-ready", "NoSchedule"),)),
    ]
    req = NativeRequest("g", 2, 2, {GPU: 8}, "rack")
    now = place_native(nodes, req, None, False, native_engines()[engine])
    never = place_native(nodes, req, None, True, native_engines()[engine])
    assert not now.fits and now.domains[0].capacity == 1
    assert never.fits and never.domains[0].capacity == 3


def _pod(gpus: int) -> dict[str, int]:
    return {GPU: gpus, "cpu": 4000 * gpus, "memory": (32 << 30) * gpus}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("order", "fits"), [((8, 4, 4, 4), True), ((4, 4, 4, 8), False)])
def test_pods_of_several_shapes_are_placed_one_by_one_in_queue_order(
    order: tuple[int, ...], fits: bool, engine: str
) -> None:
    """Three 8-GPU hosts: an 8-GPU pod first takes one host, the three 4-GPU pods share the rest;
    last, it finds none free: LeastAllocated has spread the 4-GPU pods over all three hosts."""
    req = NativeRequest("g", 4, 4, _pod(order[0]), "rack", pods=tuple(_pod(g) for g in order))
    found = place_native(_rack("a", 3), req, None, True, native_engines()[engine])
    assert found.fits is fits
    assert found.domains[0].placed == (4 if fits else 3)
