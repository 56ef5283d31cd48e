"""Node events edit the published state in place of a rebuild: after any sequence of node and pod
events the published state equals a fresh build of what the mirror holds, in everything a
decision reads (nodes, usage, every snapshot's trees, free capacity and placements)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.engines import engines
from scorer.model import HOSTNAME_LABEL, Mode, PodSetRequest, TopologyRequest
from tests.webhook.test_live import pod, synced_mirror, topology
from webhook.live.mirror import Mirror
from webhook.state.cluster import ClusterState

DEFAULT = ("policy-default", ("rack", HOSTNAME_LABEL))
REQUESTS = [
    PodSetRequest("a", 3, {"nvidia.com/gpu": 2}, TopologyRequest(Mode.REQUIRED, "rack")),
    PodSetRequest("b", 5, {"nvidia.com/gpu": 1}, TopologyRequest(Mode.UNCONSTRAINED)),
]


def node_object(name: str, rack: str, gpus: int, version: int, *, ready: bool, cordoned: bool,
                tainted: bool, host: str | None = None) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"unschedulable": cordoned}
    if tainted:
        spec["taints"] = [{"key": "gpu", "effect": "NoSchedule", "value": "true"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": str(version),
            "labels": {"rack": rack, HOSTNAME_LABEL: host or name, "pool": "gpu"},
        },
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


NODE_EVENT = st.fixed_dictionaries(
    {
        "kind": st.just("nodes"),
        "name": st.sampled_from([f"n{i}" for i in range(8)]),
        "deleted": st.integers(0, 5).map(lambda i: i == 0),
        "rack": st.sampled_from(["r0", "r1", "r2", "r9"]),  # r9: a new domain value
        "gpus": st.sampled_from([0, 4, 8]),
        "ready": st.integers(0, 4).map(lambda i: i > 0),
        "cordoned": st.integers(0, 4).map(lambda i: i == 0),
        "tainted": st.integers(0, 3).map(lambda i: i == 0),
        "shared_host": st.integers(0, 9).map(lambda i: i == 0),
    }
)
POD_EVENT = st.fixed_dictionaries(
    {
        "kind": st.just("pods"),
        "name": st.sampled_from([f"p{i}" for i in range(6)]),
        "node": st.sampled_from([f"n{i}" for i in range(8)]),
        "gpus": st.sampled_from([1, 2, 4]),
        "deleted": st.booleans(),
    }
)
HISTORY = st.lists(st.lists(st.one_of(NODE_EVENT, POD_EVENT), min_size=1, max_size=6), min_size=1, max_size=5)


def start() -> Mirror:
    mirror = synced_mirror()
    mirror.default_levels = lambda _state: [DEFAULT]
    mirror.replace("topologies", [topology()])
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    mirror.replace(
        "resourceflavors", [flavor | {"spec": {"topologyName": "default", "nodeLabels": {"pool": "gpu"}}}]
    )
    nodes = [
        node_object(f"n{i}", f"r{i % 3}", 8, 1, ready=True, cordoned=False, tainted=False) for i in range(6)
    ]
    mirror.replace("nodes", nodes)
    return mirror


def apply(mirror: Mirror, change: dict[str, Any], version: int) -> None:
    if change["kind"] == "pods":
        event = "DELETED" if change["deleted"] else "ADDED"
        mirror.apply("pods", event, pod(change["name"], change["node"], change["gpus"]))
        return
    host = "n0" if change["shared_host"] else None
    obj = node_object(
        change["name"], change["rack"], change["gpus"], version, ready=change["ready"],
        cordoned=change["cordoned"], tainted=change["tainted"], host=host,
    )  # fmt: skip
    mirror.apply("nodes", "DELETED" if change["deleted"] else "MODIFIED", obj)


def same(published: ClusterState, fresh: ClusterState) -> None:
    assert published.nodes == fresh.nodes
    assert published.usage == fresh.usage
    assert published.assigned == fresh.assigned and published.rejected == fresh.rejected
    kept, built = published.snapshots(), fresh.snapshots()
    assert kept.keys() == built.keys()
    for key, cluster in kept.items():
        other = built[key]
        assert cluster.nodes == other.nodes, key
        for view in ("now", "never"):
            mine, theirs = getattr(cluster, view), getattr(other, view)
            assert mine.tree == theirs.tree, (key, view)
            assert list(mine.free) == list(theirs.free), (key, view)
            for engine in engines().values():
                assert mine.place(REQUESTS, engine) == theirs.place(REQUESTS, engine), (key, view)


async def replay(history: list[list[dict[str, Any]]]) -> None:
    mirror = start()
    await mirror.publish_once()
    version = 2
    for batch in history:
        for change in batch:
            apply(mirror, change, version)
            version += 1
        await mirror.publish_once()
        assert mirror.state is not None and not mirror.structure_changed and not mirror.node_changes
        fresh = mirror.build()
        same(mirror.state, fresh.prepare(mirror.default_levels(fresh)))


@settings(max_examples=150, deadline=None)
@given(HISTORY)
def test_node_events_publish_what_a_fresh_build_holds(history: list[list[dict[str, Any]]]) -> None:
    asyncio.run(replay(history))


async def test_a_node_event_edits_the_trees_without_a_rebuild() -> None:
    mirror = start()
    await mirror.publish_once()
    first = mirror.state
    assert first is not None
    mirror.apply(
        "nodes", "MODIFIED", node_object("n1", "r9", 4, 5, ready=True, cordoned=False, tainted=False)
    )
    mirror.apply("nodes", "MODIFIED", node_object("n2", "r2", 8, 5, ready=True, cordoned=True, tainted=False))
    await mirror.publish_once()
    second = mirror.state
    assert second is not None and second.generation > first.generation
    assert second.topologies is first.topologies and second.flavors is first.flavors, "nothing refolded"
    fresh = mirror.build()
    same(second, fresh.prepare(mirror.default_levels(fresh)))
    snapshot = second.snapshots()[("flavor", "gpu", ("rack", HOSTNAME_LABEL))]
    assert ("r9", "n1") in snapshot.now.tree.paths and "n2" not in snapshot.now.tree.leaf_of_node
    assert "n2" in snapshot.never.tree.leaf_of_node, "a cordoned node still counts when empty"
