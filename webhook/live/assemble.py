"""What the writer hands a worker thread, and the state the thread makes of it.

Two kinds of work leave the event loop: a rebuild (`Inputs`: every object folded into a new
state and its snapshots built) after a relist or a change of Kueue objects, namespaces and the
like; and a node edit (`NodeEdit`: the last published state with a few nodes replaced, each kept
snapshot edited in place, `state.node_events`) after node events. Both read only what was
copied on the loop, so the loop keeps applying events meanwhile (journaled by `UsageBook`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scorer import Cluster, Engine
from scorer.model import Node
from webhook.live.rejections import Rejections
from webhook.live.usage import Assigned, SnapshotKey, UsageBook
from webhook.state.cluster import ClusterState, build_state
from webhook.state.node_events import with_node_changes
from webhook.state.quota_usage import QuotaCharge
from webhook.state.rejected import Rejected

DefaultLevels = Callable[[ClusterState], Iterable[tuple[str, tuple[str, ...]]]]


@dataclass(frozen=True)
class Inputs:
    """A consistent copy of everything a rebuild reads."""

    nodes: list[Node]
    usage: Mapping[str, Mapping[str, int]]
    assigned: Assigned
    others: list[Mapping[str, Any]]
    generation: int
    engine: Engine | None
    unserved: frozenset[str]
    rejected: tuple[Rejected, ...]  # nodes, pods and Workloads left out as their events came
    rejections: int  # the `Rejections.version` of ``rejected``
    charges: tuple[QuotaCharge, ...] = ()  # admitted Workloads' quota usage


@dataclass(frozen=True)
class NodeEdit:
    """The last published state and what node events changed since: what an edit reads."""

    state: ClusterState
    changed: Mapping[str, Node | None]  # node name -> the node now (None: gone or left out)
    clusters: Mapping[SnapshotKey, Cluster]  # the writer's snapshots (trees of ``state``)
    frees: Mapping[SnapshotKey, array[int]]  # their free capacity now (copies)
    usage: Mapping[str, Mapping[str, int]]
    assigned: Assigned
    charges: tuple[QuotaCharge, ...]
    rejected: tuple[Rejected, ...]
    rejections: int
    generation: int


def node_edit(
    state: ClusterState,
    changed: Mapping[str, Node | None],
    usage: UsageBook,
    rejections: Rejections,
    generation: int,
) -> NodeEdit:
    """What an edit of ``state`` reads: the changed nodes, the kept snapshots with their free
    capacity now, usage (events from now on journaled), copied on the loop."""
    ledgers = usage.ledgers
    totals, assigned = usage.begin_rebuild()
    return NodeEdit(
        state, changed, {key: ledger.base for key, ledger in ledgers.items()},
        {key: array("q", ledger.free) for key, ledger in ledgers.items()}, totals, assigned,
        usage.charged, rejections.merged(state.rejected), rejections.version, generation,
    )  # fmt: skip


def assemble(inputs: Inputs | NodeEdit, defaults: DefaultLevels | None = None) -> ClusterState:
    """The next state: folded from the objects (with ``defaults``, its snapshots and theirs
    built too), or the last one with its nodes edited. The collector runs as it does anywhere:
    the writer freezes what a build made once it is published (``live.heap``)."""
    if isinstance(inputs, NodeEdit):
        return _edit(inputs)
    return _fold(inputs, defaults)


def _edit(inputs: NodeEdit) -> ClusterState:
    return with_node_changes(
        inputs.state, inputs.changed, clusters=inputs.clusters, frees=inputs.frees, usage=inputs.usage,
        assigned=inputs.assigned, charges=inputs.charges, rejected=inputs.rejected,
        generation=inputs.generation,
    )  # fmt: skip


def _fold(inputs: Inputs, defaults: DefaultLevels | None) -> ClusterState:
    nodes = sorted(inputs.nodes, key=lambda node: node.name)
    state = build_state(
        inputs.others,
        inputs.generation,
        inputs.engine,
        nodes,
        inputs.unserved,
        inputs.usage,
        inputs.assigned,
        inputs.rejected,
        inputs.charges,
    )
    return state if defaults is None else state.prepare(defaults(state))
