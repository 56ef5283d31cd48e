"""Score a workload on every candidate flavor: what the policy injects there, now and when empty.

Each flavor gets its own plan ("tightest" differs per flavor's topology). When no flavor holds
the gang even on the empty cluster, the one that holds the most pods when empty speaks for the
denial. Otherwise Kueue's flavor assignment (`decide.kueue.flavors`: quota in use, cohorts, flavor
order and fungibility, partial admission) says where it is admitted now; when it waits, the
first flavor that holds it when empty speaks, with Kueue's quota reasons if quota holds it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scorer.model import Placement, PodSetRequest, TopologyRequest
from webhook.decide.kueue import inject
from webhook.decide.kueue.flavors import Choice, choose
from webhook.decide.kueue.gate_guard import guarded, placed_request
from webhook.decide.kueue.partial import place_reduced
from webhook.decide.kueue.quota_now import QueueQuota
from webhook.decide.kueue.quota_text import borrowing_note, waits_for_quota
from webhook.decide.kueue.topology import Target
from webhook.decide.policy import Inject
from webhook.decide.verdicts import FlavorVerdict, PodSetVerdict, all_fit_now, all_fit_when_empty
from webhook.model.podset import PodSetView


@dataclass(frozen=True)
class Scored:
    verdicts: tuple[PodSetVerdict, ...]
    target: Target
    plan: inject.Plan
    requests: tuple[PodSetRequest, ...] = ()  # the scorer's request of each placed PodSet
    notes: tuple[str, ...] = ()  # what quota says: borrowing, or waiting for quota in use


def score_flavors(
    pod_sets: Sequence[PodSetView],
    wanted: Inject | None,
    targets: Sequence[Target],
    judged: Sequence[bool],
) -> tuple[Scored, tuple[FlavorVerdict, ...]]:
    """``judged[i]``: whether PodSet ``i`` is placed by TAS at all (see ``PodSetVerdict``). The
    targets carry their ClusterQueue's quota now (None for the policy's default: not judged)."""
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
    holding = [s for s in scored if _may_hold(s)]
    if not holding:
        return max(scored, key=lambda s: sum(_held_when_empty(v) for v in s.verdicts)), summaries
    placed = [p for p, j in zip(pod_sets, judged, strict=True) if j]
    quota = targets[0].quota
    choice = _choice(scored, placed, quota)
    if choice.index is None:
        return _waiting(holding[0], choice), summaries
    return _admitted(scored[choice.index], choice, quota), summaries


def _choice(scored: Sequence[Scored], placed: Sequence[PodSetView], quota: QueueQuota | None) -> Choice:
    full = [p.count for p in placed]
    minimum = placed[0].pod_set.min_count if len(placed) == 1 else None

    def place_now(index: int, counts: Sequence[int]) -> Sequence[Placement] | None:
        s = scored[index]
        if list(counts) == full:
            return [v.now for v in s.verdicts if v.judged and v.now is not None]
        requests = [replace(r, count=c) for r, c in zip(s.requests, counts, strict=True)]
        return s.target.snapshot.now.place(requests)

    delayed = frozenset(i for i, s in enumerate(scored) if s.target.delay is not None)
    return choose([s.target.flavor for s in scored], placed, full, minimum, quota, place_now, delayed)


def _admitted(s: Scored, choice: Choice, quota: QueueQuota | None) -> Scored:
    """The flavor Kueue admits it on now, with the reduced count and its placement if any."""
    verdicts, k = [], 0
    for v in s.verdicts:
        found = v
        if v.judged:
            if choice.counts[k] != v.count:  # a delayed flavor is placed later: no placement now
                now = choice.placements[k] if choice.placements else v.now
                found = replace(v, admitted=choice.counts[k], now=now)
            k += 1
        verdicts.append(found)
    notes = borrowing_note(choice.quota, quota) if quota is not None else ()
    return _noted(replace(s, verdicts=tuple(verdicts)), notes)


def _waiting(s: Scored, choice: Choice) -> Scored:
    """It waits: on quota in use (Kueue's reasons, on the first placed PodSet) or on capacity."""
    if not choice.blocked:
        return s
    first = next(i for i, v in enumerate(s.verdicts) if v.judged)
    message = waits_for_quota(s.verdicts[first].name, choice.blocked)
    verdicts = list(s.verdicts)
    verdicts[first] = replace(verdicts[first], quota=message)
    return _noted(replace(s, verdicts=tuple(verdicts)), (message,))


def _noted(s: Scored, notes: tuple[str, ...]) -> Scored:
    """Quota's notes join the plan's problems: the verdict's warnings, after the plan's own."""
    if not notes:
        return s
    return replace(s, notes=notes, plan=replace(s.plan, problems=(*s.plan.problems, *notes)))


def score(
    pod_sets: Sequence[PodSetView], wanted: Inject | None, target: Target, judged: Sequence[bool]
) -> Scored:
    plan = inject.plan(pod_sets, wanted, target)
    placed = [i for i in range(len(pod_sets)) if judged[i]]
    gates = target.gates  # TASProfileMixed: each request's profile; the unmodelled gates: `guarded`
    requests = [pod_sets[i].scorer_request(placed_request(plan.requests[i], gates)) for i in placed]
    placed_now, placed_never = target.snapshot.place_now_and_never(requests)
    now = dict(zip(placed, placed_now, strict=True))
    never = dict(zip(placed, placed_never, strict=True))
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
            verdict = _partial_when_empty(verdict, target, requests[0], minimum)
        verdicts.append(verdict)
    return Scored(guarded(verdicts, pod_sets, gates), target, plan, tuple(requests))


def _partial_when_empty(
    v: PodSetVerdict, target: Target, request: PodSetRequest, minimum: int
) -> PodSetVerdict:
    """The most Kueue's partial admission could ever admit, when the full count never fits
    (what it admits now is Kueue's flavor assignment's to say: `decide.kueue.flavors`)."""
    v = replace(v, min_count=minimum)
    if not v.fits_when_empty:
        found = place_reduced(target.snapshot.never, request, minimum)
        if found is not None:
            v = replace(v, admissible=found[0], never=found[1])
    return v


def _may_hold(s: Scored) -> bool:
    """Whether the flavor may ever hold the gang: it does on the empty cluster, or Kueue places
    it on capacity today's nodes do not show (a provisioning or MultiKueue check)."""
    return s.target.delay is not None or all(_holds_when_empty(v) for v in s.verdicts if v.judged)


def _holds_when_empty(v: PodSetVerdict) -> bool:
    return v.never is not None and (v.never.fits or v.never.anomaly)


def _held_when_empty(v: PodSetVerdict) -> int:
    return v.count if v.never is None or v.never.fits else v.never.fit_count
