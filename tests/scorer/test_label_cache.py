"""Remembered nodeSelector/affinity exclusions give the answers a fresh view gives."""

from __future__ import annotations

from array import array

from scorer import Cluster
from scorer.model import (
    HOSTNAME_LABEL,
    Mode,
    Node,
    PodSetRequest,
    SelectorRequirement,
    SelectorTerm,
    TopologyRequest,
)

LEVELS = ("rack", HOSTNAME_LABEL)


def nodes() -> list[Node]:
    return [
        Node(
            f"n{i}",
            {"rack": f"r{i % 2}", HOSTNAME_LABEL: f"n{i}", "pool": "a" if i < 3 else "b"},
            {"cpu": 8000, "pods": 110},
        )
        for i in range(6)
    ]


def pod_set(selector: dict[str, str], affinity: tuple[SelectorTerm, ...] | None = None) -> PodSetRequest:
    topology = TopologyRequest(Mode.REQUIRED, "rack")
    return PodSetRequest("main", 3, {"cpu": 4000}, topology, node_selector=selector, affinity=affinity)


def test_a_selector_is_answered_alike_however_often_and_on_every_generation() -> None:
    cluster = Cluster.build("t", LEVELS, nodes())
    not_n0 = (SelectorTerm((SelectorRequirement(HOSTNAME_LABEL, "NotIn", ("n0",)),)),)
    asks = [pod_set({"pool": "a"}), pod_set({"pool": "b"}), pod_set({}, not_n0), pod_set({"pool": "a"})]
    fresh = [Cluster.build("t", LEVELS, nodes()).now.place([p])[0] for p in asks]
    assert [cluster.now.place([p])[0] for p in asks] == fresh
    assert len(cluster.now.label_cache) == 3, "one entry per distinct selector"
    later = cluster.with_free(array("q", cluster.now.free), generation=2)
    assert later.now.label_cache is cluster.now.label_cache, "a usage generation shares the tree's cache"
    assert [later.now.place([p])[0] for p in asks] == fresh
    assert fresh[0].fits != fresh[1].fits or fresh[0].assignment != fresh[1].assignment
