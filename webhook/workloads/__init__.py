"""Adapters that find the PodSets Kueue would build for each workload kind.

``extract`` is the entry point; the result types live in ``base``.
"""

from webhook.workloads.base import MAX_COUNT, PodSetTemplate, RuntimeKey, WorkloadPodSets, field_path
from webhook.workloads.registry import extract, is_known_workload, unknown_workload_reason

__all__ = [
    "MAX_COUNT",
    "PodSetTemplate",
    "RuntimeKey",
    "WorkloadPodSets",
    "extract",
    "field_path",
    "is_known_workload",
    "unknown_workload_reason",
]
