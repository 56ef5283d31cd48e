"""Pod events move usage incrementally; every published state equals a fresh build of the same
objects, also when pod events arrive while a node change is being rebuilt off the loop."""

from __future__ import annotations

import asyncio
import random

from tests.webhook.test_live import node, pod, synced_mirror, topology
from webhook.live.mirror import Mirror
from webhook.state.cluster import ClusterState
from webhook.state.kueue import Flavor, Topology

FLAVOR = Flavor("gpu", {}, (), "default")
TOPOLOGY = Topology("default", ("rack", "kubernetes.io/hostname"))


def with_topology() -> Mirror:
    mirror = synced_mirror()
    mirror.replace("topologies", [topology()])
    mirror.replace(
        "resourceflavors",
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "gpu"},
                "spec": {"topologyName": "default"},
            }
        ],
    )
    mirror.replace("nodes", [node(f"n{i}") for i in range(6)])
    return mirror


def free(state: ClusterState) -> list[int]:
    return list(state.flavor_snapshot(state.flavors["gpu"], state.topologies["default"]).now.free)


async def test_pod_events_publish_without_a_rebuild() -> None:
    mirror = with_topology()
    await mirror.publish_once()
    first = mirror.state
    assert first is not None and first.flavors["gpu"] == FLAVOR
    tree = first.flavor_snapshot(FLAVOR, TOPOLOGY).now.tree
    mirror.apply("pods", "ADDED", pod("p", "n1", 4))
    await mirror.publish_once()
    second = mirror.state
    assert second is not None and second is not first and second.generation > first.generation
    assert second.nodes is first.nodes, "pods changed, not nodes: the state's nodes are shared"
    assert second.flavor_snapshot(FLAVOR, TOPOLOGY).now.tree is tree, "and so are the trees"
    assert free(second) == free(mirror.build()) != free(first)
    assert mirror.holder.current is second


async def test_pod_events_during_a_rebuild_are_not_lost() -> None:
    mirror = with_topology()
    await mirror.publish_once()
    rng = random.Random(7)
    running: list[str] = []
    for step in range(40):
        if step % 10 == 0:  # a node change: rebuilt on a worker thread while pods keep coming
            mirror.apply("nodes", "MODIFIED", node(f"n{step // 10}", gpus=4, version=str(step)))
            rebuild = asyncio.create_task(mirror.publish_once())
            await asyncio.sleep(0)  # the rebuild has taken its copy and left for the thread
        else:
            rebuild = None
        for _ in range(5):
            if running and rng.random() < 0.4:
                mirror.apply("pods", "DELETED", pod(running.pop(), "n0", 0))
            else:
                name = f"p{step}-{len(running)}-{rng.random()}"
                mirror.apply("pods", "ADDED", pod(name, f"n{rng.randrange(6)}", rng.choice([1, 2, 4])))
                running.append(name)
        if rebuild is not None:
            await rebuild
        await mirror.publish_once()
        assert mirror.state is not None
        assert free(mirror.state) == free(mirror.build()), f"step {step}"
        assert mirror.state.usage == mirror.build().usage
