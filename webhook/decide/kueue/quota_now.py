"""Whether a workload's requests fit a flavor's quota now, as Kueue's flavor assigner judges it.

A twin of ``flavorassigner.fitsResourceQuota`` (Kueue v0.19.2) on the quota tree
(`state.quota_tree`): a request above ``PotentialAvailable`` does not fit at all ("insufficient
quota ... > maximum capacity"), one within ``Available`` fits (borrowing when above the
ClusterQueue's nominal quota: ``FindHeightOfLowestSubtreeThatFits``), and one in between needs
quota that is in use ("insufficient unused quota for R in flavor F, N more needed"). Kueue would
then look for preemption targets: here that flavor waits (what Kueue does when it finds none),
and ``decide.kueue.preemption`` then looks for the targets Kueue would evict. PodSets are charged in
order, each on top of the ones before it (``assignmentUsage``), and a ``pods`` request counts
where a resource group covers it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webhook.model.podset import PodSetView
from webhook.model.quantity import format_quantity
from webhook.state.cluster import ClusterState
from webhook.state.kueue import ClusterQueue
from webhook.state.quota_tree import Node, available, borrowing_height, potential_available
from webhook.state.quota_usage import FlavorResource

PODS = "pods"
# Kueue's preemptionMode, ordered: what a flavor's quota allows now.
NO_FIT, NO_CANDIDATES, FIT = 0, 1, 4


@dataclass(frozen=True)
class QuotaFit:
    """A flavor's quota verdict: ``mode``, Kueue's borrowing level, its reasons and what borrows."""

    mode: int = FIT
    borrow: int = 0
    reasons: tuple[str, ...] = ()
    borrowed: tuple[tuple[str, str, int, int], ...] = ()  # (flavor, resource, in use with it, nominal)


@dataclass(frozen=True)
class QueueQuota:
    """The ClusterQueue a workload goes to, with its node of the quota tree."""

    cq: ClusterQueue
    node: Node

    @functools.cached_property
    def stated(self) -> frozenset[FlavorResource]:
        """The (flavor, resource) pairs the ClusterQueue states a quota for. Kueue's API requires
        one for every covered resource; a state without it has nothing to judge by."""
        return frozenset((f.name, r) for g in self.cq.groups for f in g.flavors for r in f.nominal)

    @property
    def root(self) -> str:
        names = [n.name for n in self.node.path_to_root()]
        return names[-1] if names else ""


def queue_quota(state: ClusterState, cluster_queue: str | None) -> QueueQuota | None:
    """None without a ClusterQueue (the policy's default topology): no quota to judge."""
    cq = state.cluster_queues.get(cluster_queue or "")
    node = state.quota_tree.queue(cq.name) if cq is not None else None
    return None if cq is None or node is None else QueueQuota(cq, node)


def fit_quota(
    quota: QueueQuota, flavor: str, pod_sets: Sequence[PodSetView], counts: Sequence[int]
) -> QuotaFit:
    """The flavor's representative mode for these PodSets at ``counts`` (the worst resource's)."""
    assumed: dict[FlavorResource, int] = {}
    worst = QuotaFit()
    reasons: list[str] = []
    borrowed: list[tuple[str, str, int, int]] = []
    for p, count in zip(pod_sets, counts, strict=True):
        for resource, per_pod in _requests(p, quota.cq).items():
            fr = (_flavor_for(quota, flavor, resource), resource)
            if per_pod <= 0 or fr not in quota.stated:
                continue  # not covered (`decide.kueue.quota` denies it), or no quota stated: not judged
            before = assumed.get(fr, 0)
            assumed[fr] = before + per_pod * count
            found = _fits_resource(quota.node, fr, before, per_pod * count)
            reasons += found.reasons
            borrowed += found.borrowed
            if _worse(found, worst):
                worst = found
    return QuotaFit(worst.mode, worst.borrow, tuple(reasons), tuple(borrowed))


def _fits_resource(node: Node, fr: FlavorResource, before: int, request: int) -> QuotaFit:
    flavor, resource = fr
    value = before + request
    most = potential_available(node, fr)
    if value > most:
        text = (
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({format_quantity(resource, before)}) + current podset request "
            f"({format_quantity(resource, request)}) > maximum capacity ({format_quantity(resource, most)})"
        )
        return QuotaFit(NO_FIT, 0, (text,))
    borrow = borrowing_height(node, fr, value)
    free = max(0, available(node, fr))
    if value <= free:
        nominal = node.quotas[fr].nominal if fr in node.quotas else 0
        total = node.usage.get(fr, 0) + value
        return QuotaFit(FIT, borrow, (), ((flavor, resource, total, nominal),) if borrow else ())
    short = format_quantity(resource, value - free)
    text = f"insufficient unused quota for {resource} in flavor {flavor}, {short} more needed"
    return QuotaFit(NO_CANDIDATES, borrow, (text,))


def _worse(a: QuotaFit, b: QuotaFit) -> bool:
    """Whether ``a`` is worse than ``b``: a lower mode, or the same with more borrowing."""
    return (a.mode, -a.borrow) < (b.mode, -b.borrow)


def _flavor_for(quota: QueueQuota, flavor: str, resource: str) -> str:
    """The flavor a resource is charged to: ``flavor`` when its resource group lists it; in
    another resource group (Kueue assigns each group its own flavor), that group's first flavor
    that fits now, else its first. "" when no group covers it (`decide.kueue.quota` denies that)."""
    group = quota.cq.group_covering(resource)
    if group is None or not group.flavors:
        return ""
    names = [f.name for f in group.flavors]
    if flavor in names:
        return flavor
    for name in names:
        if _fits_resource(quota.node, (name, resource), 0, 0).mode == FIT:
            return name
    return names[0]


def _requests(p: PodSetView, cq: ClusterQueue) -> Mapping[str, int]:
    """Per-pod requests as Kueue's quota counts them: ``pods`` only where a group covers it."""
    requests = dict(p.pod_set.requests)
    if cq.group_covering(PODS) is not None:
        requests[PODS] = 1
    return requests


def should_try_next(fit: QuotaFit, cq: ClusterQueue) -> bool:
    """``shouldTryNextFlavor``: on after a flavor that does not fit, or that borrows under
    ``whenCanBorrow: TryNextFlavor`` (the default ``MayStopSearch`` takes it)."""
    if fit.mode in (NO_FIT, NO_CANDIDATES):
        return True
    return fit.borrow > 0 and cq.try_next_when_borrowing


def is_preferred(a: QuotaFit, b: QuotaFit) -> bool:
    """``isPreferred`` under the default ``BorrowingOverPreemption``: a better mode, then less borrowing."""
    if a.mode == NO_FIT:
        return False
    if b.mode == NO_FIT:
        return True
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrow < b.borrow
