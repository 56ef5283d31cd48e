"""jobset.x-k8s.io/v1alpha2 JobSet: one PodSet per replicated job, named after it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model.paths import Path
from webhook.model.workloads.base import (
    Context,
    PodSetTemplate,
    WorkloadPodSets,
    checked_count,
    count_at,
    job_name,
    mapping_at,
    pod_set,
    pod_set_list_at,
    workload,
)


def jobset(obj: Mapping[str, Any], ctx: Context) -> WorkloadPodSets:
    """PodSets in ``replicatedJobs`` order; count = replicas x min(parallelism, completions)."""
    jobs_path: Path = ("spec", "replicatedJobs")
    jobs = pod_set_list_at(obj, jobs_path)
    return workload(obj, ctx, [replicated_job(obj, (*jobs_path, i)) for i in range(len(jobs))])


def replicated_job(root: Mapping[str, Any], job_path: Path) -> PodSetTemplate:
    """One replicated job of a JobSet (or of a Trainer runtime's JobSet template)."""
    mapping_at(root, job_path)
    name = job_name(root, job_path)
    replicas = count_at(root, (*job_path, "replicas"), 1)
    total = checked_count(
        replicas * pods_per_replica(root, (*job_path, "template", "spec")), (*job_path, "replicas")
    )
    return pod_set(name, total, root, (*job_path, "template", "spec", "template"))


def pods_per_replica(root: Mapping[str, Any], job_spec_path: Path) -> int:
    """Pods one Job runs at once: parallelism (default 1), capped by completions when set."""
    parallelism = count_at(root, (*job_spec_path, "parallelism"), 1)
    return min(parallelism, count_at(root, (*job_spec_path, "completions"), parallelism))
