"""The fidelity suite's world: names, 32 GPU nodes in blocks and racks, 2 CPU nodes, Kueue's objects."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.controlplane import ControlPlane
from e2e.kueue import KUEUE_API_VERSION
from e2e.kueue_admission import condition_true
from e2e.nodes import GPU, HOSTNAME_LABEL, NOT_READY_TAINT, node_manifest, ready_status
from e2e.shared import shared_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
WEBHOOKS_MANIFEST = REPO_ROOT / "manifests" / "webhooks" / "webhooks.yaml"
SHARED_CRDS = shared_dir() / "crds"
PODGROUP_CRD = SHARED_CRDS / "scheduling.x-k8s.io_podgroups.yaml"

NS = "fidelity"
BYPASS_NS = "tasgate-system"  # excluded from tasgate's webhooks by their production namespaceSelector
MUTATE, VALIDATE = "mutate.tasgate.io", "validate.tasgate.io"

BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
HOST = HOSTNAME_LABEL
LEVELS = (BLOCK, RACK, HOST)
TOPOLOGY = "fidelity-topology"
GPU_FLAVOR, CPU_FLAVOR = "gpu-flavor", "cpu-flavor"
TAS_CQ, MIXED_CQ, QUOTA_CQ = "tas-cq", "mixed-cq", "quota-cq"
TAS_QUEUE, MIXED_QUEUE, QUOTA_QUEUE = "tas-queue", "mixed-queue", "quota-queue"
QUOTA_GPUS = 16
# Issue 18: quota in use, cohorts, two TAS flavors, partial admission limited by quota.
BLOCK0_FLAVOR, BLOCK1_FLAVOR = "block0-flavor", "block1-flavor"  # the same topology, one block each
LENDING_COHORT, STINGY_COHORT = "lending-cohort", "stingy-cohort"  # a Cohort object; an implicit one
TIGHT_GPUS, PARTIAL_GPUS, BORROWER_GPUS, LENDER_GPUS, STINGY_LENDING = 24, 31, 8, 24, 4
PREEMPT_GPUS = 16
# queue -> (ClusterQueue, [(flavor, GPUs of nominal quota)], cohort, extra GPU quota fields)
QUEUES_18: Mapping[str, tuple[str, Sequence[tuple[str, int]], str | None, Mapping[str, str]]] = {
    "tight-queue": ("tight-cq", [(GPU_FLAVOR, TIGHT_GPUS)], None, {}),
    "partial-queue": ("partial-cq", [(GPU_FLAVOR, PARTIAL_GPUS)], None, {}),
    "borrow-queue": ("borrow-cq", [(GPU_FLAVOR, BORROWER_GPUS)], LENDING_COHORT, {}),
    "lender-queue": ("lender-cq", [(GPU_FLAVOR, LENDER_GPUS)], LENDING_COHORT, {}),
    "stingy-queue": ("stingy-cq", [(GPU_FLAVOR, BORROWER_GPUS)], STINGY_COHORT, {}),
    "stingy-lender-queue": (
        "stingy-lender-cq",
        [(GPU_FLAVOR, LENDER_GPUS)],
        STINGY_COHORT,
        {"lendingLimit": str(STINGY_LENDING)},
    ),
    "two-flavor-queue": ("two-flavor-cq", [(BLOCK0_FLAVOR, 10000), (BLOCK1_FLAVOR, 10000)], None, {}),
    # Issue 18.3: two full queues of 16 GPUs, one preempting lower priorities, one never preempting.
    "preempt-queue": ("preempt-cq", [(GPU_FLAVOR, PREEMPT_GPUS)], None, {}),
    "no-preempt-queue": ("no-preempt-cq", [(GPU_FLAVOR, PREEMPT_GPUS)], None, {}),
}
PREEMPTION: Mapping[str, Mapping[str, str]] = {
    "preempt-cq": {"withinClusterQueue": "LowerPriority"},
    "no-preempt-cq": {"withinClusterQueue": "Never"},
}
# WorkloadPriorityClasses (kueue.x-k8s.io/priority-class on a job) and their values.
PRIORITIES: Mapping[str, int] = {"fidelity-low": 10, "fidelity-high": 1000}
BLOCKS, RACKS_PER_BLOCK, HOSTS_PER_RACK = 2, 4, 4
GPU_ALLOCATABLE: Mapping[str, str] = {
    "cpu": "64",
    "memory": "512Gi",
    GPU: "8",
    "pods": "110",
    "ephemeral-storage": "1Ti",
}
CPU_ALLOCATABLE: Mapping[str, str] = {
    "cpu": "128",
    "memory": "1Ti",
    "pods": "110",
    "ephemeral-storage": "1Ti",
}
CPU_NODES = ("cpu-0", "cpu-1")

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"

KUEUE_POD_RECONCILE = "Non-TAS usage cache reconciling"
WORKLOADS = "workloads.kueue.x-k8s.io"


# --- the world -------------------------------------------------------------------------------------


def gpu_node_names() -> list[str]:
    return [
        f"b{b}-r{r}-h{h}"
        for b in range(BLOCKS)
        for r in range(RACKS_PER_BLOCK)
        for h in range(HOSTS_PER_RACK)
    ]


def gpu_node_labels(name: str) -> dict[str, str]:
    block, rack, _ = name.split("-")
    return {"pool": "gpu", BLOCK: block, RACK: f"{block}-{rack}"}


def add_nodes(cp: ControlPlane) -> None:
    """Every node in one apply, each status in one patch, the not-ready taint lifted from all at once."""
    nodes = [(name, gpu_node_labels(name), GPU_ALLOCATABLE) for name in gpu_node_names()]
    nodes += [(name, {"pool": "cpu"}, CPU_ALLOCATABLE) for name in CPU_NODES]
    items = [node_manifest(name, labels) for name, labels, _ in nodes]
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    for name, _, allocatable in nodes:
        status = json.dumps(ready_status(allocatable))
        cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", status)
    cp.kubectl("taint", "nodes", "--all", f"{NOT_READY_TAINT}:NoSchedule-", check=False)


def quota(cpu: str, memory: str, gpus: str) -> list[dict[str, str]]:
    """cpu, memory and GPU nominal quota, as a ClusterQueue's flavor lists it."""
    return [
        {"name": "cpu", "nominalQuota": cpu},
        {"name": "memory", "nominalQuota": memory},
        {"name": GPU, "nominalQuota": gpus},
    ]


