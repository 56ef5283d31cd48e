"""What Kueue counts as used: admitted TAS Workloads' assignments per leaf domain, and the bound
pods that are not TAS pods (`webhook.state.workloads`), on Workloads and Pods as Kueue v0.19.2,
kube-controller-manager and the scheduler left them (tests/webhook/manifests/lifecycle)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from scorer.model import HOSTNAME_LABEL, PODS
from webhook.state.cluster import ClusterState, build_state
from webhook.state.workloads import AssignedUse, is_tas_pod, workload_usage
from webhook.wire.errors import InvalidObject

LIFECYCLE = Path(__file__).parent / "manifests" / "lifecycle"
RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
GPU = "nvidia.com/gpu"


def captured(kind: str, name: str) -> dict[str, Any]:
    """One object of the captured lifecycle run, by its name's prefix."""
    docs = yaml.safe_load_all((LIFECYCLE / f"{kind}.yaml").read_text())
    return copy.deepcopy(next(d for d in docs if d and d["metadata"]["name"].startswith(name)))


def gpu_node(name: str, rack: str, block: str = "b1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, RACK: rack, BLOCK: block}},
        "status": {
            "allocatable": {"cpu": "16", GPU: "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def kueue(name: str, levels: list[str], flavor: str | None = None) -> list[dict[str, Any]]:
    """A Topology and a TAS ResourceFlavor on it (named ``flavor``, default ``gpu-flavor``)."""
    v1beta2 = "kueue.x-k8s.io/v1beta2"
    return [
        {
            "apiVersion": v1beta2,
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        },
        {
            "apiVersion": v1beta2,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor or "gpu-flavor"},
            "spec": {"topologyName": name},
        },
    ]


NODES = [gpu_node("n0", "r1"), gpu_node("n1", "r1"), gpu_node("n2", "r2"), gpu_node("n3", "r2")]
HOSTS = kueue("hosts", [RACK, HOSTNAME_LABEL])


def gpus_free(state: ClusterState, flavor: str = "gpu-flavor") -> dict[tuple[str, ...], int]:
    found = state.flavors[flavor]
    snapshot = state.flavor_snapshot(found, state.topologies[found.topology_name or ""])
    tree, free = snapshot.now.tree, snapshot.now.free
    col, width = tree.resource_column(GPU), len(tree.resources)
    return {tree.leaf_path(leaf): free[leaf * width + col] for leaf in range(tree.n_leaves)}


def test_an_admitted_workload_takes_its_assigned_hosts() -> None:
    workload = captured("workloads", "job-run-")
    uses = workload_usage(workload)
    # count 1 on each of n0, n1; one pod of the template: cpu 1, 8 GPUs (and one `pods`).
    each = (("cpu", 1000), (GPU, 8), (PODS, 1))
    owner = (workload["metadata"]["namespace"], workload["metadata"]["name"])
    assert uses == (
        AssignedUse("gpu-flavor", (HOSTNAME_LABEL,), ("n0",), each, owner),
        AssignedUse("gpu-flavor", (HOSTNAME_LABEL,), ("n1",), each, owner),
    )


def test_a_prediction_for_an_admission_is_made_without_the_admission_itself() -> None:
    workload = captured("workloads", "job-run-")
    owner = (workload["metadata"]["namespace"], workload["metadata"]["name"])
    state = build_state([*NODES, *HOSTS, workload])
    assert gpus_free(state)[("r1", "n0")] == 0, "the admitted workload holds n0"
    before = state.without_workload(owner)
    assert gpus_free(before)[("r1", "n0")] == 8 and gpus_free(before)[("r1", "n1")] == 8
    assert gpus_free(state)[("r1", "n0")] == 0, "the state itself is unchanged"
    assert state.without_workload(("gangs", "someone-else")) is state


def test_only_an_active_quota_reservation_counts() -> None:
    workload = captured("workloads", "job-run-")
    pending = captured("workloads", "job-wide-")
    assert workload_usage(pending) == (), "queued: no admission, nothing taken"
    finished = copy.deepcopy(workload)
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert workload_usage(finished) == ()
    inactive = copy.deepcopy(workload)
    inactive["spec"]["active"] = False
    assert workload_usage(inactive) == ()
    released = copy.deepcopy(workload)
    for condition in released["status"]["conditions"]:
        if condition["type"] == "QuotaReserved":
            condition["status"] = "False"
    assert workload_usage(released) == ()
    no_tas = captured("workloads", "job-partial-")
    assert workload_usage(no_tas) == (), "admitted without a topology assignment: not TAS usage"


def test_without_its_podset_the_resource_usage_per_pod_counts() -> None:
    workload = captured("workloads", "job-run-")
    workload["spec"]["podSets"][0]["name"] = "renamed"
    assert {use.requests for use in workload_usage(workload)} == {(("cpu", 1000), (GPU, 8), (PODS, 1))}


def test_tas_pods_are_those_with_a_topology_annotation() -> None:
    assert is_tas_pod(captured("pods", "run-0-"))
    assert not is_tas_pod(captured("pods", "partial-0-"))
    implied = captured("pods", "partial-0-")
    implied["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    assert is_tas_pod(implied), "Kueue writes this into the pods of an implied-TAS PodSet"


def test_a_bound_pod_of_an_assigned_workload_counts_once() -> None:
    workload, pods = (
        captured("workloads", "job-run-"),
        [captured("pods", "run-0-"), captured("pods", "run-1-")],
    )
    both = build_state([*NODES, *HOSTS, workload, *pods])
    assert gpus_free(both) == {("r1", "n0"): 0, ("r1", "n1"): 0, ("r2", "n2"): 8, ("r2", "n3"): 8}
    admitted_only = build_state([*NODES, *HOSTS, workload])
    assert gpus_free(admitted_only) == gpus_free(both), "admitted, pods not created yet: taken already"
    assert all(not n.usage for n in both.nodes), "TAS pods never count on their node"


def test_without_workloads_every_bound_pod_counts() -> None:
    pods = [captured("pods", "run-0-"), captured("pods", "run-1-")]
    state = build_state([*NODES, *HOSTS, *pods])
    assert gpus_free(state) == {("r1", "n0"): 0, ("r1", "n1"): 0, ("r2", "n2"): 8, ("r2", "n3"): 8}


def test_a_finished_workload_frees_its_hosts_while_its_pods_still_run() -> None:
    workload, pods = (
        captured("workloads", "job-run-"),
        [captured("pods", "run-0-"), captured("pods", "run-1-")],
    )
    workload["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    state = build_state([*NODES, *HOSTS, workload, *pods])
    assert set(gpus_free(state).values()) == {8}, "as Kueue: a finished Workload's pods count nowhere"


def test_hostname_usage_is_seen_by_every_hostname_flavor_holding_the_host() -> None:
    other = kueue("hosts-2", [BLOCK, HOSTNAME_LABEL], "other-flavor")
    state = build_state([*NODES, *HOSTS, *other, captured("workloads", "job-run-")])
    assert gpus_free(state, "other-flavor") == {
        ("b1", "n0"): 0,
        ("b1", "n1"): 0,
        ("b1", "n2"): 8,
        ("b1", "n3"): 8,
    }


def rack_leaf_workload(flavor: str = "rack-flavor") -> dict[str, Any]:
    """The captured Workload as Kueue admits it on a topology whose leaf is the rack."""
    workload = captured("workloads", "job-run-")
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assignment["flavors"] = {"cpu": flavor, GPU: flavor}
    assignment["topologyAssignment"] = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 1,
                "podCounts": {"universal": 2},
                "valuesPerLevel": [{"universal": "b1"}, {"universal": "r2"}],
            }
        ],
    }
    return workload


def test_a_coarser_leaf_takes_the_usage_of_its_own_flavor_only() -> None:
    racks = kueue("racks", [BLOCK, RACK], "rack-flavor")
    twin = kueue("racks-2", [BLOCK, RACK], "twin-flavor")
    state = build_state([*NODES, *HOSTS, *racks, *twin, rack_leaf_workload()])
    assert gpus_free(state, "rack-flavor") == {("b1", "r1"): 16, ("b1", "r2"): 0}
    assert gpus_free(state, "twin-flavor") == {("b1", "r1"): 16, ("b1", "r2"): 16}, "another cache"
    assert set(gpus_free(state).values()) == {8}, "nor the hostname flavors"


def test_a_domain_the_snapshot_does_not_hold_is_skipped() -> None:
    workload = captured("workloads", "job-run-")
    state = build_state([gpu_node("n1", "r1"), *HOSTS, workload])
    assert gpus_free(state) == {("r1", "n1"): 0}


def test_a_malformed_assignment_names_the_workload() -> None:
    workload = captured("workloads", "job-run-")
    del workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0][
        "domainCount"
    ]
    with pytest.raises(InvalidObject, match="Workload gangs/job-run-"):
        workload_usage(workload)
    state = build_state([*NODES, *HOSTS, workload])
    (rejected,) = state.rejected
    assert (rejected.kind, rejected.namespace, rejected.name[:8]) == ("Workload", "gangs", "job-run-")
    assert rejected.path.startswith("status.admission") and "domainCount" in rejected.reason
    assert not state.assigned, "a Workload that does not read counts nothing"
