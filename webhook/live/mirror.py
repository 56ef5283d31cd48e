"""The one writer of live cluster state: parsed objects in, immutable states published.

Watch events land here (`commit` of a paged list, `apply` per event); when something changed,
`publish_forever` swaps a new `ClusterState` into the `StateHolder`, so admission requests
never wait. A pod event costs its node's usage and leaf, a Workload's admission or finish its
assigned leaves (`live.usage`), published as a new generation sharing the trees; a node or
Kueue object change rebuilds the state and every snapshot on a worker thread. Node parses are
cached by resourceVersion.

Freshness means "the watches are connected and current": a kind whose watch is open counts as
fresh however quiet the cluster is (``connected``); every list, event and BOOKMARK refreshes it
(``healthy``); only a kind whose watch is down ages, from the last moment it was known good.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scorer import Engine
from scorer.model import Node
from webhook.live import heap
from webhook.live.holder import StateHolder
from webhook.live.parsed import Listing, kept_of, key_of, parsed_node, pod_use, workload_use
from webhook.live.usage import Assigned, UsageBook
from webhook.state.cluster import ClusterState, build_state
from webhook.state.fields import metadata
from webhook.wire.errors import InvalidObject

log = logging.getLogger("tasgate.live")


DefaultLevels = Callable[[ClusterState], Iterable[tuple[str, tuple[str, ...]]]]


@dataclass(frozen=True)
class _Inputs:
    nodes: list[Node]
    usage: Mapping[str, Mapping[str, int]]
    assigned: Assigned
    others: list[Mapping[str, Any]]
    generation: int
    engine: Engine | None
    unserved: frozenset[str]


def _assemble(inputs: _Inputs, defaults: DefaultLevels | None = None) -> ClusterState:
    """Fold the objects into a state; with ``defaults``, build its snapshots (and theirs) too."""
    with heap.quiet():
        return _fold(inputs, defaults)


def _fold(inputs: _Inputs, defaults: DefaultLevels | None) -> ClusterState:
    nodes = sorted(inputs.nodes, key=lambda node: node.name)
    state = build_state(
        inputs.others, inputs.generation, inputs.engine, nodes, inputs.unserved, inputs.usage, inputs.assigned
    )
    return state if defaults is None else state.prepare(defaults(state))


class Mirror:
    """Parsed objects per kind; the single writer of the published state.

    Two kinds of change: *structure* (nodes, Kueue objects, namespaces, ...) rebuilds the state
    and its snapshots on a worker thread; *usage* (pods, Workloads) is applied to the `UsageBook` as it
    arrives and published as a new generation sharing the trees, on the loop, in well under a
    millisecond.
    """

    def __init__(
        self,
        holder: StateHolder,
        kinds: Sequence[str],
        debounce: float = 0.05,
        engine: Engine | None = None,
        default_levels: DefaultLevels | None = None,
        settle_heap: bool = False,
    ) -> None:
        self.holder = holder
        self.settle_heap = settle_heap  # freeze the heap after the first sync (`live.heap`)
        self.engine = engine
        self.watched = frozenset(kinds)
        self.debounce = debounce
        self.default_levels: DefaultLevels = default_levels or (lambda _state: ())
        self.raw: dict[str, dict[str, Mapping[str, Any]]] = {k: {} for k in kinds}
        self.nodes: dict[str, tuple[str, Node]] = {}  # name -> (resourceVersion, node without usage)
        self.usage = UsageBook()
        self.synced: dict[str, float] = {}  # kind -> monotonic time it was last known current
        self.open: dict[str, float] = {}  # kind -> monotonic time its watch (re)connected
        self.absent: set[str] = set()
        self.dirty = asyncio.Event()
        self.structure_changed = True
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
        self.raw[kind] = listing.raw
        if kind == "nodes":
            self.nodes = listing.nodes
        elif kind == "pods":
            self.usage.replace(listing.pods)
        elif kind == "workloads":
            self.usage.replace_workloads(listing.workloads)
        self.structure_changed = True  # a relist is rare: rebuild whatever it was
        self.absent.discard(kind)
        self.healthy(kind)
        self.dirty.set()

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        """One watch event. A Node update that changes nothing placement reads (a heartbeat, an
        image list, an annotation) or a Pod update that leaves its usage as it was costs a dict
        lookup and no new state; a pod that starts or ends moves its node's usage only."""
        if kind == "pods":
            use = None if event == "DELETED" else pod_use(obj)
            if self.usage.set(key_of(obj), use):
                self.dirty.set()
            return
        if kind == "workloads":
            if self.usage.set_workload(key_of(obj), () if event == "DELETED" else workload_use(obj)):
                self.dirty.set()
            return
        key = key_of(obj)
        if event == "DELETED":
            self.raw[kind].pop(key, None)
            changed = kind != "nodes" or self.nodes.pop(str(metadata(obj).get("name")), None) is not None
        else:
            kept = kept_of(kind, obj)
            if kept is not None:
                self.raw[kind][key] = kept
            changed = self._node(obj) if kind == "nodes" else True
        if changed:
            self.structure_changed = True
            self.dirty.set()

    def mark_absent(self, kind: str) -> None:
        if kind not in self.absent:
            log.warning("%s are not served by the API server (CRD not installed?); retrying", kind)
        self.absent.add(kind)
        self.raw[kind] = {}
        if kind == "workloads":
            self.usage.replace_workloads(None)  # no Kueue: its pods count on their nodes
        self.connected(kind)  # known absent, re-checked periodically: current until a check fails
        self.structure_changed = True
        self.dirty.set()

    def healthy(self, kind: str) -> None:
        """``kind`` is current now: a list finished, an event or a bookmark arrived."""
        self.synced[kind] = time.monotonic()

    def connected(self, kind: str) -> None:
        """The watch of ``kind`` is open (or its absence confirmed): fresh while it stays so."""
        self.open[kind] = time.monotonic()
        self.healthy(kind)

    def disconnected(self, kind: str) -> None:
        """The watch of ``kind`` ended or failed: from now on it ages from its last good moment."""
        if self.open.pop(kind, None) is not None:
            self.healthy(kind)  # it was current until this very moment

    @property
    def ready(self) -> bool:
        return all(k in self.synced for k in self.watched)

    def freshness(self) -> float | None:
        """When the stalest watched kind was last known current (None before the first sync).

        A kind whose watch is connected is current now; a disconnected one since its last list,
        event or bookmark.
        """
        if not self.ready:
            return None
        now = time.monotonic()
        return min(now if k in self.open else self.synced[k] for k in self.watched)

    def build(self) -> ClusterState:
        """A new state from what the mirror holds now (on the caller's thread; snapshots lazy)."""
        return _assemble(self._inputs((dict(self.usage.totals), self.usage.assigned)))

    def _inputs(self, usage: tuple[Mapping[str, Mapping[str, int]], Assigned]) -> _Inputs:
        """A consistent copy of what a build reads, taken on the event loop (shallow: cheap)."""
        self.generation += 1
        others = [o for objs in self.raw.values() for o in objs.values()]
        nodes = [node for _, node in self.nodes.values()]  # sorted off the loop, in `_assemble`
        return _Inputs(
            nodes, usage[0], usage[1], others, self.generation, self.engine, frozenset(self.absent)
        )

    async def publish_forever(self) -> None:
        """Publish after changes (debounced) and keep the holder's freshness current."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dirty.wait(), 1.0)
            fresh = self.freshness()
            if self.dirty.is_set() and self.ready:
                await asyncio.sleep(self.debounce)
                self.dirty.clear()
                await self.publish_once()
            if fresh is not None:
                self.holder.touch(fresh)

    async def publish_once(self) -> None:
        """Rebuild (off the loop) if the structure changed, else publish the current usage."""
        state = self.state
        if self.structure_changed or state is None or self._defaults_missing(state):
            self.structure_changed = False
            inputs = self._inputs(self.usage.begin_rebuild())
            try:
                # Built with every snapshot ready: reviews never wait for a rebuild nor build
                # a snapshot themselves, and use the previous generation meanwhile.
                state = await asyncio.to_thread(_assemble, inputs, self.default_levels)
            except InvalidObject as exc:
                log.error("cluster state not rebuilt: %s", exc)
                self.usage.abort_rebuild()
                if state is None:
                    return
            else:
                self.usage.finish_rebuild(state)
        if self.usage.changed:
            self.generation += 1
            state = self.usage.publish(state, self.generation)
        if state is not self.state:
            first = self.state is None
            self.state = state
            self.holder.publish(state)
            if first and self.settle_heap:
                heap.settle()

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
        if parsed is None:
            return self.nodes.pop(name, None) is not None
        self.nodes[name] = parsed
        return cached is None or cached[1] != parsed[1]
