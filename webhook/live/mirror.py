"""The one writer of live cluster state: parsed objects in, immutable states published.

Watch events land here (`replace` after a list, `apply` per event); when something changed,
`publish_forever` builds a new `ClusterState` and swaps it into the `StateHolder`, so admission
requests never wait for a rebuild. Node parses are cached by resourceVersion and pod usage is
kept per pod, so a rebuild is a sum, not a re-parse of the cluster.

Freshness means "the watches are connected and current": a kind whose watch is open counts as
fresh however quiet the cluster is (``connected``); every list, event and BOOKMARK refreshes it
(``healthy``); only a kind whose watch is down ages, from the last moment it was known good.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scorer import Engine
from scorer.model import Node
from webhook.live.holder import StateHolder
from webhook.state.cluster import ClusterState, build_state, parse_node, pod_usage
from webhook.wire.errors import InvalidObject

log = logging.getLogger("tasgate.live")


@dataclass(frozen=True)
class _Inputs:
    nodes: list[tuple[str, Node]]
    usage: list[tuple[str, dict[str, int]]]
    others: list[Mapping[str, Any]]
    generation: int
    engine: Engine | None
    unserved: frozenset[str]


def _assemble(inputs: _Inputs, prepare: bool = False) -> ClusterState:
    """Sum usage per node, fold the objects into a state, and (``prepare``) build its snapshots."""
    totals: dict[str, dict[str, int]] = {}
    for node_name, requests in inputs.usage:
        into = totals.setdefault(node_name, {})
        for resource, amount in requests.items():
            into[resource] = into.get(resource, 0) + amount
    nodes = [replace(node, usage=totals.get(name, {})) for name, node in inputs.nodes]
    state = build_state(inputs.others, inputs.generation, inputs.engine, nodes, unserved=inputs.unserved)
    if prepare:
        for flavor in state.flavors.values():
            topology = state.topologies.get(flavor.topology_name or "")
            if topology is not None and topology.levels:
                state.flavor_snapshot(flavor, topology)
    return state


# Kinds the state reads as parsed values (nodes, pod usage) or only needs to know are served
# (PodGroups): their objects are never kept whole. Memory is then bound by nodes and pods parsed,
# not by what the API server sends (a Pod object is kilobytes; its usage is a few integers).
NOT_KEPT = frozenset({"nodes", "pods", "podgroups", "volcanopodgroups"})


def _kept(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What of ``obj`` the state builder reads: nothing, its name and labels, or all of it."""
    if kind in NOT_KEPT:
        return None
    if kind == "namespaces":
        meta = obj.get("metadata") or {}
        slim = {"name": meta.get("name"), "labels": meta.get("labels") or {}}
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": slim}
    return obj


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class Mirror:
    """Parsed objects per kind; the single writer of the published state."""

    def __init__(
        self,
        holder: StateHolder,
        kinds: Sequence[str],
        debounce: float = 0.2,
        engine: Engine | None = None,
    ) -> None:
        self.holder = holder
        self.engine = engine
        self.watched = frozenset(kinds)
        self.debounce = debounce
        self.raw: dict[str, dict[str, Mapping[str, Any]]] = {k: {} for k in kinds}
        self.nodes: dict[str, tuple[str, Node]] = {}  # name -> (resourceVersion, node without usage)
        self.usage: dict[str, tuple[str, dict[str, int]]] = {}  # pod key -> (node, requests)
        self.synced: dict[str, float] = {}  # kind -> monotonic time it was last known current
        self.open: dict[str, float] = {}  # kind -> monotonic time its watch (re)connected
        self.absent: set[str] = set()
        self.dirty = asyncio.Event()
        self.generation = 0

    def replace(self, kind: str, items: Sequence[Mapping[str, Any]]) -> None:
        """A fresh list: everything not in it is gone (synthesised deletions)."""
        self.raw[kind] = {_key(o): kept for o in items if (kept := _kept(kind, o)) is not None}
        if kind == "nodes":
            self.nodes = {}
            for o in items:
                self._node(o)
        elif kind == "pods":
            self.usage = {}
            for o in items:
                self._pod(o)
        self.absent.discard(kind)
        self.healthy(kind)
        self.dirty.set()

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        """One watch event. A Node update that changes nothing placement reads (a heartbeat, an
        image list, an annotation) or a Pod update that leaves its usage as it was costs a dict
        lookup and no rebuild."""
        key = _key(obj)
        if event == "DELETED":
            self.raw[kind].pop(key, None)
            if kind == "nodes":
                changed = self.nodes.pop(str((obj.get("metadata") or {}).get("name")), None) is not None
            elif kind == "pods":
                changed = self.usage.pop(key, None) is not None
            else:
                changed = True
        else:
            kept = _kept(kind, obj)
            if kept is not None:
                self.raw[kind][key] = kept
            if kind == "nodes":
                changed = self._node(obj)
            elif kind == "pods":
                changed = self._pod(obj)
            else:
                changed = True
        if changed:
            self.dirty.set()

    def mark_absent(self, kind: str) -> None:
        if kind not in self.absent:
            log.warning("%s are not served by the API server (CRD not installed?); retrying", kind)
        self.absent.add(kind)
        self.raw[kind] = {}
        self.connected(kind)  # known absent, re-checked periodically: current until a check fails
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
        """A new state from what the mirror holds now (on the caller's thread)."""
        return _assemble(self._inputs())

    def _inputs(self) -> _Inputs:
        """A consistent copy of what a build reads, taken on the event loop (shallow: cheap)."""
        self.generation += 1
        others = [o for objs in self.raw.values() for o in objs.values()]
        nodes = sorted((name, node) for name, (_, node) in self.nodes.items())
        return _Inputs(
            nodes, list(self.usage.values()), others, self.generation, self.engine, frozenset(self.absent)
        )

    async def publish_forever(self) -> None:
        """Rebuild after changes (debounced) and keep the holder's freshness current."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dirty.wait(), 1.0)
            fresh = self.freshness()
            if self.dirty.is_set() and self.ready:
                await asyncio.sleep(self.debounce)
                self.dirty.clear()
                try:
                    # Built off the loop, with every TAS flavor's snapshot ready: reviews never
                    # wait for a rebuild nor build a snapshot themselves.
                    self.holder.publish(await asyncio.to_thread(_assemble, self._inputs(), True))
                except InvalidObject as exc:
                    log.error("cluster state not rebuilt: %s", exc)
            if fresh is not None:
                self.holder.touch(fresh)

    def _node(self, obj: Mapping[str, Any]) -> bool:
        """Parse and keep a node; whether anything placement reads of it changed."""
        meta = obj.get("metadata") or {}
        name, version = str(meta.get("name")), str(meta.get("resourceVersion", ""))
        cached = self.nodes.get(name)
        if cached is not None and cached[0] == version and version:
            return False
        try:
            parsed = parse_node(obj, {})
        except InvalidObject as exc:
            log.error("node %s ignored: %s", name, exc)
            return self.nodes.pop(name, None) is not None
        self.nodes[name] = (version, parsed)
        return cached is None or cached[1] != parsed

    def _pod(self, obj: Mapping[str, Any]) -> bool:
        """Keep a pod's usage; whether it changed (a status update of a running pod does not)."""
        key = _key(obj)
        try:
            found = pod_usage(obj)
        except InvalidObject as exc:
            log.error("pod %s ignored: %s", key, exc)
            found = None
        before = self.usage.get(key)
        if found is None:
            self.usage.pop(key, None)
        else:
            self.usage[key] = found
        return before != found
