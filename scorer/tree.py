"""The topology tree of one flavor as flat arrays, the shape both placement engines read.

Domains of every level live in one index space, level by level, each level sorted by its
level-value path; that order *is* Kueue's `levelValues` tie-break, so engines compare
indexes instead of strings. Children of a domain are contiguous. Leaves are the last level.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from scorer.leaf_index import LeafIndex
from scorer.model import HOSTNAME_LABEL, SCHEDULING_EFFECTS, Node, Taint


@dataclass(frozen=True, slots=True)
class Tree:
    """Static structure and capacity of a topology; never mutated once built."""

    levels: tuple[str, ...]
    hostname_leaves: bool
    level_offsets: array[int]  # int32, len(levels) + 1
    parent: array[int]  # int32 per domain, -1 for roots
    child_start: array[int]  # int32 per domain (leaves: start == end)
    child_end: array[int]
    id_rank: array[int]  # int32: rank of Kueue's DomainID string within its level
    paths: tuple[tuple[str, ...], ...]  # level values per domain
    resources: tuple[str, ...]  # sorted resource names of the capacity columns
    capacity: array[int]  # int64, leaves x resources (row-major)
    taint_class: array[int]  # int32 per leaf: index into taint_classes
    taint_classes: tuple[tuple[Taint, ...], ...]
    leaf_nodes: tuple[Node, ...]  # the node of each leaf when leaves are hosts, else ()
    leaf_of_node: Mapping[str, int]  # every node's leaf: where its pods' usage is counted
    # What edits and ledgers derive from the tree once (`scorer.tree_edit`); never compared.
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_leaves(self) -> int:
        return len(self.taint_class)

    @property
    def leaf_offset(self) -> int:
        return self.level_offsets[-2]

    def leaf_path(self, leaf: int) -> tuple[str, ...]:
        return self.paths[self.leaf_offset + leaf]

    def leaf_range(self, domain: tuple[str, ...]) -> range:
        """The leaves under a domain (given by its level values): contiguous, since children are."""
        depth = len(domain)
        if not 1 <= depth <= len(self.levels):
            return range(0)
        offsets = self.level_offsets
        try:
            first = last = self.paths.index(domain, offsets[depth - 1], offsets[depth])
        except ValueError:
            return range(0)
        for _ in range(depth, len(self.levels)):
            first, last = self.child_start[first], self.child_end[last] - 1
        return range(first - self.leaf_offset, last - self.leaf_offset + 1)

    def resource_column(self, name: str) -> int:
        """Column of a resource, or -1 when no node of this topology has it."""
        try:
            return self.resources.index(name)
        except ValueError:
            return -1


def matches_flavor(node: Node, node_labels: Mapping[str, str], levels: Sequence[str]) -> bool:
    """utiltas.NodeMatchesFlavor: every flavor label pair and every level label present."""
    labels = node.labels
    if any(labels.get(k) != v for k, v in node_labels.items()):
        return False
    return all(level in labels for level in levels)


def build_tree(
    levels: Sequence[str],
    nodes: Iterable[Node],
    *,
    drop_condition_taints: bool,
    with_usage: bool,
    usage: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[Tree, array[int]]:
    """Build the tree of the given nodes and the free capacity of its leaves.

    One node at a time, in Python: the definition `scorer._build` (the compiled build every
    `scorer.Cluster` uses when built) is held to, through `scorer._reference_build`.

    Returns ``(tree, free)``; ``free`` is capacity minus usage when ``with_usage``: each node's
    entry in ``usage`` when that is given (the live writer keeps usage apart from nodes), else
    the node's own.
    """
    levels = tuple(levels)
    hostname_leaves = levels[-1] == HOSTNAME_LABEL
    leaves = _group_leaves(levels, nodes, hostname_leaves)
    keys = sorted(leaves, key=lambda k: leaves[k][0])
    resources = tuple(sorted({r for k in keys for n in leaves[k][1] for r in n.allocatable}))
    structure = _structure(levels, [leaves[k][0] for k in keys], hostname_leaves)
    capacity, free = _capacities([leaves[k][1] for k in keys], resources, with_usage, usage)
    leaf_nodes = tuple(leaves[k][1][0] for k in keys) if hostname_leaves else ()
    taint_class, classes = _taint_classes(leaf_nodes, len(keys), drop_condition_taints)
    tree = Tree(
        levels=levels,
        hostname_leaves=hostname_leaves,
        level_offsets=structure.level_offsets,
        parent=structure.parent,
        child_start=structure.child_start,
        child_end=structure.child_end,
        id_rank=structure.id_rank,
        paths=structure.paths,
        resources=resources,
        capacity=capacity,
        taint_class=taint_class,
        taint_classes=classes,
        leaf_nodes=leaf_nodes,
        leaf_of_node=LeafIndex(
            {n.name: leaves[k][0] for k in keys for n in leaves[k][1]},
            structure.paths,
            structure.level_offsets[-2],
        ),
    )
    tree.memo["ids"] = structure.ids
    return tree, free


def _group_leaves(
    levels: tuple[str, ...], nodes: Iterable[Node], hostname_leaves: bool
) -> dict[object, tuple[tuple[str, ...], list[Node]]]:
    # With hostname as the lowest level Kueue keys a leaf by hostname alone (first path wins).
    leaves: dict[object, tuple[tuple[str, ...], list[Node]]] = {}
    values = operator.itemgetter(*levels)  # one C call per node: builds run on 50,000 nodes
    for node in nodes:
        found = values(node.labels)
        path: tuple[str, ...] = found if len(levels) > 1 else (found,)
        key: object = path[-1] if hostname_leaves else path
        entry = leaves.get(key)
        if entry is None:
            leaves[key] = (path, [node])
        else:
            entry[1].append(node)
    return leaves


class _Structure(NamedTuple):
    level_offsets: array[int]
    parent: array[int]
    child_start: array[int]
    child_end: array[int]
    id_rank: array[int]
    paths: tuple[tuple[str, ...], ...]
    ids: list[list[str]]  # each level's DomainIDs in rank order


def _structure(
    levels: tuple[str, ...], leaf_paths: list[tuple[str, ...]], hostname_leaves: bool
) -> _Structure:
    n_levels = len(levels)
    per_level: list[list[tuple[str, ...]]] = []
    for depth in range(1, n_levels):
        prefixes = sorted({p[:depth] for p in leaf_paths})
        per_level.append(prefixes)
    per_level.append(list(leaf_paths))
    offsets = [0]
    for domains in per_level:
        offsets.append(offsets[-1] + len(domains))
    index = {
        (lvl, path): offsets[lvl] + i
        for lvl, domains in enumerate(per_level)
        for i, path in enumerate(domains)
    }
    total = offsets[-1]
    parent = array("i", [-1]) * total
    child_start = array("i", [0]) * total
    child_end = array("i", [0]) * total
    for lvl in range(1, n_levels):
        for i, path in enumerate(per_level[lvl]):
            d = offsets[lvl] + i
            p = index[(lvl - 1, path[:-1])]
            parent[d] = p
            if child_end[p] == 0:
                child_start[p] = d
            child_end[p] = d + 1
    paths = tuple(path for domains in per_level for path in domains)
    ranks, ids = _id_ranks(per_level, hostname_leaves)
    return _Structure(array("i", offsets), parent, child_start, child_end, ranks, paths, ids)


def _id_ranks(
    per_level: list[list[tuple[str, ...]]], hostname_leaves: bool
) -> tuple[array[int], list[list[str]]]:
    """Kueue's DomainID is the comma-joined path (only the hostname for host leaves): each
    domain's rank among its level's IDs, and each level's IDs in rank order (for edits)."""
    ranks, in_order = array("i"), []
    last = len(per_level) - 1
    for lvl, domains in enumerate(per_level):
        ids = [p[-1] if (hostname_leaves and lvl == last) else ",".join(p) for p in domains]
        order = sorted(range(len(ids)), key=ids.__getitem__)
        rank = [0] * len(ids)
        for r, i in enumerate(order):
            rank[i] = r
        ranks.extend(rank)
        in_order.append([ids[i] for i in order])
    return ranks, in_order


