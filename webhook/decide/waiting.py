"""Gangs told to wait: what each needs, where it comes closest now, and where it lands once
capacity frees — read from the verdict the decision already made (no placement is re-run).

The server keeps the recent ones (``serve.topology``), `tasgate map -f` derives them from its
inputs; the picture draws them over the domains.
"""

from __future__ import annotations

from dataclasses import dataclass

from scorer.model import Assignment
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, PodSetVerdict


@dataclass(frozen=True, slots=True)
class WaitingPodSet:
    """One PodSet that does not fit now. ``level`` is the level it asked for (None: Kueue picks);
    ``best_now`` the domain of that level (or the lowest) holding the most of its pods now, with
    ``pods_now`` of ``count``; ``when_empty`` where Kueue would place it on the empty cluster."""

    name: str
    count: int
    gpus_per_pod: int
    mode: str
    level: str | None
    best_now: tuple[str, ...] | None
    pods_now: int
    when_empty: Assignment | None


@dataclass(frozen=True, slots=True)
class WaitingGang:
    kind: str
    namespace: str
    name: str
    topology: str
    flavor: str
    generation: int
    pod_sets: tuple[WaitingPodSet, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


def waiting_gang(decision: Decision, gpu_resources: tuple[str, ...]) -> WaitingGang | None:
    """The gang of a must-wait verdict (allowed, fits only when empty); None for any other verdict."""
    if decision.reason is not Reason.WAITS or not decision.allowed:
        return None
    waiting = tuple(_pod_set(v, gpu_resources) for v in decision.pod_sets if v.judged and not v.fits_now)
    flavor = next((v.flavor for v in decision.pod_sets if v.flavor), None) or ""
    return WaitingGang(
        decision.kind,
        decision.namespace,
        decision.name,
        decision.topology or "",
        flavor,
        decision.generation,
        waiting,
    )


def _pod_set(v: PodSetVerdict, gpu_resources: tuple[str, ...]) -> WaitingPodSet:
    rows = v.now.levels if v.now is not None else ()
    row = next((r for r in rows if r.level == v.request.level), rows[-1] if rows else None)
    return WaitingPodSet(
        name=v.name,
        count=v.count,
        gpus_per_pod=sum(v.requests.get(r, 0) for r in gpu_resources),
        mode=v.request.mode.value,
        level=v.request.level,
        best_now=row.best_domain if row is not None else None,
        pods_now=row.max_pods if row is not None else 0,
        when_empty=v.never.assignment if v.never is not None else None,
    )
