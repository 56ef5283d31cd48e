"""batch/v1 Job and v1 Pod (plain pods and Kueue pod groups)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from webhook.model.annotations import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
)
from webhook.model.annotations import POD_ROLE_HASH_ANNOTATION as ROLE_HASH_ANNOTATION
from webhook.model.gosyntax import parse_int
from webhook.model.workloads.base import (
    MAX_COUNT,
    Context,
    WorkloadPodSets,
    count_at,
    pod_set,
    string_map,
    workload,
)
from webhook.wire.errors import InvalidObject

DEFAULT_POD_SET_NAME = "main"


def job(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """One PodSet ``main``: as many pods as run at once, min(parallelism, completions).

    ``kueue.x-k8s.io/job-min-parallelism`` gives it a minimum count (partial admission, on by
    default in Kueue), read as Kueue's ``Job.minPodsCount`` does: ``strconv.Atoi``; a value
    Kueue's webhook refuses (not in 1..count-1) is reported by the rules and sets no minimum.
    """
    parallelism = count_at(obj, ("spec", "parallelism"), 1)
    completions = count_at(obj, ("spec", "completions"), parallelism)
    count = min(parallelism, completions)
    main = pod_set(DEFAULT_POD_SET_NAME, count, obj, ("spec", "template"))
    raw = string_map(obj, "annotations").get(JOB_MIN_PARALLELISM_ANNOTATION)
    text = raw if isinstance(raw, str) else None
    minimum = parse_int(text, 64) if text is not None else None
    if minimum is not None and 0 < minimum < count:
        main = replace(main, min_count=minimum)
    return workload(obj, ctx, [main], min_parallelism=text)


def pod(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """A plain pod is PodSet ``main`` of one; a pod group counts its declared total.

    Kueue names a group's PodSets by an 8-character hash of each pod role's scheduling shape and
    builds them from all the group's pods. One admission request shows one pod, so the group is
    taken as homogeneous: one PodSet of the total count, named by the pod's
    ``kueue.x-k8s.io/role-hash`` annotation when present, else ``main``.
    """
    if POD_GROUP_NAME_LABEL not in string_map(obj, "labels"):
        return workload(obj, ctx, [pod_set(DEFAULT_POD_SET_NAME, 1, obj, ())])
    annotations = string_map(obj, "annotations")
    count = _group_total_count(annotations)
    name = str(annotations.get(ROLE_HASH_ANNOTATION) or DEFAULT_POD_SET_NAME)
    return workload(obj, ctx, [pod_set(name, count, obj, ())])


def _group_total_count(annotations: Mapping[str, Any]) -> int:
    path = f"metadata.annotations[{POD_GROUP_TOTAL_COUNT_ANNOTATION}]"
    raw = annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION)
    if raw is None:
        raise InvalidObject.at(
            path, f"a pod with the {POD_GROUP_NAME_LABEL} label needs it", "Required value"
        )
    total = parse_int(str(raw), 64)  # Kueue's groupTotalCount: strconv.Atoi, then > 0
    if total is None:
        raise InvalidObject.at(path, f'"{raw}": must be an integer')
    if not 1 <= total <= MAX_COUNT:
        raise InvalidObject.at(path, f'"{raw}": must be between 1 and {MAX_COUNT}')
    return total
