"""Large clusters for the topology picture: blocks b0…, racks r0… in each, hosts bB-rR-hH, named
the way people number them (so a plain string sort would put r10 before r2), some busy, some away.

The sample cluster's Kueue objects (flavor ``tas-flavor``, Topology ``default``, queue
``user-queue``) over generated Nodes and bound Pods; deterministic for a given size.
"""

from __future__ import annotations

import random
from typing import Any

from tests.webhook.conftest import BLOCK, GPU, RACK, node
from webhook.files.sample import NODE_GROUP, sample_objects
from webhook.state.cluster import ClusterState, build_state

SHAPES = {1024: (4, 16, 16), 10_000: (10, 20, 50), 50_000: (25, 40, 50)}  # blocks, racks, hosts
BUSY_SHARE, AWAY_SHARE = 0.3, 0.01


def world_objects(nodes: int, seed: int = 19) -> list[dict[str, Any]]:
    blocks, racks, hosts = SHAPES[nodes]
    rng = random.Random(seed)
    objects = [o for o in sample_objects() if o["kind"] not in ("Node", "Pod")]
    for b in range(blocks):
        for r in range(racks):
            for h in range(hosts):
                name = f"b{b}-r{r}-h{h}"
                labels = {BLOCK: f"b{b}", RACK: f"r{r}", NODE_GROUP: "tas-group"}
                objects.append(node(name, labels, cordoned=rng.random() < AWAY_SHARE))
                if rng.random() < BUSY_SHARE:
                    objects.append(_pod(name, rng.choice((1, 2, 4, 8))))
    return objects


def world_state(nodes: int, generation: int = 7) -> ClusterState:
    return build_state(world_objects(nodes), generation=generation)


def _pod(host: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"busy-{host}", "namespace": "default"},
        "spec": {
            "nodeName": host,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def block_job(pods: int, name: str = "big-gang") -> dict[str, Any]:
    """``pods`` x 8 GPUs required in one block, in the sample's user-queue."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "suspend": True,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": BLOCK}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}},
                        }
                    ],
                },
            },
        },
    }
