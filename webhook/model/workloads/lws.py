"""leaderworkerset.x-k8s.io/v1 LeaderWorkerSet.

Kueue admits each replica group as its own Workload, so the PodSets describe one group and
``groups`` says how many such groups there are. With a leader template a group is ``leader`` (1)
plus ``worker`` (size - 1); without one it is ``main`` (size) built from the worker template.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model.paths import Path, field_path
from webhook.model.workloads.base import (
    Context,
    WorkloadPodSets,
    count_at,
    lookup,
    mapping_at,
    pod_set,
    workload,
)
from webhook.wire.errors import InvalidObject

TEMPLATE: Path = ("spec", "leaderWorkerTemplate")


def leader_worker_set(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """One group's PodSets, plus ``groups`` = ``spec.replicas`` (default 1)."""
    mapping_at(obj, TEMPLATE)
    size = count_at(obj, (*TEMPLATE, "size"), 1)
    if size < 1:
        raise InvalidObject.at(field_path((*TEMPLATE, "size")), f"{size}: must be greater than or equal to 1")
    groups = count_at(obj, ("spec", "replicas"), 1)
    worker_path: Path = (*TEMPLATE, "workerTemplate")
    if lookup(obj, (*TEMPLATE, "leaderTemplate"), required=False) is None:
        pod_sets = [pod_set("main", size, obj, worker_path)]
    else:
        leader = pod_set("leader", 1, obj, (*TEMPLATE, "leaderTemplate"))
        pod_sets = [leader, pod_set("worker", max(size - 1, 0), obj, worker_path)]
    return workload(obj, ctx, pod_sets, groups=groups)
