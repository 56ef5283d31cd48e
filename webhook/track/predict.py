"""tasgate's own figures for a queued Workload: the decision path's placement on one ClusterState.

A Workload already holds the PodSets Kueue built (names, counts, templates with their TAS
annotations), so they are read from it with the one request calculator, and placed with the
decision path's own steps (``resolve`` → TAS flavors, ``score_flavors`` → now and when empty).
The result says whether it fits now, whether it could fit the empty cluster, what frees it, and
where it would go now: what the lifecycle states read, and what Kueue's admission is compared with.
Nothing is injected: the Workload carries the annotations tasgate added at admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from scorer.model import Placement
from webhook.decide import messages
from webhook.decide.kueue.mustwait import must_wait
from webhook.decide.kueue.scoring import score_flavors
from webhook.decide.kueue.topology import resolve, with_levels
from webhook.decide.policy import Policy
from webhook.decide.verdicts import PodSetVerdict
from webhook.model.paths import field_path
from webhook.model.podrequests import PodDefaults, pod_requests
from webhook.model.podset import WorkloadView, view_workload
from webhook.model.workloads.base import PodSetTemplate, WorkloadPodSets
from webhook.state.cluster import ClusterState
from webhook.wire.errors import InvalidObject

WORKLOAD_API = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class PodSetFigure:
    """One PodSet on the flavor Kueue would pick: fits now / when empty, and where it goes now."""

    name: str
    count: int
    flavor: str | None
    level: str
    fits_now: bool
    fits_when_empty: bool
    hosts: Mapping[str, int] = field(default_factory=dict)  # the "now" placement, pods per host
    waits: str = ""  # what frees it (when it does not fit now)
    never: str = ""  # why no domain can hold it (when it does not fit even empty)


@dataclass(frozen=True)
class Assessment:
    """tasgate's figures for a workload; ``problem`` says why there are none (not TAS, no queue)."""

    generation: int
    pod_sets: tuple[PodSetFigure, ...] = ()
    problem: str | None = None

    @property
    def judged(self) -> bool:
        return bool(self.pod_sets)

    @property
    def fits_now(self) -> bool:
        return all(p.fits_now for p in self.pod_sets)

    @property
    def fits_when_empty(self) -> bool:
        return all(p.fits_when_empty for p in self.pod_sets)

    def why_waiting(self) -> str:
        return " ".join(p.waits for p in self.pod_sets if not p.fits_now and p.waits)

    def why_never(self) -> str:
        return " ".join(p.never for p in self.pod_sets if not p.fits_when_empty and p.never)


def workload_view(obj: Mapping[str, Any], defaults: PodDefaults) -> WorkloadView:
    """The PodSets of a Kueue Workload as the decision path reads them (``InvalidObject`` if bad)."""
    meta = obj.get("metadata") or {}
    raw = (obj.get("spec") or {}).get("podSets") or []
    if not isinstance(raw, list):
        raise InvalidObject.at("spec.podSets", "must be a list")
    pod_sets = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("template"), Mapping):
            raise InvalidObject.at(field_path(("spec", "podSets", i, "template")), "must be an object")
        template = entry["template"]
        path = ("spec", "podSets", i, "template")
        minimum = entry.get("minCount")
        pod_sets.append(
            PodSetTemplate(
                name=str(entry.get("name", "")),
                count=int(entry.get("count") or 0),
                template_path=path,
                template=template,
                requests=MappingProxyType(
                    pod_requests(template.get("spec") or {}, field_path((*path, "spec")), defaults)
                ),
                min_count=minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else None,
            )
        )
    return view_workload(
        WorkloadPodSets(
            WORKLOAD_API, "Workload", str(meta.get("namespace") or ""), str(meta.get("name") or ""),
            tuple(pod_sets),
        )
    )  # fmt: skip


def assess(view: WorkloadView, namespace: str, queue: str, state: ClusterState, policy: Policy) -> Assessment:
    """The decision path's figures for ``view`` queued in ``namespace/queue`` on ``state``."""
    resolution = resolve(state, namespace, queue or None, policy.default_topology)
    if resolution.problem:
        return Assessment(state.generation, problem=resolution.problem)
    judged = [resolution.tas_only or p.explicit_tas for p in view.pod_sets]
    if not resolution.targets or not any(judged):
        return Assessment(state.generation, problem="placed without TAS: tasgate has no figures for it")
    placed = [p for p, j in zip(view.pod_sets, judged, strict=True) if j]
    targets = with_levels(resolution.targets, placed)
    try:
        scored, _ = score_flavors(view.pod_sets, None, targets, judged)
    except InvalidObject as exc:
        return Assessment(state.generation, problem=f"its PodSets do not read: {exc}")
    levels = scored.target.topology.levels
    figures = tuple(_figure(v, levels[-1]) for v in scored.verdicts if v.judged)
    return Assessment(state.generation, figures)


def _figure(v: PodSetVerdict, lowest: str) -> PodSetFigure:
    level = v.request.level or lowest
    now, never = v.now, v.never
    fits_when_empty = never is not None and (never.fits or never.anomaly)
    return PodSetFigure(
        name=v.name,
        count=v.count,
        flavor=v.flavor,
        level=level,
        fits_now=v.fits_now,
        fits_when_empty=fits_when_empty,
        hosts=_hosts(now),
        waits=figure.message if (figure := must_wait(v, level)) is not None else v.quota,
        never="" if fits_when_empty or never is None else _never(v, never, level),
    )


def _hosts(placement: Placement | None) -> dict[str, int]:
    """Pods per value of the lowest level (the hostname) of a placement that fits."""
    if placement is None or not placement.fits or placement.assignment is None:
        return {}
    hosts: dict[str, int] = {}
    for domain in placement.assignment.domains:
        hosts[domain.values[-1]] = hosts.get(domain.values[-1], 0) + domain.count
    return hosts


def _never(v: PodSetVerdict, never: Placement, level: str) -> str:
    row = never.level_row(level)
    where = messages.short_level(level)
    if row is None:
        return f'PodSet "{v.name}" ({v.count} pods) can no longer be placed: {never.reason}'
    return (
        f'PodSet "{v.name}" ({v.count} pods) no longer fits any {where}: the largest {where} holds '
        f"{row.max_pods} such pods even when empty ({row.fitting_domains} of {row.domains} could hold it)"
    )
