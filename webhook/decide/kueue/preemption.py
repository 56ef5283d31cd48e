"""Whether Kueue admits a waiting gang by preempting lower-priority Workloads, and which.

A twin of Kueue v0.19.2's classical preemption (``preemption.classicalPreemptions``) for the
part tasgate models exactly:

- When it is tried: the flavor's quota needs quota in use (``fitsResourceQuota`` → Preempt,
  only when the request is within the ClusterQueue's nominal quota: a request that borrows
  preempts only under ``borrowWithinCohort``, not modelled), or the quota fits but the topology
  does not (``assignFlavors`` turns a TAS failure into Preempt when it fits the empty
  topology, ``WithSimulateEmpty``).
- Candidates (``findCandidates``): the admitted Workloads of the same ClusterQueue that use the
  flavor, under ``withinClusterQueue`` (``SatisfiesPreemptionPolicy``: ``LowerPriority``; for a
  workload being created now, the newest, ``LowerOrNewerEqualPriority`` is the same).
- Their order (``CandidatesOrdering``): evicted first, lower priority first, the most recent
  QuotaReserved first, then UID.
- The minimal set: remove candidates in order until the gang fits (``workloadFits``: quota
  available, borrowing allowed, and the topology on the freed leaf domains), then add back, in
  reverse, every one it still fits without (``fillBackWorkloads``).

Not modelled, so the gang stays ``waits`` (never worse than before): a ClusterQueue of more than
one candidate flavor (``whenCanPreempt`` and the oracle's choice among flavors), reclaiming from
other ClusterQueues of the cohort (``reclaimWithinCohort``, hierarchical reclaim) when one of
them borrows the flavor, ``borrowWithinCohort``, fair sharing, more than ``MAX_CANDIDATES``
candidates, and a workload whose priority class does not exist.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scorer.ledger import FreeLedger
from webhook.model.podset import PodSetView
from webhook.state.cluster import ClusterState
from webhook.state.kueue import ClusterQueue
from webhook.state.priorities import ANY, NEVER, workload_priority
from webhook.state.quota_usage import QuotaCharge

MAX_CANDIDATES = 64
Workload = tuple[str, str]  # (namespace, name)
# Whether the gang is admitted now on this state (its placement then), else None.
Fits = Callable[[ClusterState], object | None]


@dataclass(frozen=True)
class Preemption:
    """The Workloads Kueue evicts (in its order), the state after, and the gang's fit there."""

    victims: tuple[Workload, ...]
    cluster_queue: str
    after: ClusterState
    fit: object


def find_preemption(
    obj: Mapping[str, Any],
    pod_sets: Sequence[PodSetView],
    state: ClusterState,
    cluster_queue: str | None,
    flavors: Sequence[str],
    quota_blocked: bool,
    fits: Fits,
) -> Preemption | None:
    """Kueue's preemption targets for a gang that waits, or None (it waits).

    ``flavors``: its candidate TAS flavors; ``quota_blocked``: whether quota in use (not the
    topology) holds it back; ``fits`` re-runs the whole admission on a state.
    """
    cq = state.cluster_queues.get(cluster_queue or "")
    if cq is None or cq.preemption.within_cluster_queue == NEVER or len(flavors) != 1:
        return None
    flavor = flavors[0]
    resources = {r for p in pod_sets for r, v in p.pod_set.requests.items() if v > 0}
    if quota_blocked and not _within_nominal(cq, flavor, pod_sets):
        return None  # beyond nominal: Kueue preempts only under borrowWithinCohort
    if _others_may_be_reclaimed(state, cq, flavor):
        return None
    templates = [p.pod_set.template for p in pod_sets]
    priority = workload_priority(obj, templates, state.priority_classes)
    if priority is None:
        return None
    policy = cq.preemption.within_cluster_queue
    candidates = ordered(
        c
        for c in state.charges
        if c.cluster_queue == cq.name
        and (policy == ANY or c.priority < priority)
        and any(fr[0] == flavor and fr[1] in resources and v > 0 for fr, v in c.amounts)
    )
    if not candidates or len(candidates) > MAX_CANDIDATES:
        return None
    return _minimal_set(state, cq.name, candidates, fits)


