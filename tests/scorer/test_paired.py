"""A decision's two placements (now, and when empty) go to the engine as one call when they can.

Equality with two separate placements is held by the differential tests; these say when the
paired call is taken, so a change that silently falls back (and gives back the GIL twice per
decision, `make bench-threads`) fails here.
"""

from __future__ import annotations

from array import array
from collections import Counter

import scorer
from scorer import Cluster
from scorer.model import HOSTNAME_LABEL as HOST
from scorer.model import Mode, Node, PodSetRequest, TopologyRequest
from scorer.request import GroupRequest, RawResult
from scorer.tree import Tree


class CountingEngine:
    """The default engine, counting the calls of each kind."""

    def __init__(self) -> None:
        self._engine = scorer.default_engine()
        self.NAME = self._engine.NAME
        self.calls: Counter[str] = Counter()

    def place_group(self, tree: Tree, free: array[int], request: GroupRequest) -> RawResult:
        self.calls["single"] += 1
        return self._engine.place_group(tree, free, request)

    def place_group_both(
        self, tree: Tree, free: array[int], other: array[int], request: GroupRequest
    ) -> tuple[RawResult, RawResult]:
        self.calls["pair"] += 1
        return self._engine.place_group_both(tree, free, other, request)


def nodes(cordoned: int = 0) -> list[Node]:
    return [
        Node(
            f"n{i}",
            {"rack": f"r{i % 2}", HOST: f"n{i}"},
            {"pods": 4, "cpu": 8000},
            unschedulable=i < cordoned,
        )
        for i in range(8)
    ]


WORKERS = PodSetRequest("w", 4, {"cpu": 1000}, TopologyRequest(Mode.REQUIRED, "rack"))


def test_one_podset_on_a_shared_tree_is_one_engine_call() -> None:
    engine = CountingEngine()
    cluster = Cluster.build("t", ("rack", HOST), nodes(), engine=engine)
    now, never = cluster.place_now_and_never([WORKERS])
    assert engine.calls == Counter(pair=1)
    assert now[0].fits and never[0].fits


def test_a_leader_and_its_workers_are_one_group_and_one_call() -> None:
    engine = CountingEngine()
    cluster = Cluster.build("t", ("rack", HOST), nodes(), engine=engine)
    grouped = TopologyRequest(Mode.REQUIRED, "rack", group="g")
    pod_sets = [
        PodSetRequest("leader", 1, {"cpu": 1000}, grouped),
        PodSetRequest("w", 3, {"cpu": 1000}, grouped),
    ]
    now, never = cluster.place_now_and_never(pod_sets)
    assert engine.calls == Counter(pair=1)
    assert [p.name for p in now] == ["leader", "w"] == [p.name for p in never]


def test_views_on_different_trees_are_placed_one_by_one() -> None:
    """A cordoned node is away from ``now`` but in ``never``: two trees, two calls."""
    engine = CountingEngine()
    cluster = Cluster.build("t", ("rack", HOST), nodes(cordoned=1), engine=engine)
    assert cluster.now.tree is not cluster.never.tree
    cluster.place_now_and_never([WORKERS])
    assert engine.calls == Counter(single=2)


def test_independent_podsets_are_placed_one_by_one() -> None:
    engine = CountingEngine()
    cluster = Cluster.build("t", ("rack", HOST), nodes(), engine=engine)
    cluster.place_now_and_never([WORKERS, PodSetRequest("other", 2, {"cpu": 1000}, TopologyRequest())])
    assert engine.calls == Counter(single=4)
