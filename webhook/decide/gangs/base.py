"""What a gang scheduler that reads a PodGroup CRD is to tasgate: one class per scheduler
(``gangs.coscheduling``, ``gangs.volcano``), registered once (``decide.gangs``).

A gang backend says how pods name their group (a label or an annotation on the pod template),
which PodGroup object the group needs (its API, and the fields beyond minMember and
minResources), and which watched kind says its CRD is served: the decision, the live writer,
the tracker and the policy's validation all read these from the registry, so a new scheduler
(KAI's, Volcano's HyperNode gangs) is one class here and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.decide.patch import Entry


@dataclass(frozen=True)
class GangBackend:
    name: str  # the policy's ``gang.backend``
    group: str  # the PodGroup CRD's API group and version
    version: str
    served_kind: str  # the live Mirror's watch of the CRD (``live.kinds``): unserved = no gang
    crd: str  # as a warning names it
    mark_field: str  # where a pod template names its group: "labels" or "annotations"
    mark_key: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def entry(self, template_path: Sequence[str | int], name: str) -> Entry:
        """The patch entry that makes a pod template join group ``name``."""
        return Entry((*template_path, "metadata", self.mark_field), self.mark_key, name)

    def marked(self, labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> str | None:
        """The group a pod (or template) with these labels and annotations joins, if any."""
        found = (labels if self.mark_field == "labels" else annotations).get(self.mark_key)
        return str(found) if found else None

    def spec_extras(self, schedule_timeout_seconds: int | None) -> dict[str, Any]:
        """Fields of the PodGroup's spec beyond minMember and minResources."""
        return {}

    def pod_group(
        self, namespace: str, name: str, spec: Mapping[str, Any], annotations: Mapping[str, str]
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        return {"apiVersion": self.api_version, "kind": "PodGroup", "metadata": meta, "spec": dict(spec)}
