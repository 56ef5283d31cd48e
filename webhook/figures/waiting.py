"""Gangs told to wait: what each needs and its must-wait figure (``mustwait``: room now, the
closest domain, the empty-cluster tie-break) — read from the verdict the decision already made
(no placement is re-run), so `map` and `/topology` say what `check` says.

The server keeps the recent ones (``serve.topology``), `tasgate map -f` derives them from its
inputs; the picture draws them over the domains.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.decide.kueue.mustwait import MustWait, must_wait
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, PodSetVerdict


@dataclass(frozen=True, slots=True)
class WaitingPodSet:
    """One PodSet that does not fit now. ``level`` is the level it asked for (None: Kueue picks);
    ``figure`` is its must-wait figure, the very one `check`'s warning states."""

    name: str
    count: int
    gpus_per_pod: int
    mode: str
    level: str | None
    figure: MustWait
    slice_size: int = 1  # pods per slice (the first slice layer), 1: not sliced
    slice_level: str | None = None


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
    waiting = tuple(
        ps
        for ps in (_pod_set(v, gpu_resources) for v in decision.pod_sets if v.judged and not v.fits_now)
        if ps is not None
    )
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


def _pod_set(v: PodSetVerdict, gpu_resources: tuple[str, ...]) -> WaitingPodSet | None:
    """Judged at the level the decision judged it: the one asked for, else the lowest."""
    rows = v.now.levels if v.now is not None else ()
    level = v.request.level or (rows[-1].level if rows else "")
    figure = must_wait(v, level)
    if figure is None:
        return None
    layers = v.request.slice_layers
    return WaitingPodSet(
        name=v.name,
        count=v.count,
        gpus_per_pod=sum(v.requests.get(r, 0) for r in gpu_resources),
        mode=v.request.mode.value,
        level=v.request.level,
        figure=figure,
        slice_size=layers[0].size if layers else v.request.slice_size or 1,
        slice_level=layers[0].level if layers else v.request.slice_level,
    )
