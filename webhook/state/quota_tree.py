"""Kueue's quota tree: ClusterQueues and Cohorts as resource nodes, and what a ClusterQueue may take.

A line-for-line twin of Kueue v0.19.2's ``pkg/cache/scheduler/resource_node.go``. Every node has
``Quotas`` (nominal, borrowingLimit, lendingLimit per flavor and resource), a ``SubtreeQuota``
(its nominal quota plus what its children lend it: their subtree less their ``localQuota``) and a
``Usage`` (a ClusterQueue's own; a Cohort's is what its children use beyond their local quota).
``localQuota`` is the part a ``lendingLimit`` keeps from the parent. ``available`` is what a
ClusterQueue may take now, ``potential_available`` what it could ever take (the same with no
usage), both within every ``borrowingLimit`` on the way to the root.

The tree: a ClusterQueue's ``cohortName`` and a Cohort's ``parentName``; a name no Cohort object
carries is an implicit Cohort with no quota of its own and no parent (Kueue creates it so). A
Cohort in a cycle has no parent here (Kueue marks such queues inactive: nothing is admitted).
Python integers do not overflow: Kueue's saturating ``Amount`` arithmetic is not needed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from webhook.state.kueue import ClusterQueue, Cohort, ResourceGroup
from webhook.state.quota_usage import FlavorResource


@dataclass(frozen=True)
class Quota:
    nominal: int = 0
    borrowing: int | None = None
    lending: int | None = None


@dataclass
class Node:
    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, Quota]
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    def local_quota(self, fr: FlavorResource) -> int:
        """``localQuota``: what a lendingLimit keeps in this subtree, never lent to the parent."""
        lending = self.quotas.get(fr, Quota()).lending
        return 0 if lending is None else max(0, self.subtree.get(fr, 0) - lending)

    def local_available(self, fr: FlavorResource) -> int:
        """``LocalAvailable``: local quota not yet used."""
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def path_to_root(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def height(self) -> int:
        """``getNodeHeight`` (preemption/classical): 0 for a leaf, 1 above ClusterQueues only."""
        cohorts = [c for c in self.children if c.is_cohort]
        return max([min(len(self.children), 1), *(c.height() + 1 for c in cohorts)])


class QuotaTree:
    """The resource nodes of every ClusterQueue and Cohort, with usage accumulated to the roots."""

    def __init__(
        self,
        queues: Mapping[str, ClusterQueue],
        cohorts: Mapping[str, Cohort],
        usage: Mapping[str, Mapping[FlavorResource, int]],
    ) -> None:
        self.queues = {name: Node(name, False, _quotas(cq.groups)) for name, cq in queues.items()}
        self.cohorts = {name: Node(name, True, _quotas(c.groups)) for name, c in cohorts.items()}
        for name, node in self.queues.items():
            node.usage = dict(usage.get(name, {}))
            self._link(node, queues[name].cohort)
        for name, cohort in cohorts.items():
            self._link(self.cohorts[name], cohort.parent, avoid_cycle=True)
        for root in [c for c in self.cohorts.values() if c.parent is None]:
            _accumulate(root)
        for node in self.queues.values():
            if node.parent is None:
                node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}

    def _link(self, node: Node, parent_name: str | None, avoid_cycle: bool = False) -> None:
        if not parent_name:
            return
        parent = self.cohorts.get(parent_name)
        if parent is None:
            parent = self.cohorts[parent_name] = Node(parent_name, True, {})  # an implicit Cohort
        if avoid_cycle and (parent is node or node in parent.path_to_root()):
            return
        node.parent = parent
        parent.children.append(node)

    def queue(self, name: str) -> Node | None:
        return self.queues.get(name)


def _quotas(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, Quota]:
    """``createResourceQuotas``: one quota per (flavor, resource) a flavor states."""
    quotas: dict[FlavorResource, Quota] = {}
    for group in groups:
        for flavor in group.flavors:
            for resource, nominal in flavor.nominal.items():
                borrowing, lending = flavor.borrowing_limit.get(resource), flavor.lending_limit.get(resource)
                quotas[(flavor.name, resource)] = Quota(nominal, borrowing, lending)
    return quotas


def _accumulate(cohort: Node) -> None:
    """``updateCohortResourceNode``: subtree quota and usage from the leaves up."""
    cohort.subtree = {fr: q.nominal for fr, q in cohort.quotas.items()}
    cohort.usage = {}
    for child in cohort.children:
        if child.is_cohort:
            _accumulate(child)
        else:
            child.subtree = {fr: q.nominal for fr, q in child.quotas.items()}
        for fr, quota in child.subtree.items():
            cohort.subtree[fr] = cohort.subtree.get(fr, 0) + quota - child.local_quota(fr)
        for fr, used in child.usage.items():
            cohort.usage[fr] = cohort.usage.get(fr, 0) + max(0, used - child.local_quota(fr))


def available(node: Node, fr: FlavorResource) -> int:
    """``available``: what ``node`` may take now, within the borrowing limits up to the root
    (negative when over-admitted; ``ClusterQueueSnapshot.Available`` clamps it at 0)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    from_parent = available(node.parent, fr)
    borrowing = node.quotas.get(fr, Quota()).borrowing
    if borrowing is not None:
        local = node.local_quota(fr)
        stored = node.subtree.get(fr, 0) - local
        used = max(0, node.usage.get(fr, 0) - local)
        from_parent = min(stored - used + borrowing, from_parent)
    return node.local_available(fr) + from_parent


def potential_available(node: Node, fr: FlavorResource) -> int:
    """``potentialAvailable``: the most ``node`` could take with no usage anywhere."""
    if node.parent is None:
        return node.subtree.get(fr, 0)
    most = node.local_quota(fr) + potential_available(node.parent, fr)
    borrowing = node.quotas.get(fr, Quota()).borrowing
    if borrowing is not None:
        most = min(node.subtree.get(fr, 0) + borrowing, most)
    return most


def borrowing_height(queue: Node, fr: FlavorResource, value: int) -> int:
    """``FindHeightOfLowestSubtreeThatFits``: 0 when ``value`` fits the queue's nominal quota,
    else the height of the lowest Cohort whose subtree holds it (Kueue's borrowing level)."""
    nominal = queue.quotas.get(fr, Quota()).nominal
    if queue.parent is None or nominal >= queue.usage.get(fr, 0) + value:
        return 0
    remaining = value - queue.local_available(fr)
    root = queue.parent
    for node in queue.path_to_root():
        if node.subtree.get(fr, 0) >= node.usage.get(fr, 0) + remaining:
            return node.height()
        remaining -= node.local_available(fr)
        root = node
    return root.height()
