"""trainer.kubeflow.org/v1alpha1 TrainJob: the JobSet its runtime would become.

A TrainJob holds no pod template; its (Cluster)TrainingRuntime does. Kueue asks Trainer's runtime
framework for the child JobSet and takes that JobSet's PodSets, so this module replays the parts
of that framework that change names, counts or requests:

* every replicated job starts at ``parallelism`` (default 1) pods; a job labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` starts at ``mlPolicy.numNodes``;
* ``spec.trainer.numNodes`` overrides the trainer job's count; with an MPI policy it sets the job
  named ``node`` instead (one less, at least 1, when ``runLauncherAsNode``);
* every trainer-labelled job then runs the first trainer job's count; trainer and initializer
  jobs run one replica; every job runs parallelism = completions = its count;
* ``spec.trainer.resourcesPerNode`` replaces the resources of the container named ``node``;
* ``spec.runtimePatches`` may add pod labels, annotations, node selectors, tolerations, affinity.

Template paths point into the runtime object (``WorkloadPodSets.runtime``), not the TrainJob.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.model.paths import Path
from webhook.model.workloads.base import (
    Context,
    PodSetTemplate,
    RuntimeKey,
    WorkloadPodSets,
    count_at,
    job_name,
    list_at,
    lookup,
    mapping_at,
    metadata,
    pod_set_from,
    pod_set_list_at,
    string_map,
    workload,
)
from webhook.wire.errors import InvalidObject

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
SINGLE_REPLICA_ANCESTORS = frozenset({TRAINER, "dataset-initializer", "model-initializer"})
NODE = "node"
RUNTIME_GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
JOBS_PATH: Path = ("spec", "template", "spec", "replicatedJobs")
MPI_POLICY: Path = ("spec", "mlPolicy", "mpi")


@dataclass(frozen=True)
class _Trainer:
    """What the TrainJob says that changes its runtime's pods."""

    num_nodes: int | None
    resources: Mapping[str, Any] | None
    patches: Mapping[str, list[Mapping[str, Any]]]


@dataclass
class _Job:
    """Working state for one replicated job while Trainer's count rules are replayed."""

    index: int
    name: str
    ancestor: str | None
    count: int
    replicas: int


