"""The flavor (and, under partial admission, the count) Kueue admits a workload on now.

Kueue v0.19.2 assigns flavors by quota first (``flavorassigner.findFlavorForPodSets``): it walks
the ClusterQueue's flavors in order from where its last attempt stopped
(``NextFlavorToTryForPodSetResource``), skips a flavor whose quota does not fit now, and stops at
the first that fits without borrowing (or by borrowing, under the default ``whenCanBorrow:
MayStopSearch``); under ``TryNextFlavor`` it keeps the best it saw (``isPreferred``). Only then
does it place the topology on that one flavor (``FindTopologyAssignmentsForWorkload``). When the
placement fails, the attempt records where the walk stopped and, while flavors are left
(``PendingFlavors``), the next scheduling cycle resumes after it
(``FlavorFungibilityPreserveScanProgress``, on by default): a workload that fits now on a later
flavor is admitted there a cycle later. A walk that reached the last flavor starts over from the
first only after the cluster changes, so it waits.

Within each cycle, when the full count does not fit, partial admission (``PodSetReducer.Search``,
`decide.kueue.partial`) runs the same assignment — quota and topology — for each candidate count.
``choose`` replays those cycles on one state and says where, and with how many pods, Kueue
admits the workload now; None when it waits. A flavor whose topology Kueue places later or
elsewhere (``delayed``: a ProvisioningRequest or MultiKueue check) is admitted on quota alone:
its first pass reserves quota with no topology (``DelayedTopologyRequest: Pending``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scorer.model import Placement
from webhook.decide.kueue.partial import reduced
from webhook.decide.kueue.quota_now import FIT, QueueQuota, QuotaFit, fit_quota, is_preferred, should_try_next
from webhook.model.podset import PodSetView

# Topology now of candidate ``i`` at these counts (one per placed PodSet): the placements, or None.
PlaceNow = Callable[[int, Sequence[int]], Sequence[Placement] | None]
WORST = QuotaFit(mode=0, borrow=1 << 62)


@dataclass(frozen=True)
class Choice:
    """Where Kueue admits the workload now: ``index`` into the candidates (None: it waits),
    ``counts`` per placed PodSet, their placements, and the quota verdict there. ``blocked``:
    the quota reasons of the last walk that found no flavor with quota free now."""

    index: int | None = None
    counts: tuple[int, ...] = ()
    placements: tuple[Placement, ...] = ()
    quota: QuotaFit = field(default_factory=QuotaFit)
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Walk:
    best: int | None
    stopped: int | None  # where the walk broke off (None: it ran past the last flavor)
    fit: QuotaFit
    reasons: tuple[str, ...]


def choose(
    flavors: Sequence[str],
    pod_sets: Sequence[PodSetView],
    counts: Sequence[int],
    minimum: int | None,
    quota: QueueQuota | None,
    place_now: PlaceNow,
    delayed: frozenset[int] = frozenset(),
) -> Choice:
    """Kueue's admission now among ``flavors`` (the candidate TAS flavors, in order).

    ``minimum``: the least count of the one placed PodSet under partial admission (else None);
    ``delayed``: the indexes of flavors whose topology is not placed on today's nodes.
    """
    if delayed:
        place_now = _on_quota_alone(place_now, delayed)
    start, seen, blocked = 0, set[int](), tuple[str, ...]()
    while start < len(flavors) and start not in seen:
        seen.add(start)
        walk = _walk(flavors, pod_sets, counts, quota, start)
        found = _admit(walk, counts, place_now)
        if found is None and minimum is not None:
            found = _reduced(flavors, pod_sets, counts, minimum, quota, start, place_now)
        if found is not None:
            return found
        if walk.best is None or walk.fit.mode != FIT:
            blocked = walk.reasons
        if walk.stopped is None or walk.stopped == len(flavors) - 1:
            break
        start = walk.stopped + 1
    return Choice(blocked=blocked)


def _on_quota_alone(place_now: PlaceNow, delayed: frozenset[int]) -> PlaceNow:
    """``place_now`` where a delayed flavor places nothing now and holds back nothing."""

    def place(index: int, counts: Sequence[int]) -> Sequence[Placement] | None:
        return () if index in delayed else place_now(index, counts)

    return place


def _walk(
    flavors: Sequence[str],
    pod_sets: Sequence[PodSetView],
    counts: Sequence[int],
    quota: QueueQuota | None,
    start: int,
) -> _Walk:
    """One ``findFlavorForPodSets`` walk from ``start``: the flavor it picks and where it stopped."""
    best, best_fit = None, WORST
    reasons: list[str] = []
    for index in range(start, len(flavors)):
        fit = QuotaFit() if quota is None else fit_quota(quota, flavors[index], pod_sets, counts)
        reasons += fit.reasons
        if quota is None or not should_try_next(fit, quota.cq):
            return _Walk(index, index, fit, tuple(reasons))
        if is_preferred(fit, best_fit):
            best, best_fit = index, fit
    return _Walk(best, None, best_fit, tuple(reasons))


def _admit(walk: _Walk, counts: Sequence[int], place_now: PlaceNow) -> Choice | None:
    """Admitted when the flavor picked has quota free now and the topology fits there now."""
    if walk.best is None or walk.fit.mode != FIT:
        return None
    placements = place_now(walk.best, counts)
    if placements is None or not all(p.fits for p in placements):
        return None
    return Choice(walk.best, tuple(counts), tuple(placements), walk.fit)


def _reduced(
    flavors: Sequence[str],
    pod_sets: Sequence[PodSetView],
    counts: Sequence[int],
    minimum: int,
    quota: QueueQuota | None,
    start: int,
    place_now: PlaceNow,
) -> Choice | None:
    """``PodSetReducer.Search`` over the one placed PodSet's counts, each a whole assignment."""
    seen: dict[int, Choice] = {}

    def fits(count: int) -> bool:
        found = _admit(_walk(flavors, pod_sets, [count], quota, start), [count], place_now)
        if found is not None:
            seen[count] = found
        return found is not None

    count = reduced(counts[0], minimum, fits)
    return None if count is None else seen[count]
