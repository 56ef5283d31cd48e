"""Where a gang's start-up time goes, from the timestamps the objects carry.

Each boundary is read off an object, never off when tasgate saw it, so a restarted tasgate (or one
that was slow to see an event) measures the same durations:

- ``created``: the Workload's ``creationTimestamp``;
- ``admitted``: its ``Admitted`` condition's ``lastTransitionTime`` (``QuotaReserved``'s when
  Admitted has none);
- ``bound``: the latest ``PodScheduled=True`` transition among the gang's pods, once every
  admitted pod is bound;
- ``running``: the latest ``ContainersReady`` (else ``Ready``) ``=True`` transition, once every
  admitted pod runs.

Phases (the ``phase`` label): ``queued`` created → admitted (quota and topology),
``assembling`` admitted → bound (gang assembly, the TAS ungater, the gang scheduler),
``starting`` bound → running (image pulls, init containers). ``partial_start``: from the first pod
running to the moment the gang's minimum (its PodGroup's minMember, else every admitted pod) ran:
0 for a gang that started at once. Timestamps have a resolution of one second. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.track.classify import Gang

PHASES = ("queued", "assembling", "starting")


@dataclass(frozen=True)
class Phases:
    seconds: Mapping[str, float]  # phase -> duration, only the phases whose both ends are known
    partial_start: float | None  # None until the gang's minimum ran (or the times are unknown)


def phases(gang: Gang) -> Phases:
    wl = gang.workload
    admitted_cond = wl.condition("Admitted")
    reserved = wl.condition("QuotaReserved")
    admitted = next(
        (c.since for c in (admitted_cond, reserved) if c is not None and c.true and c.since), None
    )
    live = [p for p in gang.pods if p.phase != "Failed"]
    expected = wl.admitted_pods
    scheduled = [p.scheduled_at for p in live if p.scheduled_at is not None]
    ready = sorted(p.ready_at for p in live if p.ready_at is not None)
    bound = max(scheduled) if expected and len(scheduled) >= expected else None
    running = ready[-1] if expected and len(ready) >= expected else None
    ends = {"created": wl.created, "admitted": admitted, "bound": bound, "running": running}
    out = {}
    for phase, (start, end) in zip(
        PHASES, (("created", "admitted"), ("admitted", "bound"), ("bound", "running")), strict=True
    ):
        a, b = ends[start], ends[end]
        if a is not None and b is not None:
            out[phase] = max(b - a, 0.0)
    minimum = gang.group.min_member if gang.group is not None and gang.group.min_member else expected
    partial = None
    if minimum and len(ready) >= minimum:
        partial = max(ready[minimum - 1] - ready[0], 0.0)
    return Phases(out, partial)
