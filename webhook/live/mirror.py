"""The one writer of live cluster state: parsed objects in, immutable states published.

Watch events land here (`commit` of a paged list, `apply` per event); when something changed,
`publish_forever` swaps a new `ClusterState` into the `StateHolder`, so admission requests
never wait. A pod event costs its node's usage and leaf, a Workload's admission or finish its
assigned leaves (`live.usage`), published as a new generation sharing the trees; node events
edit the kept snapshots in place (`state.node_events`) and a Kueue object change or a relist
rebuilds the state and every snapshot, both on a worker thread. Node parses are
cached by resourceVersion. An object that does not parse is left out alone, never the state:
it is recorded on the states published (`ClusterState.rejected`) and logged once
(`live.rejections`), and every other change keeps being published.

Freshness (``live.freshness``): the published state is as current as the watches, held back
to the first change not yet published (``confirmed_at``).
"""

from __future__ import annotations

import asyncio
import logging
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from scorer import Engine
from scorer.model import Node
from webhook.live import heap
from webhook.live.assemble import DefaultLevels, Inputs, NodeEdit, node_edit
from webhook.live.assemble import assemble as _assemble
from webhook.live.holder import StateHolder
from webhook.live.native import BOUND_PODS, NativeBook
from webhook.live.native import KINDS as NATIVE_KINDS
from webhook.live.parsed import Listing, compared, kept_of, key_of, parsed_node, pod_use, workload_found
from webhook.live.publisher import Publisher
from webhook.live.rebuild_hold import RebuildHold
from webhook.live.rejections import Rejections
from webhook.live.usage import Assigned, SnapshotKey, UsageBook, private_frees
from webhook.state.cluster import ClusterState
from webhook.state.fields import metadata
from webhook.state.rejected import Rejected

log = logging.getLogger("tasgate.live")


REBUILD_RETRY_SECONDS = 10.0  # a failed rebuild is tried again this long after, changes or not
# Node events edit the kept snapshots one node at a time (a few milliseconds each at 50,000
# nodes); past this many changed nodes in one publish a rebuild is cheaper.
NODE_EDIT_LIMIT = 64


