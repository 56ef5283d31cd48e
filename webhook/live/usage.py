"""What the live cluster's pods use: per pod, per node, and in every snapshot the writer keeps.

A pod event moves one node's usage and, through a `FreeLedger` per prepared snapshot, the free
capacity of that node's leaf: O(resources × snapshots), never O(cluster). A node-set change
rebuilds the snapshots off the event loop from a copy of the per-node totals; the pod events
that arrive meanwhile are journaled and replayed onto the new ledgers, so none is lost.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from scorer.ledger import FreeLedger
from webhook.state.cluster import ClusterState

Requests = Mapping[str, int]
Shape = tuple[tuple[str, int], ...]  # a pod's requests as sorted pairs: hashable, shared, and
# (holding only strings and ints) never tracked by the cycle collector, which would otherwise
# walk 100,000 of them on every full collection and stall the loop.
Use = tuple[str, Requests]  # (node name, requests of one pod, `pods` included)
Kept = tuple[str, Shape]
SnapshotKey = tuple[object, ...]


class UsageBook:
    """Pod usage, kept by the one writer (the event loop); published as immutable copies."""

    def __init__(self) -> None:
        self.pods: dict[str, Kept] = {}
        self.totals: dict[str, Requests] = {}  # node -> summed requests; values never mutated
        self.ledgers: dict[SnapshotKey, FreeLedger] = {}
        self.changed = False  # since the last publish
        self._journal: list[tuple[str, Shape, int]] | None = None
        self._shapes: dict[Shape, Shape] = {}

    def replace(self, pods: Mapping[str, Use]) -> None:
        """A fresh list of pods. The ledgers are dropped: the caller rebuilds the snapshots."""
        self.pods = {key: self._interned(use) for key, use in pods.items()}
        totals: dict[str, dict[str, int]] = {}
        for node, shape in self.pods.values():
            into = totals.setdefault(node, {})
            for name, amount in shape:
                into[name] = into.get(name, 0) + amount
        self.totals = dict(totals)
        self.ledgers = {}
        self._journal = None
        self.changed = True

    def set(self, key: str, use: Use | None) -> bool:
        """Pod ``key`` now uses ``use`` (None: nothing); whether anything changed."""
        before = self.pods.get(key)
        kept = None if use is None else self._interned(use)
        if before == kept:
            return False
        if before is not None:
            self._account(before[0], before[1], -1)
        if kept is None:
            self.pods.pop(key, None)
        else:
            self.pods[key] = kept
            self._account(kept[0], kept[1], 1)
        return True

    def begin_rebuild(self) -> dict[str, Requests]:
        """Per-node usage for a rebuild off the loop; pod events from now on are journaled."""
        self._journal = []
        return dict(self.totals)

    def abort_rebuild(self) -> None:
        """The rebuild failed: the ledgers kept every event; stop journaling."""
        self._journal = None

    def finish_rebuild(self, state: ClusterState) -> None:
        """Keep ledgers of ``state``'s snapshots and replay the journal onto them."""
        journal, self._journal = self._journal or [], None
        self.ledgers = {key: FreeLedger(cluster) for key, cluster in state.snapshots().items()}
        for node, requests, sign in journal:
            for ledger in self.ledgers.values():
                ledger.add(node, requests, sign)
        self.changed = bool(journal)

    def publish(self, state: ClusterState, generation: int) -> ClusterState:
        """``state`` with current usage and free capacity; trees shared, arrays copied."""
        snapshots = {key: ledger.publish(generation) for key, ledger in self.ledgers.items()}
        self.changed = False
        return state.with_usage(dict(self.totals), snapshots, generation)

    def _account(self, node: str, shape: Shape, sign: int) -> None:
        total = dict(self.totals.get(node, ()))
        for name, amount in shape:
            value = total.get(name, 0) + sign * amount
            if value:
                total[name] = value
            else:
                total.pop(name, None)
        if total:
            self.totals[node] = total
        else:
            self.totals.pop(node, None)
        for ledger in self.ledgers.values():
            ledger.add(node, shape, sign)
        if self._journal is not None:
            self._journal.append((node, shape, sign))
        self.changed = True

    def _interned(self, use: Use) -> Kept:
        """One shared shape per distinct pod requests and one string per node name: 100,000
        pods in a few dozen shapes cost a few dozen shapes."""
        node, requests = use
        shape = tuple(sorted(requests.items()))
        found = self._shapes.get(shape)
        if found is None:
            if len(self._shapes) >= 65536:
                self._shapes.clear()
            found = self._shapes[shape] = shape
        return sys.intern(node), found