def cluster_queue(
    name: str, flavors: Sequence[tuple[str, list[dict[str, str]]]], cohort: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            **({"cohortName": cohort} if cohort else {}),
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [{"name": flavor, "resources": quota} for flavor, quota in flavors],
                }
            ],
        },
    }


def kueue_objects() -> list[dict[str, Any]]:
    """Topology, both ResourceFlavors, the three ClusterQueues and their LocalQueues in both namespaces."""
    ample = quota("10000", "100Ti", "10000")
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "Topology",
            "metadata": {"name": TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in LEVELS]},
        },
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": GPU_FLAVOR},
            "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": TOPOLOGY},
        },
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": CPU_FLAVOR},
            "spec": {"nodeLabels": {"pool": "cpu"}},
        },
        cluster_queue(TAS_CQ, [(GPU_FLAVOR, ample)]),
        cluster_queue(MIXED_CQ, [(GPU_FLAVOR, ample), (CPU_FLAVOR, quota("1000", "10Ti", "0"))]),
        cluster_queue(QUOTA_CQ, [(GPU_FLAVOR, quota("1000", "10Ti", str(QUOTA_GPUS)))]),
        *issue_18_objects(),
    ]
    queues = [(TAS_QUEUE, TAS_CQ), (MIXED_QUEUE, MIXED_CQ), (QUOTA_QUEUE, QUOTA_CQ)]
    queues += [(queue, spec[0]) for queue, spec in QUEUES_18.items()]
    for namespace in (NS, BYPASS_NS):
        for queue, cq in queues:
            objects.append(
                {
                    "apiVersion": KUEUE_API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": queue, "namespace": namespace},
                    "spec": {"clusterQueue": cq},
                }
            )
    return objects


def issue_18_objects() -> list[dict[str, Any]]:
    """The block flavors, the Cohort object and the ClusterQueues of ``QUEUES_18``."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": {"pool": "gpu", BLOCK: block}, "topologyName": TOPOLOGY},
        }
        for name, block in ((BLOCK0_FLAVOR, "b0"), (BLOCK1_FLAVOR, "b1"))
    ]
    objects.append(
        {"apiVersion": KUEUE_API_VERSION, "kind": "Cohort", "metadata": {"name": LENDING_COHORT}, "spec": {}}
    )
    for cq, flavors, cohort, limits in QUEUES_18.values():
        quotas = []
        for flavor, gpus in flavors:
            amounts = quota("1000", "10Ti", str(gpus))
            amounts[-1].update(limits)
            quotas.append((flavor, amounts))
        queue = cluster_queue(cq, quotas, cohort)
        if cq in PREEMPTION:
            queue["spec"]["preemption"] = dict(PREEMPTION[cq])
        objects.append(queue)
    objects += [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in PRIORITIES.items()
    ]
    return objects


def cluster_queues_active(cp: ControlPlane) -> bool:
    items = cp.kubectl_json("get", "clusterqueues.kueue.x-k8s.io")["items"]
    names = {item["metadata"]["name"] for item in items if condition_true(item, "Active")}
    return names >= {TAS_CQ, MIXED_CQ, QUOTA_CQ, *(spec[0] for spec in QUEUES_18.values())}
