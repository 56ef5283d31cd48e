"""The workloads the fidelity table submits: Jobs, JobSets, PyTorchJobs, MPIJobs, LWS, usage pods."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from e2e.fidelity_world import NS, QUEUE_LABEL, TAS_QUEUE
from e2e.nodes import GPU

# --- workloads -------------------------------------------------------------------------------------


def pod_template(
    annotations: Mapping[str, str] | None = None,
    *,
    gpus: int = 8,
    cpu: str = "1",
    container: str = "train",
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod template of one container requesting ``cpu`` and ``gpus`` (plus ``extra`` requests)."""
    requests: dict[str, str] = {"cpu": cpu, **(extra or {})}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": container, "image": "trainer:latest", "resources": resources}],
        }
    }
    if annotations:
        template["metadata"] = {"annotations": dict(annotations)}
    return template


def _metadata(name: str, queue: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def job(
    name: str,
    pods: int,
    annotations: Mapping[str, str] | None = None,
    *,
    queue: str = TAS_QUEUE,
    job_annotations: Mapping[str, str] | None = None,
    **template: Any,
) -> dict[str, Any]:
    """An Indexed batch/v1 Job of ``pods`` pods (``pod_template`` keywords pass through)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(name, queue, job_annotations),
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "suspend": True,
            "template": pod_template(annotations, **template),
        },
    }


def replicated_job(name: str, replicas: int, pods: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "completionMode": "Indexed",
                "template": template,
            }
        },
    }


def jobset(name: str, replicated: Sequence[dict[str, Any]], *, queue: str = TAS_QUEUE) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _metadata(name, queue),
        "spec": {"suspend": True, "replicatedJobs": list(replicated)},
    }


def pytorch_job(
    name: str, workers: int, annotations: Mapping[str, str], *, queue: str = TAS_QUEUE
) -> dict[str, Any]:
    def spec(replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": pod_template(annotations, container="pytorch"),
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": _metadata(name, queue),
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(workers)},
        },
    }


def mpi_job(
    name: str, workers: int, annotations: Mapping[str, str], *, queue: str = TAS_QUEUE
) -> dict[str, Any]:
    """An MPIJob whose launcher works too (``runLauncherAsWorker``): Kueue writes the pod index offset."""
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": _metadata(name, queue),
        "spec": {
            "slotsPerWorker": 1,
            "runLauncherAsWorker": True,
            "runPolicy": {"suspend": True},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod_template(annotations, container="launcher")},
                "Worker": {"replicas": workers, "template": pod_template(annotations, container="worker")},
            },
        },
    }


def leader_worker_set(
    name: str, size: int, annotations: Mapping[str, str], *, queue: str = TAS_QUEUE
) -> dict[str, Any]:
    """One LWS group: a leader and ``size - 1`` workers. ``rolloutStrategy.type`` is set by hand
    (the LWS controller's defaulting webhook is absent, and Kueue rejects an empty type)."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(name, queue),
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate"},
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod_template(annotations),
                "workerTemplate": pod_template(annotations),
            },
        },
    }


RESOURCES: Mapping[str, str] = {
    "Job": "jobs.batch",
    "JobSet": "jobsets.jobset.x-k8s.io",
    "PyTorchJob": "pytorchjobs.kubeflow.org",
    "MPIJob": "mpijobs.kubeflow.org",
    "LeaderWorkerSet": "leaderworkersets.leaderworkerset.x-k8s.io",
}


def same_object(event: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether an audit event's objectRef is ``obj`` (resource, group, namespace and name)."""
    ref = event.get("objectRef") or {}
    resource, _, group = RESOURCES[obj["kind"]].partition(".")
    return (
        ref.get("resource") == resource
        and (ref.get("apiGroup") or "") == group
        and ref.get("namespace") == obj["metadata"]["namespace"]
        and ref.get("name") == obj["metadata"]["name"]
    )


# Where each kind keeps its suspend flag (LeaderWorkerSet has none: Kueue gates its pods instead).
SUSPEND_PATHS: Mapping[str, tuple[str, ...]] = {
    "Job": ("spec", "suspend"),
    "JobSet": ("spec", "suspend"),
    "PyTorchJob": ("spec", "runPolicy", "suspend"),
    "MPIJob": ("spec", "runPolicy", "suspend"),
}


def in_namespace(obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    copy["metadata"]["namespace"] = namespace
    return copy


def usage_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A bound Pod (no scheduler here) using ``gpus`` GPUs of ``node``; not Kueue's, not queued."""
    resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"fidelity.tasgate.io/usage": "true"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busy", "resources": resources}]},
    }
