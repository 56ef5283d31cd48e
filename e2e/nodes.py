"""Node objects that look Ready to Kueue's TAS and to tasgate, on a control plane with no kubelet.

Without a kubelet or a node lifecycle controller a Node is only what the harness writes:

- ``status`` is a subresource, so capacity, allocatable and the ``Ready`` condition go in with a
  status patch after the create.
- The API server's TaintNodesByCondition plugin taints every new Node
  ``node.kubernetes.io/not-ready:NoSchedule``; nothing here lifts it, so ``add_node`` removes it the
  way the node lifecycle controller would for a Ready node. Kueue's TAS ignores nodes that carry an
  untolerated NoSchedule taint (see KUEUE_E2E.md in shared/ beside the checkout, pitfall C).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from e2e.controlplane import ControlPlane

HOSTNAME_LABEL = "kubernetes.io/hostname"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
GPU = "nvidia.com/gpu"
DEFAULT_ALLOCATABLE: Mapping[str, str] = {"cpu": "64", "memory": "512Gi", GPU: "8", "pods": "110"}


def node_manifest(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A Node named ``name`` with ``labels`` plus ``kubernetes.io/hostname: <name>``."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**labels, HOSTNAME_LABEL: name}},
    }


def ready_status(allocatable: Mapping[str, str] = DEFAULT_ALLOCATABLE) -> dict[str, Any]:
    """The status patch of a Ready node whose capacity equals ``allocatable``."""
    return {
        "status": {
            "allocatable": dict(allocatable),
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
        }
    }


def add_node(
    cp: ControlPlane,
    name: str,
    labels: Mapping[str, str],
    allocatable: Mapping[str, str] = DEFAULT_ALLOCATABLE,
) -> None:
    """Create (or update) a Ready, schedulable Node: labels, status, and no not-ready taint."""
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(name, labels)))
    cp.kubectl(
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(ready_status(allocatable)),
    )
    # check=False: the taint is already gone when the node existed before (kubectl then exits 1).
    cp.kubectl("taint", "nodes", name, f"{NOT_READY_TAINT}:NoSchedule-", check=False)
