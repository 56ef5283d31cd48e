"""Volcano: pods annotated ``scheduling.k8s.io/group-name`` are scheduled as one job of the
``podgroups.scheduling.volcano.sh`` PodGroup, whose ``minResources`` it holds in its queue."""

from __future__ import annotations

from webhook.decide.gangs.base import GangBackend
from webhook.model import annotations as ann


class Volcano(GangBackend):
    def __init__(self) -> None:
        super().__init__(
            name="volcano",
            group="scheduling.volcano.sh",
            version="v1beta1",
            served_kind="volcanopodgroups",
            crd="Volcano PodGroup (podgroups.scheduling.volcano.sh)",
            mark_field="annotations",
            mark_key=ann.VOLCANO_GROUP_ANNOTATION,
        )
