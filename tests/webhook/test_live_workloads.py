"""Live usage counts what Kueue counts, incrementally: Workloads admitted and finished and pods
bound and deleted in any order (node changes rebuilding meanwhile) leave every published state
equal to a fresh build of the same objects as a dump, and a pod that is both bound and assigned
is counted once."""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

from tests.webhook.test_live import synced_mirror
from tests.webhook.test_workload_usage import (
    BLOCK,
    HOSTS,
    RACK,
    captured,
    gpu_node,
    gpus_free,
    kueue,
)
from webhook.live.mirror import Mirror
from webhook.state.cluster import ClusterState, build_state

RACKS = kueue("racks", [BLOCK, RACK], "rack-flavor")
NODES = {f"n{i}": gpu_node(f"n{i}", f"r{i // 2}", f"b{i // 4}") for i in range(8)}
FLAVORS = ("gpu-flavor", "rack-flavor")


def admitted(name: str, hosts: dict[str, int]) -> dict[str, Any]:
    """The captured Workload, admitted on ``hosts`` (pods per host) of the hostname flavor."""
    workload = captured("workloads", "job-run-")
    workload["metadata"]["name"] = name
    workload["spec"]["podSets"][0]["count"] = sum(hosts.values())
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assignment["count"] = sum(hosts.values())
    assignment["topologyAssignment"]["slices"] = [
        {
            "domainCount": len(hosts),
            "podCounts": {"individual": list(hosts.values())},
            "valuesPerLevel": [{"individual": {"prefix": "n", "roots": [h[1:] for h in hosts]}}],
        }
    ]
    return workload


def rack_admitted(name: str, block: str, rack: str, count: int) -> dict[str, Any]:
    """The captured Workload admitted on one rack of the rack-leaf flavor."""
    workload = admitted(name, {"n0": count})
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assignment["flavors"] = {"cpu": "rack-flavor", "nvidia.com/gpu": "rack-flavor"}
    assignment["topologyAssignment"] = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 1,
                "podCounts": {"universal": count},
                "valuesPerLevel": [{"universal": block}, {"universal": rack}],
            }
        ],
    }
    return workload


