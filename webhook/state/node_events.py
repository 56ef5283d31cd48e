"""A live state after node events: its nodes replaced and every kept snapshot edited in place of
a rebuild (`scorer.cluster_edit`).

Only nodes changed: the Kueue objects, namespaces and the rest are the previous state's, so each
snapshot keeps its flavor, levels and scope, and a changed node's leaves are rewritten from the
writer's usage and the admitted Workloads' assignments the snapshot sees. A snapshot that
cannot be edited in place (a resource column appears or goes, a hostname shared by two nodes)
is rebuilt alone, the others are still edited.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import replace

from scorer import Cluster
from scorer.cluster_edit import edit_cluster, edit_nodes
from scorer.model import Node
from scorer.tree_edit import Requests
from webhook.state.cluster import ClusterState
from webhook.state.quota_usage import QuotaCharge
from webhook.state.rejected import Rejected
from webhook.state.workloads import AssignedUse

SnapshotKey = tuple[object, ...]


def with_node_changes(
    state: ClusterState,
    changed: Mapping[str, Node | None],
    *,
    clusters: Mapping[SnapshotKey, Cluster],
    frees: Mapping[SnapshotKey, array[int]],
    usage: Mapping[str, Mapping[str, int]],
    assigned: tuple[AssignedUse, ...],
    charges: tuple[QuotaCharge, ...],
    rejected: tuple[Rejected, ...],
    generation: int,
) -> ClusterState:
    """``state`` with the nodes named in ``changed`` as given there (None: gone), ``usage``,
    ``assigned`` and the rest as of now; ``clusters`` are its snapshots as the writer keeps
    them, with ``frees`` their current free capacity."""
    changes = [(c, new) for name, new in sorted(changed.items()) if (c := _current(state.nodes, name)) != new]
    nodes = edit_nodes(state.nodes, changes)
    if nodes is None:
        raise ValueError("the state's nodes are not in name order")
    after = replace(
        state, nodes=nodes, usage=usage, assigned=assigned, charges=charges, rejected=rejected,
        generation=generation, _snapshots={}, _lock=threading.Lock(), _origin=None,
    )  # fmt: skip
    for key, cluster in clusters.items():
        edited = edit_cluster(
            cluster, changes, _node_labels(state, key), free=frees[key], usage=usage,
            assigned=_assigned_by_leaf(after, key, cluster), generation=generation,
        )  # fmt: skip
        if edited is None:
            edited = _rebuilt(after, key)
        after._snapshots[key] = edited
    return after


def _current(nodes: Sequence[Node], name: str) -> Node | None:
    i = bisect.bisect_left(nodes, name, key=lambda n: n.name)
    return nodes[i] if i < len(nodes) and nodes[i].name == name else None


def _node_labels(state: ClusterState, key: SnapshotKey) -> Mapping[str, str]:
    return state.flavors[str(key[1])].node_labels if key[0] == "flavor" else {}


def _assigned_by_leaf(
    state: ClusterState, key: SnapshotKey, cluster: Cluster
) -> dict[object, list[Requests]]:
    """The assigned requests the snapshot sees, by leaf key (as `FreeLedger.add_domain` keys)."""
    scope, hostname = state.scope(key), cluster.now.tree.hostname_leaves
    found: dict[object, list[Requests]] = {}
    for use in state.assigned:
        if scope.sees(use):
            found.setdefault(use.values[-1] if hostname else tuple(use.values), []).append(use.requests)
    return found


def _rebuilt(state: ClusterState, key: SnapshotKey) -> Cluster:
    """The snapshot ``key`` built afresh on ``state`` (its flavor and topology are unchanged)."""
    kind, name, levels = key[0], str(key[1]), key[2]
    if kind == "flavor":
        flavor = state.flavors[name]
        return state.flavor_snapshot(flavor, state.topologies[flavor.topology_name or ""])
    return state.levels_snapshot(name, levels if isinstance(levels, tuple) else ())
