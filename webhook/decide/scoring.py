"""Score a workload on every candidate flavor: what the policy injects there, now and when empty.

Each flavor gets its own plan ("tightest" differs per flavor's topology); the first flavor where
everything fits when empty is where Kueue goes. When none does, the flavor that holds the most
pods when empty speaks for the denial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook.decide import inject
from webhook.decide.policy import Inject
from webhook.decide.topology import Target
from webhook.decide.verdicts import FlavorVerdict, PodSetVerdict, all_fit_now, all_fit_when_empty
from webhook.model.podset import PodSetView


@dataclass(frozen=True)
class Scored:
    verdicts: tuple[PodSetVerdict, ...]
    target: Target
    plan: inject.Plan


def score_flavors(
    pod_sets: Sequence[PodSetView], wanted: Inject | None, targets: Sequence[Target]
) -> tuple[Scored, tuple[FlavorVerdict, ...]]:
    scored = [score(pod_sets, wanted, target) for target in targets]
    summaries = tuple(
        FlavorVerdict(
            flavor=s.target.flavor,
            topology=s.target.topology.name,
            fits_now=all_fit_now(s.verdicts),
            fits_never=all_fit_when_empty(s.verdicts),
        )
        for s in scored
    )
    for s in scored:
        if all(v.never and (v.never.fits or v.never.anomaly) for v in s.verdicts):
            return s, summaries
    return max(scored, key=lambda s: sum(_held_when_empty(v) for v in s.verdicts)), summaries


def score(pod_sets: Sequence[PodSetView], wanted: Inject | None, target: Target) -> Scored:
    plan = inject.plan(pod_sets, wanted, target)
    requests = [p.scorer_request(r) for p, r in zip(pod_sets, plan.requests, strict=True)]
    now, never = target.snapshot.now.place(requests), target.snapshot.never.place(requests)
    flavor = target.flavor or None
    verdicts = tuple(
        PodSetVerdict(p.name, p.count, p.pod_set.requests, r, i, flavor, a, b)
        for p, r, i, a, b in zip(pod_sets, plan.requests, plan.injected, now, never, strict=True)
    )
    return Scored(verdicts, target, plan)


def _held_when_empty(v: PodSetVerdict) -> int:
    return v.count if v.never is None or v.never.fits else v.never.fit_count
