"""Adapters that find the PodSets Kueue would build for each workload kind.

``extract`` is the entry point; the result types live in ``base``.
"""

from webhook.model.workloads.base import (
    MAX_COUNT,
    PodSetTemplate,
    RuntimeKey,
    WorkloadPodSets,
)
from webhook.model.workloads.registry import (
    extract,
    is_known_workload,
    owned_by_workload,
    suspended,
    unknown_workload_reason,
)

__all__ = [
    "MAX_COUNT",
    "PodSetTemplate",
    "RuntimeKey",
    "WorkloadPodSets",
    "extract",
    "is_known_workload",
    "owned_by_workload",
    "suspended",
    "unknown_workload_reason",
]
