"""What the server keeps of a decision once it is made: plain data, small and cheap to send.

A `Decision` carries every placement with its assignment and per-level table; the edges read
a handful of facts of it (the audit line's PodSet rows, the metrics' queue labels, the PodGroups
to hand over, the must-wait gang of the /topology picture). `brief_of` takes those once, where
the decision was made, so a decision made in a decision process (``serve.processes``) crosses
the pipe as a few hundred bytes instead of its whole object graph, and the handlers read one
shape whichever way the decision ran.
"""

from __future__ import annotations

import copyreg
from dataclasses import dataclass, fields
from typing import Any

from scorer.model import DomainAssignment
from webhook.decide.kueue.mustwait import MustWait
from webhook.decide.messages import request_summary
from webhook.decide.policy import DEFAULT_GPU_RESOURCES
from webhook.decide.verdicts import Decision
from webhook.figures.waiting import WaitingGang, WaitingPodSet, waiting_gang


@dataclass(frozen=True, slots=True)
class Brief:
    api_version: str
    kind: str
    namespace: str
    name: str
    topology: str | None
    queue: str | None
    cluster_queue: str | None
    pod_groups: tuple[dict[str, Any], ...]
    pod_sets: tuple[dict[str, Any], ...]  # the audit line's "podSets" rows
    waiting: WaitingGang | None  # the gang of a must-wait verdict, else None


def brief_of(
    decision: Decision | None, gpu_resources: tuple[str, ...], mutating: bool = True
) -> Brief | None:
    """``mutating``: whether the decision answers /mutate. Only /mutate's waiting gang is noted
    (``serve.waiting``), so a /validate brief leaves it out rather than compute it for nothing."""
    if decision is None:
        return None
    d = decision
    return Brief(
        d.api_version, d.kind, d.namespace, d.name, d.topology, d.queue, d.cluster_queue,
        d.pod_groups, audit_pod_sets(d), waiting_gang(d, gpu_resources) if mutating else None,
    )  # fmt: skip


def audit_pod_sets(d: Decision) -> tuple[dict[str, Any], ...]:
    """One row per PodSet: counts, requests, the TAS request and whether it fits (docs/serving.md)."""
    rows = []
    for v in d.pod_sets:
        level = v.request.level or ""
        row = v.never.level_row(level) if v.never else None
        best = row.best_domain if row else None
        rows.append(
            {
                "name": v.name,
                "count": v.count,
                "requests": request_summary(v.requests, DEFAULT_GPU_RESOURCES),
                "mode": v.request.mode.value,
                "level": level or None,
                "injected": v.injected,
                "fitsNow": v.fits_now,  # topology and quota free now
                "fitsWhenEmpty": bool(v.never and v.never.fits),
                "bestDomain": "/".join(best) if best else None,
            }
        )
    return tuple(rows)


def _positional(cls: type[Any]) -> None:
    """Pickle ``cls`` (a frozen, slotted dataclass) as its constructor's arguments: by default it
    pickles through ``dataclasses.fields()`` on every object, tens of microseconds on each answer
    of a decision process. Same objects back; only the speed differs."""
    names = tuple(f.name for f in fields(cls))
    copyreg.pickle(cls, lambda obj: (cls, tuple(getattr(obj, name) for name in names)))


for _cls in (Brief, WaitingGang, WaitingPodSet, MustWait, DomainAssignment):
    _positional(_cls)
