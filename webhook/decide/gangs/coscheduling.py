"""scheduler-plugins' Coscheduling: pods labelled ``scheduling.x-k8s.io/pod-group`` wait at
Permit until ``minMember`` of them are bound (``podgroups.scheduling.x-k8s.io``)."""

from __future__ import annotations

from typing import Any

from webhook.decide.gangs.base import GangBackend
from webhook.model import annotations as ann


class Coscheduling(GangBackend):
    def __init__(self) -> None:
        super().__init__(
            name="coscheduling",
            group="scheduling.x-k8s.io",
            version="v1alpha1",
            served_kind="podgroups",
            crd="Coscheduling PodGroup (podgroups.scheduling.x-k8s.io)",
            mark_field="labels",
            mark_key=ann.COSCHEDULING_LABEL,
        )

    def spec_extras(self, schedule_timeout_seconds: int | None) -> dict[str, Any]:
        """How long a gang may sit at Permit before its pods are rejected and retried."""
        if schedule_timeout_seconds is None:
            return {}
        return {"scheduleTimeoutSeconds": schedule_timeout_seconds}
