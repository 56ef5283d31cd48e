"""Live state never lags a rebuild: any interleaving of pod, Workload and quota events with
rebuilds and node edits running off the event loop (finished or aborted, events arriving
meanwhile) publishes what a fresh build of the final objects holds (usage per node, the free
capacity of every snapshot, quota charges, assigned usage), and no published state reads as
caught up (`pending_since` None) while it differs from that build."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scorer import Cluster
from tests.webhook.held_rebuild import HeldRebuild, holding
from tests.webhook.quota_world import admitted as quota_admitted
from tests.webhook.quota_world import cluster_queue, resources
from tests.webhook.test_live import synced_mirror
from tests.webhook.test_live_workloads import (
    NODES,
    RACKS,
    admitted,
    finished,
    plain_pod,
    rack_admitted,
    tas_pod,
)
from tests.webhook.test_workload_usage import HOSTS, captured
from webhook.live.mirror import Mirror
from webhook.state.cluster import ClusterState, build_state

NAMESPACE = "gangs"  # every Workload and pod of the test, so one slot is one object
HOSTNAMES = sorted(NODES)
PODS, WORKLOADS = 4, 3  # slots: each holds at most one object at a time

# A pod slot: gone, or (host index, whether a TAS pod). Bound to another host: a move.
pod_states = st.none() | st.tuples(st.integers(0, len(HOSTNAMES) - 1), st.booleans())
# A Workload slot: gone, admitted on hosts (pods per host) or on a rack, or its pods finished;
# a quota charge: the slot's Workload holds quota only (no topology assignment) of some GPUs.
hosts = st.dictionaries(st.sampled_from(HOSTNAMES), st.integers(1, 2), min_size=1, max_size=3)
workload_states = (
    st.none()
    | st.tuples(st.just("hosts"), hosts.map(lambda found: tuple(sorted(found.items()))))
    | st.tuples(st.just("rack"), st.integers(0, 3), st.integers(1, 2))
    | st.tuples(st.just("finished"), hosts.map(lambda found: tuple(sorted(found.items()))))
)
charges = st.tuples(
    st.just("workload"),
    st.integers(0, WORKLOADS - 1),
    st.none() | st.tuples(st.just("quota"), st.integers(1, 16)),
)
events = (
    st.tuples(st.just("pod"), st.integers(0, PODS - 1), pod_states)
    | st.tuples(st.just("workload"), st.integers(0, WORKLOADS - 1), workload_states)
    | charges
    | st.tuples(st.just("node"), st.integers(0, len(HOSTNAMES) - 1), st.booleans())  # (host, ready)
    | st.tuples(st.just("flavor"), st.booleans())  # the rack flavor narrowed to block b0, or not
    | st.tuples(st.just("relist"), st.sampled_from(["pods", "workloads"]))  # after 410 Gone, say
)
# A rebuild: what starts it (a node change: an edit of the kept snapshots; a ClusterQueue
# change: a rebuild of the state), the events that arrive while it runs (quota charges, which
# no ledger journals, drawn more often), whether it fails (one in three).
meanwhile = st.lists(events | charges, min_size=1, max_size=3)
fails = st.sampled_from([False, False, True])
rebuilds = st.tuples(st.just("rebuild"), st.sampled_from(["node", "queue"]), meanwhile, fails)
# Rounds of events, each ended by a rebuild with events meanwhile or by a plain publish.
rounds = st.lists(st.tuples(st.lists(events, max_size=3), rebuilds | st.just(("publish",))), max_size=6)


@dataclass
class World:
    """The objects the API server holds now, and a counter for fresh resourceVersions."""

    pods: dict[int, dict[str, Any]] = field(default_factory=dict)
    workloads: dict[int, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(NODES))
    flavors: list[dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(HOSTS + RACKS))
    queue: dict[str, Any] = field(default_factory=lambda: cluster_queue("cq", [("gpu-flavor", resources(8))]))
    version: int = 0

    def objects(self) -> list[dict[str, Any]]:
        kueue = [*self.flavors, self.queue, ANCHOR]
        return [*self.nodes.values(), *kueue, *self.workloads.values(), *self.pods.values()]


def slot(obj: dict[str, Any], name: str) -> dict[str, Any]:
    obj["metadata"].update(name=name, namespace=NAMESPACE)
    return obj


# A Workload not admitted: always there, so a fresh build knows Workloads are served (TAS pods
# count through their Workloads), as the mirror does once they are listed.
ANCHOR = slot(captured("workloads", "job-run-"), "pending")
ANCHOR.pop("status")


def pod(name: str, found: tuple[int, bool]) -> dict[str, Any]:
    return slot((tas_pod if found[1] else plain_pod)(name, HOSTNAMES[found[0]]), name)


def workload(name: str, found: tuple[Any, ...]) -> dict[str, Any]:
    if found[0] == "hosts":
        return slot(admitted(name, dict(found[1])), name)
    if found[0] == "rack":
        return slot(rack_admitted(name, f"b{found[1] // 2}", f"r{found[1]}", found[2]), name)
    if found[0] == "finished":
        return slot(finished(admitted(name, dict(found[1]))), name)
    return slot(quota_admitted(name, "cq", {"nvidia.com/gpu": str(found[1])}, "gpu-flavor"), name)


def apply(mirror: Mirror, world: World, event: tuple[Any, ...]) -> None:
    """One watch event (or a relist): the object changes in ``world`` and the mirror hears of it."""
    world.version += 1
    if event[0] in ("pod", "workload"):
        apply_slot(mirror, world, event)
    elif event[0] == "node":
        node = copy.deepcopy(world.nodes[HOSTNAMES[event[1]]])
        node["metadata"]["resourceVersion"] = str(world.version)
        node["metadata"]["labels"]["edited"] = str(world.version)  # always a change placement reads
        node["status"]["conditions"][0]["status"] = "True" if event[2] else "False"
        world.nodes[HOSTNAMES[event[1]]] = node
        mirror.apply("nodes", "MODIFIED", node)
    elif event[0] == "flavor":
        flavor = next(f for f in world.flavors if f["metadata"]["name"] == "rack-flavor")
        flavor["spec"]["nodeLabels"] = {"topology.example.com/block": "b0"} if event[1] else {}
        mirror.apply("resourceflavors", "MODIFIED", copy.deepcopy(flavor))
    elif event[0] == "relist":
        listed = world.pods if event[1] == "pods" else {-1: ANCHOR, **world.workloads}
        mirror.replace(event[1], list(listed.values()))
    elif event[0] == "queue":
        world.queue = cluster_queue("cq", [("gpu-flavor", resources(8 + world.version))])
        mirror.apply("clusterqueues", "MODIFIED", world.queue)


def apply_slot(mirror: Mirror, world: World, event: tuple[Any, ...]) -> None:
    """A pod or Workload slot takes its new object: added, modified (a pod moved, a Workload
    admitted elsewhere or charged anew) or deleted."""
    kind, index, found = f"{event[0]}s", event[1], event[2]
    objects: dict[int, dict[str, Any]] = getattr(world, kind)
    before, name = objects.pop(index, None), f"{event[0]}-{index}"
    if found is not None:
        objects[index] = (pod if kind == "pods" else workload)(name, found)
        mirror.apply(kind, "ADDED" if before is None else "MODIFIED", objects[index])
    elif before is not None:
        mirror.apply(kind, "DELETED", before)


def free_by_leaf(cluster: Cluster) -> dict[tuple[str, ...], tuple[tuple[str, int], ...]]:
    tree, free = cluster.now.tree, cluster.now.free
    width = len(tree.resources)
    return {
        tree.leaf_path(leaf): tuple(zip(tree.resources, free[leaf * width : (leaf + 1) * width], strict=True))
        for leaf in range(tree.n_leaves)
    }


def usage_per_node(state: ClusterState) -> dict[str, dict[str, int]]:
    """What the pods counted on their nodes use: kept apart (live) or in the nodes (a dump)."""
    usage = {node.name: node.usage for node in state.nodes} if state.usage is None else state.usage
    return {name: dict(requests) for name, requests in usage.items() if requests}


def assert_as_built(state: ClusterState | None, world: World) -> None:
    """``state`` holds what a fresh build of ``world``'s objects holds."""
    assert state is not None
    expected = build_state(world.objects()).prepare()
    assert usage_per_node(state) == usage_per_node(expected)
    assert sorted(state.charges, key=repr) == sorted(expected.charges, key=repr), "quota charges"
    assert Counter(state.assigned) == Counter(expected.assigned), "assigned usage"
    built, kept = expected.snapshots(), state.snapshots()
    assert set(kept) == set(built), "every snapshot kept, made off the loop"
    for key, cluster in built.items():
        assert free_by_leaf(kept[key]) == free_by_leaf(cluster), f"free capacity of {key}"