def finished(workload: dict[str, Any]) -> dict[str, Any]:
    done = copy.deepcopy(workload)
    done["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    return done


def tas_pod(name: str, host: str) -> dict[str, Any]:
    """A pod of the captured gang, bound to ``host`` (its topology annotation makes it a TAS pod)."""
    pod = captured("pods", "run-0-")
    pod["metadata"]["name"] = name
    pod["spec"]["nodeName"] = host
    return pod


def plain_pod(name: str, host: str) -> dict[str, Any]:
    pod = captured("pods", "partial-0-")
    pod["metadata"]["name"] = name
    pod["spec"]["nodeName"] = host
    return pod


def mirror_with_kueue(nodes: dict[str, dict[str, Any]] = NODES) -> Mirror:
    mirror = synced_mirror()
    mirror.replace("topologies", [o for o in HOSTS + RACKS if o["kind"] == "Topology"])
    mirror.replace("resourceflavors", [o for o in HOSTS + RACKS if o["kind"] == "ResourceFlavor"])
    mirror.replace("nodes", list(nodes.values()))
    return mirror


def fresh(objects: list[dict[str, Any]], nodes: dict[str, dict[str, Any]]) -> ClusterState:
    return build_state([*nodes.values(), *HOSTS, *RACKS, *objects])


def same_as_fresh(
    state: ClusterState | None, objects: list[dict[str, Any]], nodes: dict[str, dict[str, Any]] = NODES
) -> None:
    assert state is not None
    expected = fresh(objects, nodes)
    for flavor in FLAVORS:
        assert gpus_free(state, flavor) == gpus_free(expected, flavor), flavor


async def test_admission_takes_the_hosts_before_any_pod_and_pods_never_add_to_it() -> None:
    mirror = mirror_with_kueue()
    await mirror.publish_once()
    workload = admitted("wl-a", {"n0": 1, "n1": 1})
    mirror.apply("workloads", "ADDED", workload)
    await mirror.publish_once()
    assert mirror.state is not None and gpus_free(mirror.state)[("r0", "n0")] == 0
    pods = [tas_pod("a-0", "n0"), tas_pod("a-1", "n1")]
    for pod in pods:
        mirror.apply("pods", "ADDED", pod)
    await mirror.publish_once()
    same_as_fresh(mirror.state, [workload, *pods])
    assert gpus_free(mirror.state)[("r0", "n0")] == 0, "bound and assigned: counted once"
    mirror.apply("workloads", "MODIFIED", finished(workload))
    await mirror.publish_once()
    assert gpus_free(mirror.state)[("r0", "n0")] == 8, "finished: its pods count nowhere, as in Kueue"
    same_as_fresh(mirror.state, [finished(workload), *pods])


async def test_without_workloads_served_tas_pods_count_on_their_nodes() -> None:
    mirror = mirror_with_kueue()
    mirror.apply("pods", "ADDED", tas_pod("a-0", "n0"))
    mirror.mark_absent("workloads")
    await mirror.publish_once()
    assert mirror.state is not None and gpus_free(mirror.state)[("r0", "n0")] == 0
    mirror.replace("workloads", [])
    await mirror.publish_once()
    assert gpus_free(mirror.state)[("r0", "n0")] == 8, "Workloads known: Kueue's rule"


def random_workload(rng: random.Random, name: str) -> dict[str, Any]:
    if rng.random() < 0.3:
        rack = rng.randrange(4)
        return rack_admitted(name, f"b{rack // 2}", f"r{rack}", rng.choice([1, 2]))
    hosts = rng.sample(sorted(NODES), rng.choice([1, 2, 3]))
    return admitted(name, {h: rng.choice([1, 2]) for h in hosts})


async def test_any_order_of_events_equals_a_fresh_build() -> None:
    nodes = copy.deepcopy(NODES)
    mirror = mirror_with_kueue(nodes)
    await mirror.publish_once()
    rng = random.Random(11)
    workloads: dict[str, dict[str, Any]] = {}
    pods: dict[str, dict[str, Any]] = {}
    for step in range(60):
        rebuild = None
        if step % 7 == 0:  # a node change: rebuilt off the loop while events keep coming
            node = copy.deepcopy(nodes[f"n{rng.randrange(8)}"])
            node["metadata"]["resourceVersion"] = str(step)
            node["metadata"]["labels"]["rebuilt"] = str(step)
            node["status"]["conditions"][0]["status"] = rng.choice(["True", "True", "False"])
            nodes[node["metadata"]["name"]] = node
            mirror.apply("nodes", "MODIFIED", node)
            rebuild = asyncio.create_task(mirror.publish_once())
            await asyncio.sleep(0)
        for _ in range(4):
            _random_event(rng, mirror, workloads, pods, step)
        if rebuild is not None:
            await rebuild
        await mirror.publish_once()
        same_as_fresh(mirror.state, [*workloads.values(), *pods.values()], nodes)


def _random_event(
    rng: random.Random,
    mirror: Mirror,
    workloads: dict[str, dict[str, Any]],
    pods: dict[str, dict[str, Any]],
    step: int,
) -> None:
    choice = rng.random()
    if choice < 0.25:
        name = f"wl-{step}-{len(workloads)}"
        workloads[name] = random_workload(rng, name)
        mirror.apply("workloads", "ADDED", workloads[name])
    elif choice < 0.35 and workloads:
        name = rng.choice(sorted(workloads))
        workloads[name] = finished(workloads[name])
        mirror.apply("workloads", "MODIFIED", workloads[name])
    elif choice < 0.45 and workloads:
        name = rng.choice(sorted(workloads))
        mirror.apply("workloads", "DELETED", workloads.pop(name))
    elif choice < 0.8:
        name = f"p-{step}-{len(pods)}"
        make = tas_pod if rng.random() < 0.6 else plain_pod
        pods[name] = make(name, rng.choice(sorted(NODES)))
        mirror.apply("pods", "ADDED", pods[name])
    elif pods:
        name = rng.choice(sorted(pods))
        mirror.apply("pods", "DELETED", pods.pop(name))
