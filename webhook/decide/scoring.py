"""Score a workload on every candidate flavor: what the policy injects there, now and when empty.

Each flavor gets its own plan ("tightest" differs per flavor's topology); the first flavor where
everything fits when empty is where Kueue goes. When none does, the flavor that holds the most
pods when empty speaks for the denial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scorer.model import PodSetRequest, TopologyRequest
from webhook.decide import inject
from webhook.decide.partial import place_reduced
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
    pod_sets: Sequence[PodSetView], wanted: Inject | None, targets: Sequence[Target], judged: Sequence[bool]
) -> tuple[Scored, tuple[FlavorVerdict, ...]]:
    """``judged[i]``: whether PodSet ``i`` is placed by TAS at all (see ``PodSetVerdict``)."""
    scored = [score(pod_sets, wanted, target, judged) for target in targets]
    summaries = tuple(
        FlavorVerdict(
            flavor=s.target.flavor,
            topology=s.target.topology.name,
            fits_now=all_fit_now(s.verdicts),
            fits_when_empty=all_fit_when_empty(s.verdicts),
        )
        for s in scored
    )
    for s in scored:
        if all(v.never and (v.never.fits or v.never.anomaly) for v in s.verdicts if v.judged):
            return s, summaries
    return max(scored, key=lambda s: sum(_held_when_empty(v) for v in s.verdicts)), summaries


def score(
    pod_sets: Sequence[PodSetView], wanted: Inject | None, target: Target, judged: Sequence[bool]
) -> Scored:
    plan = inject.plan(pod_sets, wanted, target)
    placed = [i for i in range(len(pod_sets)) if judged[i]]
    requests = [pod_sets[i].scorer_request(plan.requests[i]) for i in placed]
    now = dict(zip(placed, target.snapshot.now.place(requests), strict=True))
    never = dict(zip(placed, target.snapshot.never.place(requests), strict=True))
    flavor = target.flavor or None
    verdicts = []
    for i, p in enumerate(pod_sets):
        if not judged[i]:
            verdicts.append(
                PodSetVerdict(p.name, p.count, p.pod_set.requests, TopologyRequest(), False, judged=False)
            )
            continue
        verdict = PodSetVerdict(
            p.name, p.count, p.pod_set.requests, plan.requests[i], plan.injected[i], flavor, now[i], never[i]
        )
        minimum = p.pod_set.min_count
        if minimum is not None and len(placed) == 1:
            verdict = _partial(verdict, target, requests[0], minimum)
        verdicts.append(verdict)
    return Scored(tuple(verdicts), target, plan)


def _partial(v: PodSetVerdict, target: Target, request: PodSetRequest, minimum: int) -> PodSetVerdict:
    """What Kueue's partial admission makes of a PodSet whose full count does not fit."""
    v = replace(v, min_count=minimum)
    if not v.fits_now:
        found = place_reduced(target.snapshot.now, request, minimum)
        if found is not None:
            v = replace(v, admitted=found[0], now=found[1])
    if not v.fits_when_empty:
        found = place_reduced(target.snapshot.never, request, minimum)
        if found is not None:
            v = replace(v, admissible=found[0], never=found[1])
    return v


def _held_when_empty(v: PodSetVerdict) -> int:
    return v.count if v.never is None or v.never.fits else v.never.fit_count