def check_if_caught_up(mirror: Mirror, world: World) -> None:
    """A state that reads as caught up holds every change: freshness never covers a lag. Any
    published state, caught up or not, is whole: its snapshots are what its own usage makes."""
    state = mirror.state
    assert state is not None
    own = state.with_usage(state.usage or {}, {}, state.generation, state.assigned).prepare()
    for key, cluster in state.snapshots().items():  # none while a relist awaits its rebuild
        assert free_by_leaf(cluster) == free_by_leaf(own.snapshots()[key]), f"{key} of its own usage"
    if mirror.pending_since is None:
        assert_as_built(state, world)


async def rebuild(mirror: Mirror, world: World, held: HeldRebuild, step: tuple[Any, ...]) -> None:
    """A node edit or a rebuild held on its thread while ``step``'s events arrive, then let go."""
    _, trigger, during, fails = step
    apply(mirror, world, ("node", 0, True) if trigger == "node" else ("queue",))
    await held.begin(mirror)
    for event in during:
        apply(mirror, world, event)
    await held.finish(fail=fails)
    check_if_caught_up(mirror, world)
    await mirror.publish_once()  # the publisher's next round: what came meanwhile left it dirty
    check_if_caught_up(mirror, world)


async def run(program: list[Any]) -> None:
    world = World()
    mirror = synced_mirror()
    for kind, objects in (("nodes", list(world.nodes.values())), ("workloads", [ANCHOR])):
        mirror.replace(kind, objects)
    mirror.replace("topologies", [o for o in world.flavors if o["kind"] == "Topology"])
    mirror.replace("resourceflavors", [o for o in world.flavors if o["kind"] == "ResourceFlavor"])
    mirror.replace("clusterqueues", [world.queue])
    with holding() as held:
        await mirror.publish_once()
        for before, then in program:
            for event in before:
                apply(mirror, world, event)
            if then[0] == "rebuild":
                await rebuild(mirror, world, held, then)
            else:
                await mirror.publish_once()
                check_if_caught_up(mirror, world)
        for _ in range(3):  # as the publisher does while changes are pending
            await mirror.publish_once()
    assert mirror.pending_since is None, "caught up once the changes stop"
    assert_as_built(mirror.state, world)


CHARGE_MEANWHILE = ("rebuild", "queue", [("workload", 0, ("quota", 12))], False)
RELEASED_MEANWHILE = ("rebuild", "node", [("workload", 0, None)], False)
ABORTED = ("rebuild", "queue", [("pod", 0, (1, False)), ("workload", 1, ("quota", 3))], True)


@settings(max_examples=100, deadline=None)
@given(program=rounds)
@example(program=[([], CHARGE_MEANWHILE)])
@example(program=[([("workload", 0, ("quota", 4))], RELEASED_MEANWHILE)])
@example(program=[([], ABORTED), ([], ("publish",))])
def test_any_interleaving_with_rebuilds_publishes_a_fresh_build(program: list[Any]) -> None:
    asyncio.run(run(program))
