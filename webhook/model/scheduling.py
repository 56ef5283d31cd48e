"""A pod template's scheduling constraints, read the way Kueue's ``podset.FromPodSet`` takes them.

Tolerations, the nodeSelector and required node affinity go with a PodSet to the scorer;
ResourceFlavors carry tolerations in the same shape, so cluster state reads them here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scorer.model import SelectorRequirement, SelectorTerm, Toleration
from webhook.wire.errors import InvalidObject


@dataclass(frozen=True)
class Scheduling:
    tolerations: tuple[Toleration, ...]
    node_selector: Mapping[str, str]
    affinity: tuple[SelectorTerm, ...] | None


def read_scheduling(spec: Mapping[str, Any], where: str) -> Scheduling:
    """The constraints of a pod spec found at field path ``where``; a bad shape names its field."""
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise InvalidObject.at(f"{where}.nodeSelector", "must be a map of strings")
    return Scheduling(
        tolerations=parse_tolerations(spec.get("tolerations"), f"{where}.tolerations"),
        node_selector={str(k): str(v) for k, v in selector.items()},
        affinity=_required_affinity(spec.get("affinity"), f"{where}.affinity"),
    )


def parse_tolerations(raw: object, path: str) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, Mapping) for t in raw):
        raise InvalidObject.at(path, "must be a list of objects")
    return tuple(
        Toleration(
            key=str(t.get("key", "") or ""),
            operator=str(t.get("operator", "") or "Equal"),
            value=str(t.get("value", "") or ""),
            effect=str(t.get("effect", "") or ""),
        )
        for t in raw
    )


def _required_affinity(raw: object, where: str) -> tuple[SelectorTerm, ...] | None:
    if not isinstance(raw, Mapping):
        return None
    node_affinity = raw.get("nodeAffinity")
    if not isinstance(node_affinity, Mapping):
        return None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, Mapping):
        return None
    terms = required.get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        raise InvalidObject.at(
            f"{where}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", "terms must be a list"
        )
    return tuple(_term(t) for t in terms if isinstance(t, Mapping))


def _term(raw: Mapping[str, Any]) -> SelectorTerm:
    return SelectorTerm(
        match_expressions=tuple(
            _requirement(e) for e in raw.get("matchExpressions") or [] if isinstance(e, Mapping)
        ),
        match_fields=tuple(_requirement(e) for e in raw.get("matchFields") or [] if isinstance(e, Mapping)),
    )


def _requirement(raw: Mapping[str, Any]) -> SelectorRequirement:
    values = raw.get("values") or []
    return SelectorRequirement(
        str(raw.get("key", "")), str(raw.get("operator", "")), tuple(str(v) for v in values if v is not None)
    )