def ordered(charges: Any) -> list[QuotaCharge]:
    """``CandidatesOrdering`` within one ClusterQueue: evicted first, lower priority first, the
    latest QuotaReserved first (none yet: now, the latest), then UID."""
    found = list(charges)
    found.sort(key=lambda c: c.uid)
    found.sort(key=lambda c: c.reserved_at or "~", reverse=True)
    found.sort(key=lambda c: c.priority)
    found.sort(key=lambda c: not c.evicted)
    return found


def _minimal_set(
    state: ClusterState, cluster_queue: str, candidates: Sequence[QuotaCharge], fits: Fits
) -> Preemption | None:
    """``classicalPreemptions`` (one attempt, borrowing allowed) and ``fillBackWorkloads``."""
    targets: list[Workload] = []
    for candidate in candidates:
        targets.append(candidate.workload)
        after = without(state, targets)
        fit = fits(after)
        if fit is None:
            continue
        for i in range(len(targets) - 2, -1, -1):
            trial = [*targets[:i], *targets[i + 1 :]]
            if fits(without(state, trial)) is not None:
                targets[i] = targets[-1]
                targets.pop()
        after = without(state, targets)
        fit = fits(after)
        return None if fit is None else Preemption(tuple(targets), cluster_queue, after, fit)
    return None


def without(state: ClusterState, workloads: Sequence[Workload]) -> ClusterState:
    """``state`` with these Workloads evicted: their quota and assigned leaf domains freed
    (``Snapshot.RemoveWorkload``). The snapshots already built keep their trees and get the
    freed capacity back through a ledger (no rebuild: a search may try dozens of sets)."""
    gone = set(workloads)
    freed = [u for u in state.assigned if u.workload in gone]
    snapshots = {}
    for key, snapshot in state.snapshots().items():
        scope = state.scope(key)
        ledger = FreeLedger(snapshot)
        for use in freed:
            if scope.sees(use):
                ledger.add_domain(use.values, use.requests, -1)
        snapshots[key] = ledger.publish(state.generation)
    return replace(
        state,
        assigned=tuple(u for u in state.assigned if u.workload not in gone),
        charges=tuple(c for c in state.charges if c.workload not in gone),
        _snapshots=snapshots,
        _lock=threading.Lock(),
    )


def _within_nominal(cq: ClusterQueue, flavor: str, pod_sets: Sequence[PodSetView]) -> bool:
    """``rQuota.Nominal >= val`` for every resource the gang asks of the flavor."""
    nominal: dict[str, int] = {}
    for group in cq.groups:
        for f in group.flavors:
            if f.name == flavor:
                nominal.update(f.nominal)
    totals: dict[str, int] = {}
    for p in pod_sets:
        for resource, per_pod in p.pod_set.requests.items():
            if resource in nominal:
                totals[resource] = totals.get(resource, 0) + per_pod * p.count
    return all(v <= nominal[r] for r, v in totals.items())


def _others_may_be_reclaimed(state: ClusterState, cq: ClusterQueue, flavor: str) -> bool:
    """Whether another ClusterQueue of the cohort borrows the flavor while the queue may
    reclaim (``findCandidates`` → ``cqIsBorrowing``): that search is not modelled."""
    if cq.cohort is None or cq.preemption.reclaim_within_cohort == NEVER:
        return False
    tree = state.quota_tree
    mine = tree.queue(cq.name)
    root = _root(mine)
    for other in state.cluster_queues.values():
        node = tree.queue(other.name)
        if other.name == cq.name or node is None or _root(node) != root:
            continue
        for fr, used in node.usage.items():
            if fr[0] == flavor and used > node.local_quota(fr):
                return True
    return False


def _root(node: Any) -> str:
    names = [n.name for n in node.path_to_root()] if node is not None else []
    return names[-1] if names else ""


def victims_warning(found: Preemption, limit: int = 200) -> str:
    """The warning naming the Workloads Kueue evicts, within the API server's 256 characters."""
    names = [f"{ns}/{name}" for ns, name in found.victims]
    head = (
        f"admitted after preemption: Kueue evicts {len(names)} lower-priority Workload(s) of "
        f'ClusterQueue "{found.cluster_queue}": '
    )
    shown: list[str] = []
    for n in names:
        if len(head) + len(", ".join([*shown, n])) > limit:
            break
        shown.append(n)
    rest = len(names) - len(shown)
    return head + ", ".join(shown) + (f" and {rest} more" if rest else "")
