"""Which admitted Workloads' usage a snapshot sees, and that usage taken from (or given back to)
its free capacity through a ledger, never by a rebuild; and the per-node usage a live state
holds (`NodeUsage`), shared in shards between generations."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar, overload

from scorer import Cluster
from scorer.ledger import FreeLedger
from scorer.model import HOSTNAME_LABEL
from webhook.state.kueue import Flavor, Topology
from webhook.state.workloads import AssignedUse, Scope


def snapshot_scope(
    flavors: Mapping[str, Flavor],
    topologies: Mapping[str, Topology],
    key: tuple[object, ...],
    overlapping: bool = True,
) -> Scope:
    """Which assigned usage the snapshot ``key`` (as `ClusterState.snapshots` keys them) sees;
    ``overlapping``: Kueue's ``TASHandleOverlappingFlavors``."""
    levels_of = {
        name: topology.levels
        for name, flavor in flavors.items()
        if (topology := topologies.get(flavor.topology_name or "")) is not None and topology.levels
    }
    hostname = frozenset(name for name, levels in levels_of.items() if levels[-1] == HOSTNAME_LABEL)
    kind, name, levels = key[0], key[1], key[2]
    flavor = str(name) if kind == "flavor" else None
    levels = tuple(levels) if isinstance(levels, tuple) else ()
    return Scope(flavor, levels, frozenset(levels_of), hostname, overlapping)


def moved(cluster: Cluster, uses: Iterable[AssignedUse], scope: Scope, generation: int, sign: int) -> Cluster:
    """``cluster`` with the ``uses`` its scope sees taken (``sign`` 1) or given back (-1); the
    same cluster when it sees none of them."""
    ledger = FreeLedger(cluster)
    for use in uses:
        if scope.sees(use):
            ledger.add_domain(use.values, use.requests, sign)
    return ledger.publish(generation)


# Published per-node usage is split in this many dicts by the name's hash: a publish shares the
# shards no event touched since the last one. One dict of 50,000 entries copied per publish cost
# the loop 2-5 ms (every key and value touched), and as much again to free it.
SHARDS = 1024
_MASK = SHARDS - 1
_T = TypeVar("_T")
Requests = Mapping[str, int]


class NodeUsage(Mapping[str, Requests]):
    """Requests in use per node name as one state holds them: immutable, equal to the dict of
    the same entries, its shards shared with the generations before and after it."""

    __slots__ = ("_len", "_shards")

    def __init__(self, shards: tuple[dict[str, Requests], ...], length: int) -> None:
        self._shards, self._len = shards, length

    def __getitem__(self, name: str) -> Requests:
        return self._shards[hash(name) & _MASK][name]

    @overload
    def get(self, name: str, /) -> Requests | None: ...
    @overload
    def get(self, name: str, default: Requests | _T, /) -> Requests | _T: ...
    def get(self, name: str, default: object = None, /) -> object:
        """Without the exception `Mapping.get` raises inside for every node using nothing."""
        return self._shards[hash(name) & _MASK].get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._shards[hash(name) & _MASK]

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(self._shards)

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"NodeUsage({dict(self)!r})"


class UsageShards:
    """The writer's per-node usage, copy-on-write by shard: a shard in a published `NodeUsage`
    is copied before its first change after that publish, so each publish costs the shards
    changed since the last one, never the cluster."""

    def __init__(self, totals: Mapping[str, Requests] = {}) -> None:
        self._shards: list[dict[str, Requests]] = [{} for _ in range(SHARDS)]
        for name, requests in totals.items():
            self._shards[hash(name) & _MASK][name] = requests
        self._len = len(totals)
        self._owned = bytearray([1]) * SHARDS  # 1: in no published NodeUsage yet
        self._touched: list[int] = list(range(SHARDS))

    def get(self, name: str) -> Requests | None:
        return self._shards[hash(name) & _MASK].get(name)

    def set(self, name: str, requests: Requests | None) -> None:
        """``name`` now uses ``requests`` (None or empty: nothing)."""
        i = hash(name) & _MASK
        if not self._owned[i]:
            self._shards[i] = dict(self._shards[i])
            self._owned[i] = 1
            self._touched.append(i)
        shard = self._shards[i]
        before = len(shard)
        if requests:
            shard[name] = requests
        else:
            shard.pop(name, None)
        self._len += len(shard) - before

    def publish(self) -> NodeUsage:
        """The usage now, as a state holds it; later changes copy the shards they touch."""
        for i in self._touched:
            self._owned[i] = 0
        self._touched = []
        return NodeUsage(tuple(self._shards), self._len)
