"""Kubeflow training-operator v1 jobs and MPI-operator v2beta1 MPIJob.

Kueue lists replica types in a fixed order per kind (``OrderedReplicaTypes``), skips the ones the
job leaves out, and names each PodSet by the lower-cased type. ``replicas`` defaults to 1.
MPIJob's ``runLauncherAsWorker`` changes no count: Kueue only offsets the worker pod index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.model.paths import Key, Path, field_path
from webhook.model.workloads.base import (
    Context,
    PodSetTemplate,
    WorkloadPodSets,
    count_at,
    lookup,
    mapping_at,
    pod_set,
    workload,
)
from webhook.wire.errors import InvalidObject


@dataclass(frozen=True)
class ReplicaLayout:
    """Where a kind keeps its replica specs, and Kueue's order of replica types."""

    field: str
    types: tuple[str, ...]


LAYOUTS: dict[str, ReplicaLayout] = {
    "PyTorchJob": ReplicaLayout("pytorchReplicaSpecs", ("Master", "Worker")),
    "XGBoostJob": ReplicaLayout("xgbReplicaSpecs", ("Master", "Worker")),
    "PaddleJob": ReplicaLayout("paddleReplicaSpecs", ("Master", "Worker")),
    "TFJob": ReplicaLayout("tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    "JAXJob": ReplicaLayout("jaxReplicaSpecs", ("Worker",)),
    "MPIJob": ReplicaLayout("mpiReplicaSpecs", ("Launcher", "Worker")),
}

VOLCANO_SCHEDULER = "volcano"


def replica_job(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """PodSets of any kind in ``LAYOUTS``; unknown replica types are errors, as the operator says."""
    layout = LAYOUTS[str(obj.get("kind"))]
    specs_path: Path = ("spec", layout.field)
    specs = mapping_at(obj, specs_path)
    unknown = sorted(str(t) for t in specs if t not in layout.types)
    if unknown:
        allowed = ", ".join(layout.types)
        raise InvalidObject.at(
            field_path(specs_path), f"unsupported replica type(s) {unknown}; use {allowed}"
        )
    pod_sets = [
        _replica_pod_set(obj, (*specs_path, Key(t))) for t in layout.types if specs.get(t) is not None
    ]
    return workload(obj, ctx, pod_sets, operator_gang=operator_gang(obj, pod_sets))


def _replica_pod_set(obj: Mapping[str, Any], replica_path: Path) -> PodSetTemplate:
    mapping_at(obj, replica_path)
    count = count_at(obj, (*replica_path, "replicas"), 1)
    return pod_set(str(replica_path[-1]).lower(), count, obj, (*replica_path, "template"))


def operator_gang(obj: Mapping[str, Any], pod_sets: list[PodSetTemplate]) -> str | None:
    """Which gang backend the operator itself drives, when ``runPolicy.schedulingPolicy`` is set.

    The operator's own flag picks the backend, which the object cannot show; a Volcano queue or a
    ``volcano`` schedulerName on the pods gives Volcano away, otherwise it is Coscheduling.
    """
    policy = lookup(obj, ("spec", "runPolicy", "schedulingPolicy"), required=False)
    if not isinstance(policy, Mapping):
        return None
    schedulers = {lookup(ps.template, ("spec", "schedulerName"), required=False) for ps in pod_sets}
    if policy.get("queue") or VOLCANO_SCHEDULER in schedulers:
        return "volcano"
    return "coscheduling"
