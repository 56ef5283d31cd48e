"""The live mirror: the one writer that turns watch events into published cluster states."""

from __future__ import annotations

import asyncio
from typing import Any

from webhook.live.holder import StateHolder
from webhook.live.mirror import Mirror
from webhook.live.watch import kinds

NAMES = [k.name for k in kinds()]


def node(name: str, gpus: int = 8, version: str = "1", ready: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": version,
            "labels": {"rack": "r1", "kubernetes.io/hostname": name},
        },
        "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def pod(name: str, node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": phase},
    }


def topology() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }


def synced_mirror() -> Mirror:
    mirror = Mirror(StateHolder(), NAMES)
    for kind in mirror.watched:
        mirror.replace(kind, [])
    return mirror


def test_not_ready_until_every_kind_listed_or_known_absent() -> None:
    mirror = Mirror(StateHolder(), NAMES)
    mirror.replace("nodes", [node("a")])
    mirror.replace("pods", [])
    mirror.replace("namespaces", [])
    assert not mirror.ready and mirror.freshness() is None
    for kind in (
        "topologies",
        "resourceflavors",
        "clusterqueues",
        "trainingruntimes",
        "clustertrainingruntimes",
    ):
        mirror.mark_absent(kind)
    mirror.replace("limitranges", [])
    mirror.replace("runtimeclasses", [])
    assert not mirror.ready
    mirror.replace("localqueues", [])
    assert mirror.ready and mirror.freshness() is not None


def test_usage_follows_pod_events() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a"), node("b")])
    mirror.replace("pods", [pod("p1", "a", 4)])
    state = mirror.build()
    assert {n.name: n.usage.get("nvidia.com/gpu", 0) for n in state.nodes} == {"a": 4, "b": 0}
    mirror.apply("pods", "ADDED", pod("p2", "b", 8))
    mirror.apply("pods", "MODIFIED", pod("p1", "a", 4, phase="Succeeded"))
    state = mirror.build()
    assert {n.name: n.usage.get("nvidia.com/gpu", 0) for n in state.nodes} == {"a": 0, "b": 8}
    mirror.apply("pods", "DELETED", pod("p2", "b", 8))
    assert all(not n.usage for n in mirror.build().nodes)


def test_relist_synthesises_deletions_and_generations_grow() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a"), node("b")])
    first = mirror.build()
    mirror.replace("nodes", [node("b", version="2", gpus=4)])  # "a" vanished while the watch was gone
    second = mirror.build()
    assert [n.name for n in second.nodes] == ["b"]
    assert second.nodes[0].allocatable["nvidia.com/gpu"] == 4
    assert second.generation == first.generation + 1


def test_node_parse_is_cached_by_resource_version() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a", version="7")])
    parsed = mirror.nodes["a"][1]
    mirror.apply("nodes", "MODIFIED", node("a", version="7"))
    assert mirror.nodes["a"][1] is parsed
    mirror.apply("nodes", "MODIFIED", node("a", version="8", ready="False"))
    assert mirror.nodes["a"][1].ready is False


def test_broken_objects_are_skipped_not_fatal() -> None:
    mirror = synced_mirror()
    bad = node("bad")
    bad["status"]["allocatable"]["cpu"] = "lots"
    mirror.replace("nodes", [node("a"), bad])
    assert [n.name for n in mirror.build().nodes] == ["a"]


def test_kueue_objects_reach_the_state() -> None:
    mirror = synced_mirror()
    mirror.replace("topologies", [topology()])
    assert mirror.build().topologies["default"].levels == ("rack", "kubernetes.io/hostname")
    mirror.mark_absent("topologies")
    assert not mirror.build().topologies


async def test_publisher_swaps_the_state_and_keeps_it_fresh() -> None:
    holder = StateHolder()
    mirror = Mirror(holder, NAMES, debounce=0.01)
    task = asyncio.create_task(mirror.publish_forever())
    try:
        for kind in mirror.watched:
            mirror.replace(kind, [node("a")] if kind == "nodes" else [])
        for _ in range(200):
            if holder.current is not None:
                break
            await asyncio.sleep(0.01)
        assert holder.current is not None and [n.name for n in holder.current.nodes] == ["a"]
        before = holder.current
        mirror.apply("nodes", "ADDED", node("b"))
        for _ in range(200):
            if holder.current is not before:
                break
            await asyncio.sleep(0.01)
        assert holder.current is not before and len(holder.current.nodes) == 2
        assert before is not None and len(before.nodes) == 1, "a published state is never mutated"
    finally:
        task.cancel()