class Mirror(Publisher):
    """Parsed objects per kind; the single writer of the published state.

    Three kinds of change: *structure* (Kueue objects, namespaces, ..., any relist) rebuilds the
    state and its snapshots on a worker thread; *nodes* edit the last state's snapshots there
    instead; *usage* (pods, Workloads) is applied to the `UsageBook` as it arrives and published
    as a new generation sharing the trees, on the loop, in well under a millisecond.
    """

    def __init__(
        self,
        holder: StateHolder,
        kinds: Sequence[str],
        debounce: float = 0.05,
        engine: Engine | None = None,
        default_levels: DefaultLevels | None = None,
        settle_heap: bool = False,
        native: NativeBook | None = None,
    ) -> None:
        self.holder = holder
        self.native = native or NativeBook()  # the native gang kinds (`live.native`)
        self.settle_heap = settle_heap  # own the heap: collect before each build, freeze after (`live.heap`)
        self.engine = engine
        self.debounce = debounce
        self.default_levels: DefaultLevels = default_levels or (lambda _state: ())
        self.raw: dict[str, dict[str, Mapping[str, Any]]] = {k: {} for k in kinds}
        self.nodes: dict[str, tuple[str, Node]] = {}  # name -> (resourceVersion, node without usage)
        self.usage = UsageBook()
        self.rejections = Rejections()  # nodes, pods and Workloads that do not parse
        self.hold: RebuildHold | None = None  # test-only (`live.rebuild_hold`)
        super().__init__(kinds)
        self.absent: set[str] = set()
        holder.confirmed = self.confirmed_at
        self.structure_changed = True
        self.node_changes: set[str] = set()  # nodes changed since the last state was made
        self.generation = 0
        self.state: ClusterState | None = None  # the last one published

    def replace(self, kind: str, items: Iterable[Mapping[str, Any]]) -> None:
        """A fresh list: everything not in it is gone (synthesised deletions)."""
        listing = self.listing(kind)
        listing.add(items)
        self.commit(listing)

    def listing(self, kind: str) -> Listing:
        """An empty list of ``kind`` to fill page by page and `commit`."""
        return Listing(kind)

    def commit(self, listing: Listing) -> None:
        """Swap in a complete list of one kind."""
        kind = listing.kind
        if kind in NATIVE_KINDS:  # never a rebuild: swapped into the last state (`_with_native`)
            self.native.commit(kind, listing.native)
            self.rejections.replace(kind, listing.rejected)
            self.healthy(kind)
            self._changed()
            return
        self.raw[kind] = listing.raw
        if kind == "nodes":
            self.nodes = listing.nodes
        elif kind == "pods":
            self.usage.replace(listing.pods)
            self.native.commit(BOUND_PODS, listing.native)
        elif kind == "workloads":
            self.usage.replace_workloads(listing.workloads)
            self.usage.replace_charges(listing.charges)
        self.rejections.replace(kind, listing.rejected)
        self.structure_changed = True  # a relist is rare: rebuild whatever it was
        self.absent.discard(kind)
        self.healthy(kind)
        self._changed()

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        """One watch event. A Node update that changes nothing placement reads (a heartbeat, an
        image list, an annotation) or a Pod update that leaves its usage as it was costs a dict
        lookup and no new state; a pod that starts or ends moves its node's usage only. A node,
        pod or Workload that does not parse is left out and recorded (`_rejected`)."""
        key = key_of(obj)
        if kind in NATIVE_KINDS:
            changed, left_out = self.native.apply(kind, event, obj)
            if self._rejected(kind, key, left_out) or changed:
                self._changed()
            return
        if kind == "pods":
            found = None if event == "DELETED" else pod_use(obj)
            changed = self.usage.set(key, None if isinstance(found, Rejected) else found)
            changed = self.native.apply(BOUND_PODS, event, obj)[0] or changed
            if self._rejected(kind, key, found) or changed:
                self._changed()
            return
        if kind == "workloads":
            taken = None if event == "DELETED" else workload_found(obj)
            uses, charge = taken if isinstance(taken, tuple) else ((), None)
            changed = self.usage.set_workload(key, uses)
            charged = self.usage.set_charge(key, charge)
            if charged and self.hold is not None:
                self.hold.charge_landed(key)
            changed = charged or changed
            if self._rejected(kind, key, taken) or changed:
                self._changed()
            return
        name = str(metadata(obj).get("name"))
        if event == "DELETED":
            self.raw[kind].pop(key, None)
            changed = kind != "nodes" or self.nodes.pop(name, None) is not None
            if kind == "nodes" and self._rejected(kind, key, None):
                self._changed()
        else:
            kept, before = kept_of(kind, obj), self.raw[kind].get(key)
            if kept is not None:
                self.raw[kind][key] = kept
            changed = self._node(obj) if kind == "nodes" else not compared(kind) or kept != before
        if changed:
            if kind == "nodes":
                self.node_changes.add(name)  # edited into the snapshots, not rebuilt
            else:
                self.structure_changed = True
            self._changed()

    def _rejected(self, kind: str, key: str, found: object) -> bool:
        """Record whether ``key`` is left out (``found`` a `Rejected`); whether that changed."""
        return self.rejections.set(kind, key, found if isinstance(found, Rejected) else None)

    def mark_absent(self, kind: str) -> None:
        if kind in NATIVE_KINDS:
            self.rejections.replace(kind, {})
            if self.native.absent(kind):
                self._changed()
            self.connected(kind)
            return
        if kind not in self.absent:
            log.warning("%s are not served by the API server (CRD not installed? RBAC?); retrying", kind)
        self.absent.add(kind)
        self.raw[kind] = {}
        self.rejections.replace(kind, {})
        if kind == "workloads":
            self.usage.replace_workloads(None)  # no Kueue: its pods count on their nodes
            self.usage.replace_charges({})
        self.connected(kind)  # known absent, re-checked periodically: current until a check fails
        self.structure_changed = True
        self._changed()

    def build(self) -> ClusterState:
        """A new state from what the mirror holds now (on the caller's thread; snapshots lazy)."""
        return _assemble(self._inputs((self.usage.totals.publish(), self.usage.assigned)))

    def _inputs(self, usage: tuple[Mapping[str, Mapping[str, int]], Assigned]) -> Inputs:
        """A consistent copy of what a build reads, taken on the event loop (shallow: cheap)."""
        self.generation += 1
        others = [o for objs in self.raw.values() for o in objs.values()]
        nodes = [node for _, node in self.nodes.values()]  # sorted off the loop, in `_assemble`
        left_out = (self.rejections.current(), self.rejections.version)
        return Inputs(
            nodes, *usage, others, self.generation, self.engine, frozenset(self.absent), *left_out,
            self.usage.charged,
        )  # fmt: skip

    async def _publish(self) -> bool:
        """Publish what the mirror holds; whether every change before this call is now in it.

        A failed rebuild or edit (not a malformed object: those are left out) keeps the last
        state published, usage and rejections keep being published on it."""
        state, caught_up, built = self.state, True, False
        rebuild = self.structure_changed or state is None or self._defaults_missing(state)
        inputs: Inputs | NodeEdit | None = None
        if rebuild or len(self.node_changes) > NODE_EDIT_LIMIT:
            self.structure_changed, self.node_changes = False, set()
            inputs = self._inputs(self.usage.begin_rebuild())
        elif self.node_changes and state is not None:
            inputs = self._node_edit(state)
        if inputs is not None:
            if self.settle_heap:
                heap.before_build()  # what is garbage now is never frozen with the state
            try:
                # Made with every snapshot ready: reviews never wait for it nor build a
                # snapshot themselves, and use the previous generation meanwhile.
                build = _made if self.hold is None else self.hold.wrap(_made)
                made, frees = await asyncio.to_thread(build, inputs, self.default_levels)
            except Exception:
                log.exception("cluster state not rebuilt; the last one stays published")
                self.usage.abort_rebuild()
                self.structure_changed, caught_up = True, False
                asyncio.get_running_loop().call_later(REBUILD_RETRY_SECONDS, self.dirty.set)
                if state is None:
                    return False
            else:
                self.usage.finish_rebuild(made, frees)
                state, built = made, True
                self.rejections.published = inputs.rejections
        if state is None:  # never: no state yet is a rebuild, and a failed one returned above
            return False
        if self.usage.changed or self.rejections.pending:
            self.generation += 1
            rejected = self.rejections.merged(state.rejected) if self.rejections.pending else None
            self.rejections.published = self.rejections.version
            state = self.usage.publish(state, self.generation, rejected)
        state = self._with_native(self.usage.with_ranked(state))
        if state is not self.state:
            first = self.state is None
            self.state = state
            self.holder.publish(state)
            self.rejections.log_new(state.rejected)
            if built and self.settle_heap:
                heap.after_build(first)  # the state's containers leave every collection's walk
        return caught_up

    def _with_native(self, state: ClusterState) -> ClusterState:
        """``state`` with the native objects kept now: a new generation sharing everything else
        (its snapshots too: the native kinds change no node nor usage)."""
        index = self.native.index()
        if state.native is index:
            return state
        self.generation += 1
        return replace(state, native=index, generation=self.generation)

    def _node_edit(self, state: ClusterState) -> NodeEdit:
        """What an edit of the last state reads, copied on the loop (`assemble.node_edit`)."""
        names, self.node_changes = self.node_changes, set()
        changed = {name: found[1] if (found := self.nodes.get(name)) else None for name in names}
        self.generation += 1
        return node_edit(state, changed, self.usage, self.rejections, self.generation)

    def _defaults_missing(self, state: ClusterState) -> bool:
        """Whether the policy's default topology (after a reload, say) lacks a kept snapshot."""
        kept = self.usage.ledgers
        return any(("levels", name, levels) not in kept for name, levels in self.default_levels(state))

    def _node(self, obj: Mapping[str, Any]) -> bool:
        """Parse and keep a node; whether anything placement reads of it changed."""
        meta = metadata(obj)
        name, version = str(meta.get("name")), str(meta.get("resourceVersion", ""))
        cached = self.nodes.get(name)
        if cached is not None and cached[0] == version and version:
            return False
        parsed = parsed_node(obj)
        if self._rejected("nodes", key_of(obj), parsed):
            self._changed()
        if isinstance(parsed, Rejected):
            return self.nodes.pop(name, None) is not None
        self.nodes[name] = parsed
        return cached is None or cached[1] != parsed[1]


def _made(
    inputs: Inputs | NodeEdit, defaults: DefaultLevels
) -> tuple[ClusterState, dict[SnapshotKey, array[int]]]:
    """The next state and its ledgers' copies of free capacity, both made off the loop."""
    state = _assemble(inputs, defaults)
    return state, private_frees(state)
