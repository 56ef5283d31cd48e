"""A table row's changes to the cluster beyond its own objects: node labels, taints and cordons
(``NodeChange``), and setup pods marked finished. Each is in the scheduler's cache before the
row is dumped and judged, and undone (and seen undone) before the next row.

The scheduler sees nodes through their own informer, so the pod sentinel of
``NativeWorld.sync_scheduler`` proves nothing about them. Here the last node patch also sets a
marker label, and a sentinel that selects that label and tolerates everything must be bound:
the node informer delivers one watch stream in order, so once the scheduler has placed a pod by
the marker it has seen every earlier node patch too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from e2e.native_row import NodeChange, Row
from e2e.native_world import NativeWorld, wait_until

MARKER = "tasgate.io/native-sync"


def prepare(world: NativeWorld, row: Row, namespace: str) -> Callable[[], None]:
    """Apply the row's node changes and finish its ``finished`` pods; returns the undo."""
    for pod in row.finished:
        status = {"status": {"phase": "Succeeded"}}
        world.cp.kubectl(
            "patch",
            "pod",
            pod,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        )
    if not row.nodes:
        return lambda: None
    _patch(world, row.nodes, namespace, f"{row.name}", undo=False)
    saved = world.node_labels  # the fate reads bound pods' domains from these
    world.node_labels = {node: dict(labels) for node, labels in saved.items()}
    for change in row.nodes:
        world.node_labels[change.node].update(change.labels)

    def undo() -> None:
        world.node_labels = saved
        _patch(world, row.nodes, namespace, f"{row.name}-undone", undo=True)
        last = row.nodes[-1].node
        world.cp.kubectl("label", "node", last, f"{MARKER}-")

    return undo


def _patch(world: NativeWorld, changes: Sequence[NodeChange], namespace: str, token: str, undo: bool) -> None:
    for i, change in enumerate(changes):
        labels: dict[str, Any] = {k: None if undo else v for k, v in change.labels.items()}
        if i == len(changes) - 1:
            labels[MARKER] = token
        spec: dict[str, Any] = {}
        if change.taints:
            spec["taints"] = None if undo else [dict(t) for t in change.taints]
        if change.cordon:
            spec["unschedulable"] = None if undo else True
        body: Mapping[str, Any] = {"metadata": {"labels": labels}, "spec": spec}
        world.cp.kubectl("patch", "node", change.node, "--type=merge", "-p", json.dumps(body))
    _sentinel(world, namespace, token)


def _sentinel(world: NativeWorld, namespace: str, token: str) -> None:
    """A pod that only a node carrying ``MARKER=token`` takes, bound, then deleted."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "node-sentinel", "namespace": namespace},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {MARKER: token},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "s", "image": "pause"}],
        },
    }
    world.create([pod])

    def bound() -> bool:
        got = world.cp.kubectl_json("get", "pod", "node-sentinel", "-n", namespace)
        return bool(got["spec"].get("nodeName"))

    wait_until(f"the scheduler placing a pod on the node marked {token}", bound)
    world.cp.kubectl("delete", "pod", "node-sentinel", "-n", namespace, "--grace-period=0", "--wait=false")
    wait_until("the node sentinel gone", lambda: "node-sentinel" not in world.pod_names(namespace))
