"""What the live cluster uses, as Kueue counts it: per pod, per node, per admitted Workload, and
in every snapshot the writer keeps.

Two sources (`state.workloads` says why these two): bound pods that are not TAS pods count on
their node; an admitted TAS Workload's assignment counts on each assigned leaf domain from the
moment Kueue admits it, whether its pods exist yet or not (TAS pods never count on their node,
so a pod that is both bound and assigned is counted once). Until the Workloads are known
(listed; never when Kueue is not installed) TAS pods count on their node like any other.

A pod event moves one node's usage and, through a `FreeLedger` per prepared snapshot, the free
capacity of that node's leaf; a Workload event moves its assigned leaves in the snapshots that
see them (`Scope`): O(resources × snapshots) per node or domain, never O(cluster). A node-set
change rebuilds the snapshots off the event loop from a copy of the usage; the events that
arrive meanwhile are journaled and replayed onto the new ledgers, and whatever changed meanwhile
(quota charges too, which no ledger holds) is published on the new state, so none is lost.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping

from scorer.ledger import FreeLedger
from webhook.live import heap
from webhook.state.cluster import ClusterState
from webhook.state.preemptible import add_ranked, ranked
from webhook.state.quota_usage import QuotaCharge
from webhook.state.rejected import Rejected
from webhook.state.snapshot_usage import NodeUsage, UsageShards
from webhook.state.workloads import AssignedUse, Scope

Requests = Mapping[str, int]
Shape = tuple[tuple[str, int], ...]  # a pod's requests as sorted pairs: hashable, shared, and
# (holding only strings and ints) never tracked by the cycle collector, which would otherwise
# walk 100,000 of them on every full collection and stall the loop.
# (node name, requests of one pod with `pods`, whether a TAS pod, its priority)
Use = tuple[str, Requests, bool, int]
Kept = tuple[str, Shape, bool, int]
Assigned = tuple[AssignedUse, ...]  # one Workload's usage, per leaf domain
SnapshotKey = tuple[object, ...]
Change = tuple[str | AssignedUse, Shape, int]  # (node or assigned domain, requests, sign)


class UsageBook:
    """Pod and Workload usage, kept by the one writer (the event loop); published as copies
    (per-node usage copy-on-write by shard, `state.snapshot_usage.NodeUsage`)."""

    def __init__(self) -> None:
        self.pods: dict[str, Kept] = {}
        self.workloads: dict[str, Assigned] = {}
        self.tas_pods_count = True  # until the Workloads are known: then theirs count instead
        self.totals = UsageShards()  # node -> summed requests; values never mutated
        # node -> summed requests by priority (`state.preemptible`), and its last published view
        self.ranked = UsageShards()
        self._ranked_view: Mapping[str, Requests] | None = None
        self.ledgers: dict[SnapshotKey, FreeLedger] = {}
        self.scopes: dict[SnapshotKey, Scope] = {}
        self.changed = False  # since the last publish, or since a rebuild took its copy
        self._unpublished = False  # `changed` as that rebuild took its copy
        self._journal: list[Change] | None = None
        self._shapes: dict[Shape, Shape] = {}
        self._assigned: Assigned | None = ()  # every Workload's usage, flattened (None: stale)
        self.charges: dict[str, QuotaCharge] = {}  # Workload -> its quota usage
        self._charged: tuple[QuotaCharge, ...] | None = ()  # flattened (None: stale)

    def replace(self, pods: Mapping[str, Use]) -> None:
        """A fresh list of pods. The ledgers are dropped: the caller rebuilds the snapshots."""
        self.pods = {key: self._interned(use) for key, use in pods.items()}
        self._recount()

    def replace_workloads(self, workloads: Mapping[str, Assigned] | None) -> None:
        """A fresh list of Workloads (None: not served, TAS pods count on their nodes). The
        ledgers are dropped: the caller rebuilds the snapshots."""
        self.workloads = {key: uses for key, uses in (workloads or {}).items() if uses}
        self.tas_pods_count = workloads is None
        self._assigned = None
        self._recount()

    def replace_charges(self, charges: Mapping[str, QuotaCharge]) -> None:
        """A fresh list of Workloads' quota usage."""
        self.charges, self._charged, self.changed = dict(charges), None, True

    def set_charge(self, key: str, charge: QuotaCharge | None) -> bool:
        """Workload ``key`` now holds ``charge`` of its ClusterQueue's quota; whether that changed."""
        if self.charges.get(key) == charge:
            return False
        if charge is None:
            self.charges.pop(key, None)
        else:
            self.charges[key] = charge
        self._charged, self.changed = None, True
        return True

    @property
    def charged(self) -> tuple[QuotaCharge, ...]:
        """Every Workload's quota usage (a shared tuple, rebuilt after a change)."""
        if self._charged is None:
            self._charged = tuple(self.charges.values())
        return self._charged

    def set(self, key: str, use: Use | None) -> bool:
        """Pod ``key`` now uses ``use`` (None: nothing); whether anything changed."""
        before = self.pods.get(key)
        kept = None if use is None else self._interned(use)
        if before == kept:
            return False
        if before is not None and self._counts(before):
            self._account(before[0], before[1], -1, before[3])
        if kept is None:
            self.pods.pop(key, None)
        else:
            self.pods[key] = kept
            if self._counts(kept):
                self._account(kept[0], kept[1], 1, kept[3])
        return True

    def set_workload(self, key: str, uses: Assigned) -> bool:
        """Workload ``key`` now takes ``uses`` (empty: nothing); whether anything changed."""
        before = self.workloads.get(key, ())
        if before == uses:
            return False
        for use in before:
            self._account_assigned(use, -1)
        if uses:
            self.workloads[key] = uses
        else:
            self.workloads.pop(key, None)
        for use in uses:
            self._account_assigned(use, 1)
        self._assigned = None
        return True

    @property
    def assigned(self) -> Assigned:
        """Every admitted Workload's usage (a shared tuple, rebuilt after a Workload change)."""
        if self._assigned is None:
            self._assigned = tuple(use for uses in self.workloads.values() for use in uses)
        return self._assigned

    def begin_rebuild(self) -> tuple[NodeUsage, Assigned]:
        """Usage for a rebuild off the loop; events from now on are journaled. The state it
        makes holds every change so far, so ``changed`` now counts only what comes meanwhile
        (a quota charge too, which no ledger journals): that is published on the new state."""
        self._journal, self._unpublished, self.changed = [], self.changed, False
        return self.totals.publish(), self.assigned

    def abort_rebuild(self) -> None:
        """The rebuild failed: the ledgers kept every event; stop journaling. What the rebuild
        took and the published state lacks is still to publish."""
        self._journal, self.changed = None, self.changed or self._unpublished

    def finish_rebuild(self, state: ClusterState, frees: Mapping[SnapshotKey, array[int]] = {}) -> None:
        """Keep ledgers of ``state``'s snapshots and replay the journal onto them. ``frees``:
        private copies of snapshots' free capacity made off the loop (`private_frees`), taken
        over by their ledgers; at 50,000 nodes one copy held the loop 1-9 ms (page faults of a
        fresh 2 MB array). A snapshot without one is copied here.

        No ledger is kept when the usage was replaced meanwhile (a relist: `_recount` dropped the
        journal): ``state`` predates it, and the relist has its own rebuild coming."""
        journal, self._journal = self._journal, None
        if journal is None:
            return
        snapshots = state.snapshots()
        heap.release(self.ledgers)  # their arrays freed off the loop too
        self.ledgers = {key: FreeLedger(cluster, frees.get(key)) for key, cluster in snapshots.items()}
        self.scopes = {key: state.scope(key) for key in snapshots}
        for where, shape, sign in journal:
            if isinstance(where, str):
                self._to_ledgers(where, shape, sign)
            else:
                self._to_ledgers_assigned(where, sign)

    def publish(
        self, state: ClusterState, generation: int, rejected: tuple[Rejected, ...] | None = None
    ) -> ClusterState:
        """``state`` with current usage and free capacity; trees shared, arrays copied; and
        ``rejected`` (when given: a pod or Workload left out, or back) as its rejections."""
        snapshots = {key: ledger.publish(generation) for key, ledger in self.ledgers.items()}
        self.changed = False
        totals = self.totals.publish()  # the shards no event touched are shared (`NodeUsage`)
        return state.with_usage(
            totals, snapshots, generation, self.assigned, rejected, self.charged, self.ranked_view()
        )

    def ranked_view(self) -> Mapping[str, Requests]:
        """The per-priority usage as published (re-published only after it changed)."""
        if self._ranked_view is None:
            self._ranked_view = self.ranked.publish()
        return self._ranked_view

    def with_ranked(self, state: ClusterState) -> ClusterState:
        """``state`` carrying the current per-priority usage (a rebuilt state is made without it)."""
        view = self.ranked_view()
        return state if state.ranked_usage is view else state.with_ranked_usage(view)

    def _counts(self, kept: Kept) -> bool:
        """Whether a pod counts on its node: not a TAS pod, or no Workload is known."""
        return self.tas_pods_count or not kept[2]

    def _recount(self) -> None:
        totals: dict[str, dict[str, int]] = {}
        ranks: dict[str, dict[str, int]] = {}
        for kept in self.pods.values():
            if self._counts(kept):
                into = totals.setdefault(kept[0], {})
                for name, amount in kept[1]:
                    into[name] = into.get(name, 0) + amount
                add_ranked(ranks, kept[0], dict(kept[1]), kept[3])
        self.totals = UsageShards(totals)
        self.ranked, self._ranked_view = UsageShards(ranks), None
        self.ledgers, self.scopes = {}, {}
        self._journal = None
        self.changed = True

    def _account(self, node: str, shape: Shape, sign: int, priority: int) -> None:
        self.totals.set(node, _moved(self.totals.get(node), shape, sign))
        if priority != 0:  # priority 0 is the node's usage less what is kept (`state.preemptible`)
            self.ranked.set(node, _moved(self.ranked.get(node), ranked(shape, priority), sign))
            self._ranked_view = None
        self._to_ledgers(node, shape, sign)
        if self._journal is not None:
            self._journal.append((node, shape, sign))
        self.changed = True

    def _account_assigned(self, use: AssignedUse, sign: int) -> None:
        self._to_ledgers_assigned(use, sign)
        if self._journal is not None:
            self._journal.append((use, use.requests, sign))
        self.changed = True

    def _to_ledgers(self, node: str, shape: Shape, sign: int) -> None:
        for ledger in self.ledgers.values():
            ledger.add(node, shape, sign)

    def _to_ledgers_assigned(self, use: AssignedUse, sign: int) -> None:
        for key, ledger in self.ledgers.items():
            if self.scopes[key].sees(use):
                ledger.add_domain(use.values, use.requests, sign)

    def _interned(self, use: Use) -> Kept:
        """One shared shape per distinct pod requests and one string per node name: 100,000
        pods in a few dozen shapes cost a few dozen shapes."""
        node, requests, tas, priority = use
        shape = tuple(sorted(requests.items()))
        found = self._shapes.get(shape)
        if found is None:
            if len(self._shapes) >= 65536:
                self._shapes.clear()
            found = self._shapes[shape] = shape
        return sys.intern(node), found, tas, priority


def _moved(total: Requests | None, shape: Iterable[tuple[str, int]], sign: int) -> dict[str, int]:
    """``total`` with one pod's ``shape`` added (``sign`` 1) or taken away (-1); zeros dropped."""
    out = dict(total or ())
    for name, amount in shape:
        value = out.get(name, 0) + sign * amount
        if value:
            out[name] = value
        else:
            out.pop(name, None)
    return out


def private_frees(state: ClusterState) -> dict[SnapshotKey, array[int]]:
    """A copy of each of ``state``'s snapshots' free capacity for the writer's ledgers to take
    over (`UsageBook.finish_rebuild`): made on the thread that made ``state``, not the loop."""
    return {key: array("q", cluster.now.free) for key, cluster in state.snapshots().items()}