def train_job(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """PodSets of a TrainJob, or none with ``unresolved`` set when its runtime is unavailable."""
    trainer = _trainer(obj)
    key = runtime_key(obj, ctx)
    if isinstance(key, str):
        return workload(obj, ctx, [], unresolved=key)
    runtime = ctx.runtimes.get(key)
    if runtime is None:
        return workload(obj, ctx, [], unresolved=f"{key[0]} {_display(key)} is not known", runtime=key)
    try:
        pod_sets = runtime_pod_sets(runtime, trainer)
    except InvalidObject as exc:
        reason = f"{key[0]} {_display(key)} is malformed: {exc}"
        return workload(obj, ctx, [], unresolved=reason, runtime=key)
    return workload(obj, ctx, pod_sets, operator_gang=_operator_gang(runtime), runtime=key)


def runtime_key(obj: Mapping[str, Any], ctx: Context) -> RuntimeKey | str:
    """The runtime's (kind, namespace, name), or why it cannot be one Trainer resolves."""
    ref = mapping_at(obj, ("spec", "runtimeRef"))
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject.at("spec.runtimeRef.name", f"{name!r}: must be a non-empty string")
    group = ref.get("apiGroup") or RUNTIME_GROUP
    kind = ref.get("kind") or RUNTIME_KINDS[0]
    if group != RUNTIME_GROUP or kind not in RUNTIME_KINDS:
        return f"spec.runtimeRef: {kind} of group {group} is not a Trainer runtime"
    namespace = "" if kind == RUNTIME_KINDS[0] else str(metadata(obj).get("namespace") or ctx.namespace)
    return (str(kind), namespace, name)


def runtime_pod_sets(runtime: Mapping[str, Any], trainer: _Trainer) -> list[PodSetTemplate]:
    """The child JobSet's PodSets, in the runtime's replicated-job order."""
    jobs = [_job(runtime, i) for i in range(len(pod_set_list_at(runtime, JOBS_PATH)))]
    _apply_num_nodes(runtime, jobs, trainer)
    launcher_as_node = lookup(runtime, (*MPI_POLICY, "runLauncherAsNode"), required=False) is True
    pod_sets = []
    for job in jobs:
        path: Path = (*JOBS_PATH, job.index, "template", "spec", "template")
        template = copy.deepcopy(dict(mapping_at(runtime, path)))
        if job.ancestor == TRAINER or (launcher_as_node and job.name == NODE):
            _set_node_resources(template, trainer.resources)
        for patch in trainer.patches.get(job.name, []):
            _apply_patch(template, patch)
        pod_sets.append(pod_set_from(job.name, job.count * job.replicas, template, path))
    return pod_sets


def _job(runtime: Mapping[str, Any], index: int) -> _Job:
    path: Path = (*JOBS_PATH, index)
    mapping_at(runtime, path)
    labels = string_map(mapping_at(runtime, (*path, "template"), required=False), "labels")
    ancestor = labels.get(ANCESTOR_LABEL)
    count = count_at(runtime, (*path, "template", "spec", "parallelism"), 1)
    has_ml_policy = lookup(runtime, ("spec", "mlPolicy"), required=False) is not None
    if ancestor == TRAINER and has_ml_policy:
        count = count_at(runtime, ("spec", "mlPolicy", "numNodes"), 1)
    replicas = 1 if ancestor in SINGLE_REPLICA_ANCESTORS else count_at(runtime, (*path, "replicas"), 1)
    return _Job(index, job_name(runtime, path), ancestor, count, replicas)


def _apply_num_nodes(runtime: Mapping[str, Any], jobs: list[_Job], trainer: _Trainer) -> None:
    trainers = [job for job in jobs if job.ancestor == TRAINER]
    mpi = lookup(runtime, MPI_POLICY, required=False)
    if trainer.num_nodes is not None and isinstance(mpi, Mapping):
        launcher_as_node = mpi.get("runLauncherAsNode") is True
        nodes = max(trainer.num_nodes - 1, 1) if launcher_as_node else trainer.num_nodes
        for job in jobs:
            if job.name == NODE:
                job.count = nodes
    elif trainer.num_nodes is not None and trainers:
        trainers[0].count = trainer.num_nodes
    for job in trainers:
        job.count = trainers[0].count


def _trainer(obj: Mapping[str, Any]) -> _Trainer:
    num_nodes = None
    if lookup(obj, ("spec", "trainer", "numNodes"), required=False) is not None:
        num_nodes = count_at(obj, ("spec", "trainer", "numNodes"), 1)
    resources = mapping_at(obj, ("spec", "trainer", "resourcesPerNode"), required=False)
    usable = resources if resources.get("limits") or resources.get("requests") else None
    return _Trainer(num_nodes, usable, _patches(obj))


def _patches(obj: Mapping[str, Any]) -> Mapping[str, list[Mapping[str, Any]]]:
    """Pod-template patches from ``spec.runtimePatches``, by replicated job name, in order."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    patches_path: Path = ("spec", "runtimePatches")
    for i in range(len(list_at(obj, patches_path, required=False))):
        jobs_path: Path = (*patches_path, i, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        for j in range(len(list_at(obj, jobs_path, required=False))):
            name = lookup(obj, (*jobs_path, j, "name"))
            pod = mapping_at(obj, (*jobs_path, j, "template", "spec", "template"), required=False)
            found.setdefault(str(name), []).append(pod)
    return found


def _set_node_resources(template: dict[str, Any], resources: Mapping[str, Any] | None) -> None:
    spec = template.get("spec")
    if resources is None or not isinstance(spec, dict):
        return
    for container in spec.get("containers") or []:
        if isinstance(container, dict) and container.get("name") == NODE:
            container["resources"] = copy.deepcopy(dict(resources))


def _apply_patch(template: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Merge the scheduling-relevant parts of one runtime patch into a pod template."""
    for section, keys in (("metadata", ("labels", "annotations")), ("spec", ("nodeSelector",))):
        source = patch.get(section)
        if not isinstance(source, Mapping):
            continue
        target = template.setdefault(section, {})
        for key in keys:
            if isinstance(source.get(key), Mapping):
                target[key] = {**(target.get(key) or {}), **source[key]}
    spec_patch = patch.get("spec")
    if isinstance(spec_patch, Mapping):
        for key in ("tolerations", "affinity"):
            if spec_patch.get(key) is not None:
                template.setdefault("spec", {})[key] = copy.deepcopy(spec_patch[key])


def _operator_gang(runtime: Mapping[str, Any]) -> str | None:
    policy = mapping_at(runtime, ("spec", "podGroupPolicy"), required=False)
    for backend in ("coscheduling", "volcano"):
        if policy.get(backend) is not None:
            return backend
    return None


def _display(key: RuntimeKey) -> str:
    return f"{key[1]}/{key[2]}" if key[1] else key[2]
