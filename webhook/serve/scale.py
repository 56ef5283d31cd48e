"""The ``scale`` subresource: `kubectl scale` (or an HPA) changes a workload's replica count
without an UPDATE of the workload, so the gate judges what the scaled workload would be.

Pure functions; the handler does the I/O (GET the parent from the API server, judge in the
pool). The scaled object is judged as a CREATE, so the count is always judged, even on an
admitted or running workload (whose UPDATEs are otherwise Kueue's and pass as not-suspended).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from webhook.wire.admission import AdmissionRequest

# (group, plural) -> specReplicasPath of the CRD's scale subresource, for exactly the CRDs in
# ../shared/crds that serve one (a test keeps this, the CRDs and the webhook rules equal).
SCALE_PATHS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("kubeflow.org", "pytorchjobs"): ("spec", "pytorchReplicaSpecs", "Worker", "replicas"),
    ("kubeflow.org", "paddlejobs"): ("spec", "paddleReplicaSpecs", "Worker", "replicas"),
    ("kubeflow.org", "jaxjobs"): ("spec", "jaxReplicaSpecs", "Worker", "replicas"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets"): ("spec", "replicas"),
}
PARENT_KINDS: Mapping[tuple[str, str], str] = {
    ("kubeflow.org", "pytorchjobs"): "PyTorchJob",
    ("kubeflow.org", "paddlejobs"): "PaddleJob",
    ("kubeflow.org", "jaxjobs"): "JAXJob",
    ("leaderworkerset.x-k8s.io", "leaderworkersets"): "LeaderWorkerSet",
}


def is_scale(req: AdmissionRequest) -> bool:
    return req.sub_resource == "scale" and req.operation in ("CREATE", "UPDATE")


def known(req: AdmissionRequest) -> bool:
    return (req.resource_group, req.resource) in SCALE_PATHS


def parent_path(req: AdmissionRequest) -> str:
    name = req.name or str(((req.obj or {}).get("metadata") or {}).get("name") or "")
    return (
        f"/apis/{req.resource_group}/{req.resource_version}/namespaces/{req.namespace}/{req.resource}/{name}"
    )


def wanted_replicas(req: AdmissionRequest) -> int | None:
    """spec.replicas of the Scale object in the request, if it is a whole number."""
    value = ((req.obj or {}).get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scaled(parent: Mapping[str, Any], path: tuple[str, ...], replicas: int) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(dict(parent))
    node = obj
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[path[-1]] = replicas
    return obj


def as_create(req: AdmissionRequest, parent: Mapping[str, Any], replicas: int) -> AdmissionRequest:
    """The review the gate judges: the parent with the new count, as a CREATE of the parent kind."""
    key = (req.resource_group, req.resource)
    obj = scaled(parent, SCALE_PATHS[key], replicas)
    obj.setdefault("apiVersion", f"{req.resource_group}/{req.resource_version}")
    obj.setdefault("kind", PARENT_KINDS[key])
    return replace(
        req,
        kind=str(obj["kind"]),
        group=req.resource_group,
        version=req.resource_version,
        sub_resource="",
        operation="CREATE",
        obj=obj,
        old_obj=None,
    )