INT64_MAX = 2**63 - 1


def leaf_row(
    nodes: list[Node],
    resources: tuple[str, ...],
    with_usage: bool,
    usage: Mapping[str, Mapping[str, int]] | None,
) -> tuple[array[int], array[int]]:
    """Capacity and free capacity of one leaf of ``nodes``, exactly as a build computes them."""
    return _capacities([nodes], resources, with_usage, usage)


def _capacities(
    leaf_nodes: list[list[Node]],
    resources: tuple[str, ...],
    with_usage: bool,
    usage: Mapping[str, Mapping[str, int]] | None,
) -> tuple[array[int], array[int]]:
    caps: list[int] = []
    frees: list[int] = []
    for nodes in leaf_nodes:
        if len(nodes) == 1:  # the usual leaf: one node, no sums
            node = nodes[0]
            have = [node.allocatable.get(r, 0) for r in resources]
            used = node.usage if usage is None else usage.get(node.name, _NONE)
        else:
            # Saturated at int64: a leaf of many nodes may sum past it, and an array of int64
            # must still hold it (past 2^63 units a leaf holds everything anyone can request).
            have = [min(sum(n.allocatable.get(r, 0) for n in nodes), INT64_MAX) for r in resources]
            each = [n.usage if usage is None else usage.get(n.name, _NONE) for n in nodes]
            used = {r: min(sum(u.get(r, 0) for u in each), INT64_MAX) for r in resources}
        caps.extend(have)
        frees.extend(
            [c - used.get(r, 0) for c, r in zip(have, resources, strict=True)] if with_usage else have
        )
    return array("q", caps), array("q", frees)


_NONE: Mapping[str, int] = {}


def _taint_classes(
    leaf_nodes: tuple[Node, ...], n_leaves: int, drop_condition_taints: bool
) -> tuple[array[int], tuple[tuple[Taint, ...], ...]]:
    """Group host leaves by their scheduling taints: few distinct sets in a real cluster."""
    if not leaf_nodes:
        return array("i", [0]) * n_leaves, ((),)
    classes: dict[tuple[Taint, ...], int] = {}
    ids = array("i")
    for node in leaf_nodes:
        ids.append(classes.setdefault(scheduling_taints(node, drop_condition_taints), len(classes)))
    return ids, tuple(classes)


def scheduling_taints(node: Node, drop_condition_taints: bool) -> tuple[Taint, ...]:
    """The taints of a host leaf that can keep a pod off it (its taint class)."""
    return tuple(
        t
        for t in node.taints
        if t.effect in SCHEDULING_EFFECTS and not (drop_condition_taints and t.is_condition)
    )
