"""What ``make demo`` (e2e/demo.py) builds and applies: the nodes, the Kueue objects, the workloads.

The cluster is a small copy of the embedded sample cluster (``tasgate sample-cluster``): the same
Topology ``default``, ResourceFlavor ``tas-flavor``, ClusterQueue ``tas-cluster-queue`` and
LocalQueues ``tas-user-queue``/``user-queue`` in ``default`` (imported from webhook.files.sample,
not copied), and nodes of the same shape and labels, but only 2 blocks x 2 racks x 2 hosts of
8 GPUs (8 kwok nodes): small enough to share 2 cores, and named like the sample so the
repository's ``examples/`` apply to it unchanged.

The workloads are plain Indexed Jobs (the job controller runs, so their pods are real), applied in
this order so each verdict follows from the one before:

1. ``llm-pretrain``: 6 pods x 8 GPUs, required block. A block holds 4: **denied**, with the numbers.
2. ``resnet-a``: 3 pods x 8 GPUs, no topology annotation. The default policy injects the tightest
   level that holds it (block) and a Coscheduling PodGroup; Kueue admits it and kwok runs it.
3. ``resnet-b``: 2 pods x 8 GPUs, no annotation: injected at rack, admitted into the other block
   (the first has one free host left), run.
4. ``llama-finetune``: 4 pods x 8 GPUs, required block. Empty, a block holds it; now the best
   block has 2 free hosts: admitted with a **warning** that it must wait, and Kueue keeps it queued.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.files.sample import BLOCK, HOST, NODE_GROUP, RACK, sample_objects

NAMESPACE = "default"
QUEUE = "tas-user-queue"
GPU = "nvidia.com/gpu"
BLOCKS, RACKS, HOSTS = 2, 2, 2
NODE_ALLOCATABLE: Mapping[str, str] = {"cpu": "96", "memory": "1000Gi", GPU: "8", "pods": "110"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
IMAGE = "registry.example.com/train:1.0"  # never pulled: kwok runs the pods
KUEUE_KINDS = ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")


@dataclass(frozen=True)
class Step:
    """One ``kubectl apply`` of the demo: the Job, what it shows, and the outcome it must have."""

    name: str
    pods: int
    level: str | None  # the podset-required-topology the user wrote; None: left to the policy
    expect: str  # "denied", "runs" or "waits"
    what: str

    def manifest(self) -> dict[str, Any]:
        return job(self.name, self.pods, self.level)


STEPS = (
    Step("llm-pretrain", 6, BLOCK, "denied", "6 pods x 8 GPUs in one block; a block has 4 hosts"),
    Step("resnet-a", 3, None, "runs", "3 pods x 8 GPUs, no topology annotation"),
    Step("resnet-b", 2, None, "runs", "2 pods x 8 GPUs, no topology annotation"),
    Step("llama-finetune", 4, BLOCK, "waits", "4 pods x 8 GPUs in one block, while 5 hosts are busy"),
)


def node_names() -> list[str]:
    """``b<block>-r<rack>-h<host>``, 1-based as in the sample cluster."""
    return [
        f"b{b}-r{r}-h{h}"
        for b in range(1, BLOCKS + 1)
        for r in range(1, RACKS + 1)
        for h in range(1, HOSTS + 1)
    ]


def node_labels(name: str) -> dict[str, str]:
    """The sample cluster's labels for node ``name``: block, rack, and the flavor's node group."""
    block, rack, _ = name.split("-")
    return {BLOCK: block, RACK: f"{block}-{rack}", HOST: name, NODE_GROUP: "tas-group"}


def kueue_objects() -> list[dict[str, Any]]:
    """The sample cluster's Topology, ResourceFlavor, ClusterQueue and LocalQueues."""
    return [obj for obj in sample_objects() if obj["kind"] in KUEUE_KINDS]


def job(name: str, pods: int, level: str | None) -> dict[str, Any]:
    """An Indexed Job of ``pods`` x 8 GPUs on the demo queue; ``level``: its required topology."""
    resources = {"requests": {"cpu": "16", "memory": "128Gi", GPU: "8"}, "limits": {GPU: "8"}}
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": IMAGE, "resources": resources}],
        }
    }
    if level is not None:
        template["metadata"] = {"annotations": {REQUIRED: level}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "template": template},
    }


def running_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods in phase Running whose Ready condition is True (kwok's pod-ready stage sets both)."""
    return [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Running"
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or ()
        )
    ]


def injected(stored: Mapping[str, Any]) -> list[str]:
    """What the stored Job's pod template carries of tasgate's: the topology level and gang label."""
    meta = stored["spec"]["template"].get("metadata") or {}
    found = []
    if level := (meta.get("annotations") or {}).get(REQUIRED):
        found.append(f"{REQUIRED}={level}")
    if group := (meta.get("labels") or {}).get(POD_GROUP_LABEL):
        found.append(f"{POD_GROUP_LABEL}={group}")
    return found
