"""The embedded sample GPU cluster: what `tasgate check` and `tasgate serve` use by default.

2 blocks × 4 racks × 4 hosts of 8-GPU nodes under Kueue's sample Topology "default", one TAS
ResourceFlavor, a ClusterQueue and LocalQueues named as in Kueue's own examples, and some
running pods, a cordoned node and a NotReady one — so that "fits now" and "fits when empty"
differ. `tasgate sample-cluster` prints it as YAML.
"""

from __future__ import annotations

from typing import Any

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
NODE_GROUP = "cloud.provider.com/node-group"
BLOCKS, RACKS, HOSTS = 2, 4, 4
GPUS = 8

# (block, rack) -> GPUs in use on each of its hosts
BUSY = {(1, 1): 8, (1, 2): 4, (2, 1): 2}
CORDONED = "b2-r4-h4"
NOT_READY = "b2-r4-h3"


def sample_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [*_kueue_objects(), _namespace("default")]
    for b in range(1, BLOCKS + 1):
        for r in range(1, RACKS + 1):
            for h in range(1, HOSTS + 1):
                name = f"b{b}-r{r}-h{h}"
                objects.append(_node(name, b, r))
                used = BUSY.get((b, r), 0)
                if used:
                    objects.append(_pod(f"running-{name}", name, used))
    return objects


def _kueue_objects() -> list[dict[str, Any]]:
    api = "kueue.x-k8s.io/v1beta2"
    resources = [
        {"name": "cpu", "nominalQuota": 10000},
        {"name": "memory", "nominalQuota": "100Ti"},
        {"name": "nvidia.com/gpu", "nominalQuota": 10000},
    ]
    return [
        {
            "apiVersion": api,
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
        },
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"},
            "spec": {"nodeLabels": {NODE_GROUP: "tas-group"}, "topologyName": "default"},
        },
        {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": "tas-cluster-queue"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [{"name": "tas-flavor", "resources": resources}],
                    }
                ],
            },
        },
        *[
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": "default"},
                "spec": {"clusterQueue": "tas-cluster-queue"},
            }
            for queue in ("tas-user-queue", "user-queue")
        ],
    ]


def _node(name: str, block: int, rack: int) -> dict[str, Any]:
    ready = "False" if name == NOT_READY else "True"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {BLOCK: f"b{block}", RACK: f"b{block}-r{rack}", HOST: name, NODE_GROUP: "tas-group"},
        },
        "spec": {"unschedulable": True} if name == CORDONED else {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": str(GPUS), "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def _pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "train",
                    "image": "trainer:latest",
                    "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": "ml"}}}
