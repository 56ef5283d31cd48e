"""A waiting gang re-judged as Kueue admits it after preemption (`decide.kueue.preemption`).

Kueue's ``workloadFits`` re-runs quota and topology on the snapshot with the targets removed;
here the whole admission (``score_flavors`` on the state without them) is re-run, and only an
admission of the full count on the same flavor counts as a fit (preemption never reduces a
count: ``PodSetReducer`` runs only when it finds no targets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.decide.kueue.preemption import Preemption, find_preemption
from webhook.decide.kueue.scoring import Scored, score_flavors
from webhook.decide.kueue.topology import Target, resolve, with_levels
from webhook.decide.policy import Inject, Policy
from webhook.decide.verdicts import FlavorVerdict, all_fit_now
from webhook.model.podset import PodSetView
from webhook.state.cluster import ClusterState


@dataclass(frozen=True)
class AfterPreemption:
    preemption: Preemption
    scored: Scored
    flavors: tuple[FlavorVerdict, ...]


def after_preemption(
    obj: Mapping[str, Any],
    namespace: str,
    queue: str | None,
    cluster_queue: str | None,
    pod_sets: Sequence[PodSetView],
    wanted: Inject | None,
    judged: Sequence[bool],
    targets: Sequence[Target],
    waiting: Scored,
    state: ClusterState,
    policy: Policy,
) -> AfterPreemption | None:
    """What Kueue admits once it has evicted its preemption targets; None: it just waits."""
    placed = [p for p, j in zip(pod_sets, judged, strict=True) if j]
    flavor = waiting.target.flavor

    def fits(after: ClusterState) -> tuple[Scored, tuple[FlavorVerdict, ...]] | None:
        resolution = resolve(after, namespace, queue, policy.default_topology)
        again = with_levels(resolution.targets, placed)
        if not again:
            return None
        scored, flavors = score_flavors(pod_sets, wanted, again, judged)
        full = all(v.admitted is None or v.admitted == v.count for v in scored.verdicts if v.judged)
        ok = scored.target.flavor == flavor and all_fit_now(scored.verdicts) and full
        return (scored, flavors) if ok else None

    blocked = any(v.quota for v in waiting.verdicts)
    names = [t.flavor for t in targets]
    found = find_preemption(obj, placed, state, cluster_queue, names, blocked, fits)
    if found is None or not isinstance(found.fit, tuple):
        return None
    scored, flavors = found.fit
    return AfterPreemption(found, scored, flavors)
