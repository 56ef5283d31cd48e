"""ray.io/v1 RayCluster and RayJob.

PodSets: ``head`` (1), then one per worker group named by its lower-cased ``groupName`` with
``replicas`` (Kueue reads a missing value as 1) times ``numOfHosts``. A RayJob in ``K8sJobMode``
(KubeRay's default) adds a last PodSet ``submitter`` for the submitter Job's pod; without
``submitterPodTemplate`` Kueue assumes KubeRay's default submitter, reproduced here. A RayJob that
targets an existing cluster via ``clusterSelector`` is not managed by Kueue at all.

The head counts what KubeRay adds to its pod, as Kueue's ``BuildPodSets`` does: the autoscaler
sidecar (``enableInTreeAutoscaling``), the GCS fault-tolerance Redis cleanup (its 200m / 256Mi
raise the Ray container's requests), and in ``SidecarMode`` the job submitter container.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from webhook.model.paths import Path, field_path
from webhook.model.quantity import parse_quantity
from webhook.model.workloads.base import (
    Context,
    PodSetTemplate,
    WorkloadPodSets,
    checked_count,
    count_at,
    lookup,
    mapping_at,
    pod_set,
    pod_set_from,
    pod_set_list_at,
    string_map,
    workload,
)
from webhook.wire.errors import InvalidObject

SCHEDULER_LABEL = "ray.io/scheduler-name"
SUBMITTER_PATH: Path = ("spec", "submitterPodTemplate")


FT_ANNOTATION = "ray.io/ft-enabled"
REDIS_CLEANUP = {"cpu": "200m", "memory": "256Mi"}
AUTOSCALER = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
SUBMITTER = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


def ray_cluster(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """PodSets of a RayCluster."""
    return workload(obj, ctx, cluster_pod_sets(obj, ("spec",)), operator_gang=_operator_gang(obj))


def ray_job(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """PodSets of a RayJob: its cluster's, plus the submitter in K8sJobMode."""
    if lookup(obj, ("spec", "clusterSelector"), required=False):
        reason = "spec.clusterSelector: the job runs on an existing RayCluster; Kueue does not manage it"
        return workload(obj, ctx, [], unresolved=reason)
    mode = lookup(obj, ("spec", "submissionMode"), required=False) or "K8sJobMode"
    pod_sets = cluster_pod_sets(obj, ("spec", "rayClusterSpec"), sidecar_submitter=mode == "SidecarMode")
    if mode == "K8sJobMode":
        pod_sets.append(_submitter(obj, pod_sets[0]))
    return workload(obj, ctx, pod_sets, operator_gang=_operator_gang(obj))


def cluster_pod_sets(
    obj: Mapping[str, Any], spec_path: Path, sidecar_submitter: bool = False
) -> list[PodSetTemplate]:
    """``head`` then each worker group, in ``workerGroupSpecs`` order."""
    pod_sets = [_head(obj, spec_path, sidecar_submitter)]
    groups_path: Path = (*spec_path, "workerGroupSpecs")
    for i in range(len(pod_set_list_at(obj, groups_path, required=False))):
        pod_sets.append(_worker_group(obj, (*groups_path, i)))
    return pod_sets


def _head(obj: Mapping[str, Any], spec_path: Path, sidecar_submitter: bool) -> PodSetTemplate:
    """The head PodSet with the containers KubeRay adds to the head pod, as Kueue counts them."""
    path: Path = (*spec_path, "headGroupSpec", "template")
    cluster = mapping_at(obj, spec_path)
    template = copy.deepcopy(dict(mapping_at(obj, path)))
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return pod_set("head", 1, obj, path)  # pod_set names the bad field
    containers = list(spec.get("containers") or [])
    if _fault_tolerant(obj, cluster):
        if not containers or not isinstance(containers[0], Mapping):
            raise InvalidObject.at(
                field_path((*path, "spec", "containers")),
                "cannot account for Redis cleanup resources: "
                "head pod template must include the Ray container",
            )
        containers[0] = _with_min_requests(containers[0], REDIS_CLEANUP, (*path, "spec", "containers", 0))
    if cluster.get("enableInTreeAutoscaling") is True:
        options = cluster.get("autoscalerOptions")
        own = options.get("resources") if isinstance(options, Mapping) else None
        containers.append({"name": "autoscaler", "resources": own if own is not None else AUTOSCALER})
    if sidecar_submitter:
        containers.append({"name": "ray-job-submitter", "resources": SUBMITTER})
    spec["containers"] = containers
    return pod_set_from("head", 1, template, path)


def _fault_tolerant(obj: Mapping[str, Any], cluster: Mapping[str, Any]) -> bool:
    """KubeRay's ``IsGCSFaultToleranceEnabled``: the annotation, or GCS FT options set."""
    annotation = string_map(obj, "annotations").get(FT_ANNOTATION)
    return (isinstance(annotation, str) and annotation.lower() == "true") or (
        cluster.get("gcsFaultToleranceOptions") is not None
    )


def _with_min_requests(
    container: Mapping[str, Any], minimum: Mapping[str, str], path: Path
) -> dict[str, Any]:
    """``MergeResourceListKeepMax`` on the container's own requests (limits untouched)."""
    out = dict(container)
    resources = dict(out.get("resources") or {}) if isinstance(out.get("resources"), Mapping) else {}
    requests = dict(resources.get("requests") or {}) if isinstance(resources.get("requests"), Mapping) else {}
    for resource, amount in minimum.items():
        where = field_path((*path, "resources", "requests", resource))
        if resource not in requests or parse_quantity(requests[resource], where) < parse_quantity(
            amount, where
        ):
            requests[resource] = amount
    resources["requests"] = requests
    out["resources"] = resources
    return out


def _worker_group(obj: Mapping[str, Any], group_path: Path) -> PodSetTemplate:
    name = lookup(obj, (*group_path, "groupName"))
    if not isinstance(name, str) or not name:
        raise InvalidObject.at(
            field_path((*group_path, "groupName")), f"{name!r}: must be a non-empty string"
        )
    replicas = count_at(obj, (*group_path, "replicas"), 1)
    hosts = count_at(obj, (*group_path, "numOfHosts"), 1)
    count = checked_count(replicas * max(hosts, 1), (*group_path, "replicas"))
    return pod_set(name.lower(), count, obj, (*group_path, "template"))


def _submitter(obj: Mapping[str, Any], head: PodSetTemplate) -> PodSetTemplate:
    if lookup(obj, SUBMITTER_PATH, required=False) is not None:
        return pod_set("submitter", 1, obj, SUBMITTER_PATH)
    containers = head.template.get("spec", {}).get("containers") or [{}]
    image = containers[0].get("image", "") if isinstance(containers[0], Mapping) else ""
    return pod_set_from("submitter", 1, default_submitter(str(image)), SUBMITTER_PATH, synthesized=True)


def default_submitter(image: str) -> Mapping[str, Any]:
    """KubeRay's default submitter pod, as Kueue copies it (ray-operator common/job.go)."""
    resources = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}
    container = {"name": "ray-job-submitter", "image": image, "resources": resources}
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


def _operator_gang(obj: Mapping[str, Any]) -> str | None:
    """KubeRay creates a Volcano PodGroup itself when its batch scheduler label says volcano."""
    return "volcano" if string_map(obj, "labels").get(SCHEDULER_LABEL) == "volcano" else None
