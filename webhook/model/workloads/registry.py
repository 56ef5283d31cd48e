"""Which objects are workloads, and which adapter reads each.

Kinds are matched on exact apiVersion and kind, as Kueue's integrations match GVKs: a Kubeflow
``MPIJob`` at ``kubeflow.org/v1`` is a different schema from the ``v2beta1`` one read here.
Objects that are not known kinds but look like workloads get a reason string, so the webhook can
admit them untouched and say why it did not look closer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from webhook.model.paths import field_path
from webhook.model.podrequests import NO_DEFAULTS, PodDefaults, pod_requests
from webhook.model.workloads.base import (
    Context,
    RuntimeKey,
    WorkloadPodSets,
    metadata,
)
from webhook.model.workloads.batch import job, pod
from webhook.model.workloads.jobset import jobset
from webhook.model.workloads.kubeflow import replica_job
from webhook.model.workloads.lws import leader_worker_set
from webhook.model.workloads.ray import ray_cluster, ray_job
from webhook.model.workloads.trainjob import train_job
from webhook.wire.errors import BadRequest

Adapter = Callable[[Mapping[str, Any], Context], WorkloadPodSets]

ADAPTERS: Mapping[tuple[str, str], Adapter] = MappingProxyType(
    {
        ("batch/v1", "Job"): job,
        ("v1", "Pod"): pod,
        ("jobset.x-k8s.io/v1alpha2", "JobSet"): jobset,
        ("kubeflow.org/v1", "PyTorchJob"): replica_job,
        ("kubeflow.org/v1", "TFJob"): replica_job,
        ("kubeflow.org/v1", "XGBoostJob"): replica_job,
        ("kubeflow.org/v1", "PaddleJob"): replica_job,
        ("kubeflow.org/v1", "JAXJob"): replica_job,
        ("kubeflow.org/v2beta1", "MPIJob"): replica_job,
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): leader_worker_set,
        ("ray.io/v1", "RayJob"): ray_job,
        ("ray.io/v1", "RayCluster"): ray_cluster,
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"): train_job,
    }
)

# Where each kind says it is suspended: Kueue creates queued workloads suspended and starts
# (admits) them by unsuspending. LeaderWorkerSet and Pod have no such field.
_SUSPEND: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Job": ("spec", "suspend"),
        "JobSet": ("spec", "suspend"),
        "PyTorchJob": ("spec", "runPolicy", "suspend"),
        "TFJob": ("spec", "runPolicy", "suspend"),
        "XGBoostJob": ("spec", "runPolicy", "suspend"),
        "PaddleJob": ("spec", "runPolicy", "suspend"),
        "JAXJob": ("spec", "runPolicy", "suspend"),
        "MPIJob": ("spec", "runPolicy", "suspend"),
        "RayJob": ("spec", "suspend"),
        "RayCluster": ("spec", "suspend"),
        "TrainJob": ("spec", "suspend"),
    }
)

_NO_RUNTIMES: Mapping[RuntimeKey, Mapping[str, Any]] = MappingProxyType({})
# Groups whose kinds are nearly always workloads even when no pod template shows.
_WORKLOAD_GROUPS = frozenset({"kubeflow.org", "ray.io", "batch.volcano.sh", "sparkoperator.k8s.io"})
# x-k8s.io groups that hold no workloads (queues, pod groups, gateways, Cluster API machinery).
_NOT_WORKLOAD_GROUPS = frozenset({"kueue.x-k8s.io", "scheduling.x-k8s.io", "gateway.networking.x-k8s.io"})
# Kinds that carry pod templates without being workloads themselves.
_TEMPLATE_HOLDERS = frozenset({"TrainingRuntime", "ClusterTrainingRuntime", "PodTemplate"})
_SEARCH_DEPTH = 8
_SEARCH_BUDGET = 5000


def is_known_workload(api_version: str, kind: str) -> bool:
    """Whether tasgate reads PodSets from this exact apiVersion and kind."""
    return (api_version, kind) in ADAPTERS


def extract(
    obj: Mapping[str, Any],
    runtimes: Mapping[RuntimeKey, Mapping[str, Any]] = _NO_RUNTIMES,
    namespace: str = "",
    defaults: PodDefaults = NO_DEFAULTS,
) -> WorkloadPodSets | None:
    """The object's PodSets in Kueue's order, or None when it is not a workload to judge.

    ``runtimes`` holds the Trainer runtimes a TrainJob may reference, by (kind, namespace, name);
    ``namespace`` stands in when the object's metadata has none (the AdmissionRequest's).
    ``defaults`` (LimitRange, RuntimeClass) are applied to every PodSet's requests, as Kueue
    applies them before it counts.
    None also covers an object controlled by a known workload: its parent is the workload.
    Raises ``BadRequest`` when ``obj`` is not an object, ``InvalidObject`` when a field is bad.
    """
    if not isinstance(obj, Mapping):
        raise BadRequest(f"the object must be a JSON object, not {type(obj).__name__}")
    adapter = ADAPTERS.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
    if adapter is None or owned_by_workload(obj):
        return None
    found = adapter(obj, Context(namespace, runtimes))
    return _with_defaults(found, defaults) if defaults else found


def _with_defaults(wl: WorkloadPodSets, defaults: PodDefaults) -> WorkloadPodSets:
    pod_sets = []
    for p in wl.pod_sets:
        spec_path = field_path((*p.template_path, "spec"))
        requests = pod_requests(p.template["spec"], spec_path, defaults)
        pod_sets.append(replace(p, requests=MappingProxyType(requests)))
    return replace(wl, pod_sets=tuple(pod_sets))


def suspended(obj: Mapping[str, Any]) -> bool | None:
    """Whether a known workload is suspended; None for kinds without a suspend field (LWS, Pod)
    and for objects tasgate does not read."""
    if not isinstance(obj, Mapping) or not is_known_workload(
        str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    ):
        return None
    path = _SUSPEND.get(str(obj.get("kind", "")))
    if path is None:
        return None
    node: Any = obj
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node is True


def unknown_workload_reason(obj: Mapping[str, Any]) -> str | None:
    """Why an object tasgate does not read still looks like a workload; None if it does not."""
    if not isinstance(obj, Mapping):
        return None
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    group = api_version.rpartition("/")[0]
    if is_known_workload(api_version, kind) or kind in _TEMPLATE_HOLDERS or group in _NOT_WORKLOAD_GROUPS:
        return None
    versions = sorted(v for v, k in ADAPTERS if k == kind and v.rpartition("/")[0] == group)
    if versions:
        return f"{kind} {api_version} is not a version tasgate reads (it reads {', '.join(versions)})"
    where = _find_pod_template(obj.get("spec"), "spec", _SEARCH_DEPTH, [_SEARCH_BUDGET])
    if where is not None:
        return f"{kind} {api_version} has a pod template at {where} but is not a workload kind tasgate knows"
    if _workload_group(group):
        return (
            f"{kind} {api_version} is in group {group}, which holds workloads, but tasgate does not know it"
        )
    return None


def _workload_group(group: str) -> bool:
    if group in _WORKLOAD_GROUPS or group.endswith(".kubeflow.org"):
        return True
    return group.endswith(".x-k8s.io") and not group.endswith("cluster.x-k8s.io")


def _find_pod_template(node: Any, path: str, depth: int, budget: list[int]) -> str | None:
    """Path of the first mapping whose ``spec.containers`` is a list; bounded in depth and size."""
    budget[0] -= 1
    if depth < 0 or budget[0] < 0:
        return None
    if isinstance(node, Mapping):
        spec = node.get("spec")
        if isinstance(node.get("containers"), list) or (
            isinstance(spec, Mapping) and isinstance(spec.get("containers"), list)
        ):
            return path
        children: Sequence[tuple[str, Any]] = [(f"{path}.{k}", v) for k, v in node.items()]
    elif isinstance(node, list):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(node)]
    else:
        return None
    for child_path, child in children:
        found = _find_pod_template(child, child_path, depth - 1, budget)
        if found is not None:
            return found
    return None


def owned_by_workload(obj: Mapping[str, Any]) -> bool:
    """Whether the object's controller is a workload kind tasgate judges (Kueue's rule,
    ``IsOwnerManagedByKueueForObject``): such a child is judged with its parent. Any other
    owner (a CronJob, the user's own ConfigMap) leaves the object a top-level workload."""
    if not isinstance(obj, Mapping):
        return False
    owners = metadata(obj).get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return is_known_workload(str(owner.get("apiVersion", "")), str(owner.get("kind", "")))
    return False
