"""Objects tasgate could not use, left out of the cluster state one by one and said so.

One malformed object (a quota that is not a quantity, labels that are not a map) must never
stop the state: it is left out alone, and recorded as a `Rejected` on the state, so that the
verdicts depending on it can say "not checked" (`decide.kueue.depends`), `tasgate status` and the
metrics can show it, and the live writer can log it once. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.wire.errors import FieldError, InvalidObject

# Kinds whose objects are parsed as their events arrive in live mode (`live.parsed`), not by
# `build_state`: their rejections are kept by the live writer apart from the build's.
EVENT_PARSED_KINDS = frozenset({"Node", "Pod", "Workload"})


@dataclass(frozen=True, slots=True, order=True)
class Rejected:
    """One object left out of the state: which (kind, namespace, name), where and why."""

    kind: str
    namespace: str  # "" for a cluster-scoped object
    name: str
    path: str  # the field, relative to the object (``spec.resourceGroups[0]...``)
    reason: str  # Kubernetes' field.Error wording: ``Invalid value: "lots": ...``

    @property
    def qualified_name(self) -> str:
        """``namespace/name``, or the name alone of a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def subject(self) -> str:
        """How messages name it: ``ClusterQueue "cq"``, ``LocalQueue "team/q"``."""
        return f'{self.kind} "{self.qualified_name}"'

    @property
    def why(self) -> str:
        """The field and what is wrong with it: ``spec.levels: Invalid value: ...``."""
        return f"{self.path}: {self.reason}" if self.path else self.reason

    def __str__(self) -> str:
        return f"{self.subject}: {self.why}"

    def as_json(self) -> dict[str, str]:
        """The one JSON shape of a rejection (`tasgate status -o json`, `tasgate check -o json`)."""
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "path": self.path,
            "reason": self.reason,
        }


def rejected_of(obj: Mapping[str, Any], exc: InvalidObject) -> Rejected:
    """The rejection of ``obj`` for the field errors of ``exc``.

    Parsers name the object at the head of their paths (``ClusterQueue cq: spec...``) so that an
    error read alone says where it is; here the object is named apart, so that head is dropped.
    """
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    kind = str(obj.get("kind") or "")
    first, *rest = exc.errors or (FieldError("", str(exc)),)
    reason = f"{first.kind}: {first.message}" if first.message else first.kind
    return Rejected(
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        path=_relative(first.path, kind),
        reason="; ".join([reason, *(str(e) for e in rest)]),
    )


def _relative(path: str, kind: str) -> str:
    head, sep, rest = path.partition(": ")
    if sep and kind and (head == kind or head.startswith(f"{kind} ")):
        return rest
    return path
