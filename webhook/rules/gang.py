"""Gang-scheduling checks: one backend per workload, one PodGroup per backend, a reachable quorum.

A pod joins a Coscheduling PodGroup through a label and a Volcano PodGroup through an
annotation. A workload that asks for both, or that adds either to a job whose operator already
creates PodGroups (Kubeflow ``runPolicy.schedulingPolicy``, Trainer ``podGroupPolicy``, KubeRay's
``ray.io/scheduler-name: volcano``), never reaches quorum anywhere and stays pending
(kubeflow/trainer#4060). Neither does one whose PodSets name different PodGroups, nor one whose
declared minimum exceeds the pods it has.

Only real quorum hints are checked: the retired lightweight Coscheduling plugin's
``pod-group.scheduling.sigs.k8s.io/min-available`` pod label (validated per template), and
Volcano's ``scheduling.volcano.sh/group-min-member``, which Volcano reads from the pods' *owner*
object (``owner_min_member_errors``). There is no ``scheduling.x-k8s.io/min-member`` hint: the
Coscheduling quorum lives only in the PodGroup object's ``spec.minMember``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.model.annotations import (
    COSCHEDULING_LABELS,
    LIGHTWEIGHT_MIN_AVAILABLE_LABEL,
    LIGHTWEIGHT_POD_GROUP_NAME_LABEL,
    VOLCANO_GROUP_ANNOTATIONS,
    VOLCANO_GROUP_MIN_MEMBER_ANNOTATION,
)
from webhook.model.gosyntax import FORBIDDEN, error, go_quote, invalid, parse_int
from webhook.model.paths import key
from webhook.model.podset import PodSetView
from webhook.model.workloads import WorkloadPodSets
from webhook.wire.errors import FieldError

_OPERATOR_SOURCE = {
    "TrainJob": "the runtime's spec.podGroupPolicy makes Trainer",
    "RayJob": "the ray.io/scheduler-name label makes KubeRay",
    "RayCluster": "the ray.io/scheduler-name label makes KubeRay",
}
_KUBEFLOW_SOURCE = "spec.runPolicy.schedulingPolicy makes the training operator"

Membership = list[tuple[str, str]]  # (path of the label/annotation, PodGroup name)


def validate_gang(wl: WorkloadPodSets, pod_set_views: Sequence[PodSetView]) -> list[FieldError]:
    """All gang rules for one workload."""
    coscheduling: Membership = []
    volcano: Membership = []
    for view in pod_set_views:
        coscheduling += [
            (view.label_path(k), view.labels[k]) for k in COSCHEDULING_LABELS if k in view.labels
        ]
        volcano += [
            (view.annotation_path(k), view.annotations[k])
            for k in VOLCANO_GROUP_ANNOTATIONS
            if k in view.annotations
        ]

    errors: list[FieldError] = []
    if wl.operator_gang is not None:
        source = _OPERATOR_SOURCE.get(wl.kind, _KUBEFLOW_SOURCE)
        detail = (
            f"may not be set: {source} create a {wl.operator_gang} PodGroup for this job itself, and "
            "a second gang backend leaves the job pending forever (kubeflow/trainer#4060)"
        )
        errors += [error(FORBIDDEN, path, detail) for path, _ in coscheduling + volcano]
    elif coscheduling and volcano:
        first = coscheduling[0][0]
        detail = (
            f"may not be set together with the Coscheduling label {first}: a workload must use one gang "
            "scheduler, and pods split between two PodGroups never reach either quorum"
        )
        errors += [error(FORBIDDEN, path, detail) for path, _ in volcano]
    errors += _same_group(coscheduling, "Coscheduling")
    errors += _same_group(volcano, "Volcano")
    errors += _min_available(wl, pod_set_views)
    return errors


def _same_group(members: Membership, backend: str) -> list[FieldError]:
    """Every PodSet that names a PodGroup of ``backend`` must name the same one."""
    if not members:
        return []
    first_path, first = members[0]
    detail = (
        f"names a different {backend} PodGroup than {first_path} ({go_quote(first)}); "
        "all pods of one workload must join one PodGroup"
    )
    return [invalid(path, name, detail) for path, name in members[1:] if name != first]


def _min_available(wl: WorkloadPodSets, pod_set_views: Sequence[PodSetView]) -> list[FieldError]:
    """The lightweight Coscheduling quorum label must be a count the group can reach."""
    pods: dict[str, int] = {}
    for view in pod_set_views:
        group = view.labels.get(LIGHTWEIGHT_POD_GROUP_NAME_LABEL)
        if group is not None:
            pods[group] = pods.get(group, 0) + view.count * wl.groups
    errors: list[FieldError] = []
    for view in pod_set_views:
        group = view.labels.get(LIGHTWEIGHT_POD_GROUP_NAME_LABEL)
        raw = view.labels.get(LIGHTWEIGHT_MIN_AVAILABLE_LABEL)
        if raw is None:
            continue
        path = view.label_path(LIGHTWEIGHT_MIN_AVAILABLE_LABEL)
        if group is None:
            detail = (
                f"has no effect without the {LIGHTWEIGHT_POD_GROUP_NAME_LABEL} label naming the pod group"
            )
            errors.append(invalid(path, raw, detail))
            continue
        errors += _quorum(raw, path, pods[group], f"pod group {go_quote(group)}")
    return errors


def _quorum(raw: str, path: str, total: int, what: str) -> list[FieldError]:
    minimum = parse_int(raw.strip(), 64)
    if minimum is None:
        return [invalid(path, raw, "must be an integer")]
    if minimum < 1:
        return [invalid(path, raw, "must be greater than or equal to 1")]
    if minimum > total:
        detail = f"exceeds the {total} pod(s) of {what}, so the gang could never reach its quorum"
        return [invalid(path, raw, detail)]
    return []


def owner_min_member_errors(
    owner_annotations: Mapping[str, object], total_pods: int, path: str = "metadata.annotations"
) -> list[FieldError]:
    """Volcano's ``group-min-member`` on the object that owns the pods (a batch Job's metadata).

    Volcano's PodGroup controller copies it into ``spec.minMember`` of the PodGroup it creates
    for pods that name no PodGroup; more than the pods there are leaves all of them pending.
    """
    raw = owner_annotations.get(VOLCANO_GROUP_MIN_MEMBER_ANNOTATION)
    if raw is None:
        return []
    at = key(path, VOLCANO_GROUP_MIN_MEMBER_ANNOTATION)
    if not isinstance(raw, str):
        return [invalid(at, raw, "must be a string")]
    return _quorum(raw, at, total_pods, "this workload")
