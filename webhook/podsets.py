"""From a workload's pod templates to the scorer's PodSet requests.

The template's scheduling constraints (tolerations, nodeSelector, required node affinity) go
with the PodSet, as Kueue's ``podset.FromPodSet`` takes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.model import PodSetRequest, SelectorRequirement, SelectorTerm, TopologyRequest
from webhook.cluster import parse_tolerations
from webhook.errors import InvalidObject
from webhook.workloads import PodSetTemplate, field_path


def scorer_request(pod_set: PodSetTemplate, topology: TopologyRequest) -> PodSetRequest:
    spec = pod_set.template.get("spec") or {}
    where = field_path((*pod_set.template_path, "spec"))
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise InvalidObject.at(f"{where}.nodeSelector", "must be a map of strings")
    return PodSetRequest(
        name=pod_set.name,
        count=pod_set.count,
        requests=dict(pod_set.requests),
        topology=topology,
        tolerations=parse_tolerations(spec.get("tolerations"), f"{where}.tolerations"),
        node_selector={str(k): str(v) for k, v in selector.items()},
        affinity=_required_affinity(spec.get("affinity"), f"{where}.affinity"),
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
