"""What a native group's pods say: bound or refused by the scheduler, and where a group settled.

Read from the Pods and PodGroups the real kube-scheduler v1.36.5 wrote (``PodScheduled`` and the
PodGroup's own condition); shared by the table's fate (``e2e.native_fate``) and the world.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from e2e.native import scheduled_condition


def pod_scheduled_condition(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def bound(pod: Mapping[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName"))


def refused(pod: Mapping[str, Any]) -> bool:
    """The scheduler tried the pod and wrote why it could not place it (PodScheduled=False)."""
    condition = pod_scheduled_condition(pod)
    return not bound(pod) and condition is not None and condition.get("status") == "False"


@dataclass(frozen=True)
class Settled:
    """Where a group's pods ended up after the scheduler's last cycle on it."""

    pod_group: dict[str, Any]
    pods: list[dict[str, Any]]

    @property
    def bound_nodes(self) -> list[str]:
        return sorted(p["spec"]["nodeName"] for p in self.pods if bound(p))

    @property
    def condition(self) -> dict[str, Any] | None:
        return scheduled_condition(self.pod_group)

    @property
    def scheduled(self) -> bool:
        return (self.condition or {}).get("status") == "True"
