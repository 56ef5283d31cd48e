"""A small TAS cluster and training workloads for tests that run the real Kueue (e2e/kueue.py).

Shared by tests/e2e/test_kueue_smoke.py and e2e/capture_kueue_objects.py so both build exactly the
same world: one Topology (block / rack / hostname), one TAS ResourceFlavor (``pool: gpu``), a
ClusterQueue with ample quota, a LocalQueue, and Ready 8-GPU nodes ``n0, n1, ...`` filled rack by
rack. Every workload asks for a whole rack (``podset-required-topology``) with 8 GPUs per pod.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from e2e.controlplane import ControlPlane
from e2e.kueue import KUEUE_API_VERSION
from e2e.nodes import GPU, HOSTNAME_LABEL, add_node

BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
TOPOLOGY = "gpu-topology"
FLAVOR = "gpu-flavor"
CLUSTER_QUEUE = "gpu-cq"
LOCAL_QUEUE = "gpu-queue"
NODE_POOL = {"pool": "gpu"}
GPUS_PER_NODE = 8
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"


def add_gpu_nodes(
    cp: ControlPlane, blocks: int = 1, racks_per_block: int = 2, per_rack: int = 4
) -> list[str]:
    """Ready nodes ``n0..`` in blocks ``b0..`` and racks ``b<i>-r<j>``; their names, rack by rack."""
    names: list[str] = []
    for b in range(blocks):
        for r in range(racks_per_block):
            for _ in range(per_rack):
                name = f"n{len(names)}"
                add_node(cp, name, {**NODE_POOL, BLOCK: f"b{b}", RACK: f"b{b}-r{r}"})
                names.append(name)
    return names


def cluster_queue(name: str = CLUSTER_QUEUE, stop_policy: str | None = None) -> dict[str, Any]:
    """A ClusterQueue of the TAS flavor with ample quota; ``stop_policy`` ``Hold`` keeps what it
    queues from being admitted until the policy is lifted (a queued workload on demand)."""
    quota = [
        {"name": "cpu", "nominalQuota": "1000"},
        {"name": "memory", "nominalQuota": "10Ti"},
        {"name": GPU, "nominalQuota": "1000"},
    ]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": FLAVOR, "resources": quota}]}
        ],
    }
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(
    namespace: str, name: str = LOCAL_QUEUE, cluster_queue: str = CLUSTER_QUEUE
) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def queue_objects(namespace: str) -> list[dict[str, Any]]:
    """Topology, ResourceFlavor, ClusterQueue, and a LocalQueue in ``namespace`` (v1beta2)."""
    return [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "Topology",
            "metadata": {"name": TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in LEVELS]},
        },
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
            "spec": {"nodeLabels": dict(NODE_POOL), "topologyName": TOPOLOGY},
        },
        cluster_queue(),
        local_queue(namespace),
    ]


def setup_queues(cp: ControlPlane, namespace: str) -> None:
    """Create ``namespace`` and the queue objects (idempotent: server-side apply)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    cp.kubectl("apply", "-f", "-", input=json.dumps(ns))
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(queue_objects(namespace)))


def pod_template(
    container: str = "train", gpus: int = GPUS_PER_NODE, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": container, "image": "trainer:latest", "resources": resources}],
        }
    }
    if annotations:
        template["metadata"] = {"annotations": dict(annotations)}
    return template


def rack_required() -> dict[str, str]:
    return {REQUIRED_TOPOLOGY: RACK}


def job(
    name: str, namespace: str, pods: int = 4, gpus: int = GPUS_PER_NODE, queue: str = LOCAL_QUEUE
) -> dict[str, Any]:
    """An Indexed, suspended batch/v1 Job of ``pods`` × ``gpus`` GPUs that requires one rack."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "suspend": True,
            "template": pod_template(gpus=gpus, annotations=rack_required()),
        },
    }


def leader_worker_set(name: str, namespace: str, size: int = 3) -> dict[str, Any]:
    """One LWS group of a leader and ``size - 1`` workers, each pod 8 GPUs, the group within one rack.

    ``rolloutStrategy.type`` is set by hand: without the LWS controller's own defaulting webhook it
    would stay empty and Kueue's LWS validation rejects that (recipe, pitfall E).
    """
    template = pod_template(annotations=rack_required())
    restart = "RecreateGroupOnPodRestart"
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate"},
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": restart,
                "leaderTemplate": template,
                "workerTemplate": json.loads(json.dumps(template)),
            },
        },
    }


def mpi_job(name: str, namespace: str, workers: int = 3) -> dict[str, Any]:
    """An MPIJob whose launcher also works (``runLauncherAsWorker``): 1 + ``workers`` pods in one rack."""
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {
            "slotsPerWorker": 1,
            "runLauncherAsWorker": True,
            "runPolicy": {"suspend": True},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": pod_template("launcher", annotations=rack_required()),
                },
                "Worker": {
                    "replicas": workers,
                    "template": pod_template("worker", annotations=rack_required()),
                },
            },
        },
    }
