"""A built topology tree edited node by node: what a node event does to a `Tree`.

A node that joins, leaves, moves to another domain or changes capacity, taints, readiness or
cordon touches a few leaves of a tree of tens of thousands, and rebuilding the tree (sorting
every path, ranking every ID) is what made a node event cost 0.4 s at 50,000 nodes. `edit_tree`
rewrites those leaves in place of a rebuild, inserting or removing them (and the domains above
them that appear or empty) in the flat arrays and shifting the indexes after them: C-speed
copies and at most one pass over a level per inserted or removed domain. The result equals
`build_tree` of the new node set field for field (the differential tests hold it to that).

It answers None where an edit cannot be made in place, and the caller rebuilds: a resource
column appears or disappears (every row's width changes), or a hostname is shared by two nodes
(Kueue keeps the first node's path, and which is first depends on the order of the whole set).
"""

from __future__ import annotations

import bisect
import operator
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence

from scorer.leaf_index import LeafIndex
from scorer.model import Node, Taint
from scorer.tree import Tree, leaf_row, scheduling_taints

Change = tuple[Node | None, Node | None]  # one node in the view before and after (None: not in it)
Requests = Iterable[tuple[str, int]]


def edit_tree(
    tree: Tree,
    free: array[int],
    changes: Sequence[Change],
    *,
    drop_condition_taints: bool,
    with_usage: bool,
    usage: Mapping[str, Mapping[str, int]] | None,
    assigned: Mapping[object, Sequence[Requests]],
    view_nodes: Callable[[], Iterable[Node]],
) -> tuple[Tree, array[int]] | None:
    """The tree of the view after ``changes`` and its free capacity (``free`` with the changed
    leaves recomputed from ``usage`` and the ``assigned`` requests by leaf key), or None.

    ``view_nodes`` gives the view's nodes after the changes (read only for coarse leaves and
    to know whether a resource column is still held).
    """
    columns = set(tree.resources)
    if any(r not in columns for _, after in changes if after is not None for r in after.allocatable):
        return None
    if tree.hostname_leaves and len(tree.leaf_of_node) != tree.n_leaves:
        return None  # a hostname shared by several nodes somewhere: order decides its path
    work = _Work(tree, free, drop_condition_taints, with_usage, usage, assigned)
    done = work.hosts(changes) if tree.hostname_leaves else work.coarse(changes, view_nodes)
    if not done:
        return None
    lost = {r for before, _ in changes if before is not None for r in before.allocatable}
    nodes: Iterable[Node] = work.leaf_nodes if tree.hostname_leaves else view_nodes()
    if lost and not _all_held(lost, nodes):
        return None
    return work.freeze(changes), work.free


def _all_held(resources: set[str], nodes: Iterable[Node]) -> bool:
    """Whether some node still has each resource (a column nobody has would be dropped)."""
    missing = set(resources)
    for node in nodes:
        missing.difference_update(node.allocatable)
        if not missing:
            return True
    return not missing


def sorted_ids(tree: Tree) -> list[list[str]]:
    """Each level's Kueue DomainIDs in rank order (remembered on the tree for later edits)."""
    found = tree.memo.get("ids")
    if isinstance(found, list):
        return found
    out: list[list[str]] = []
    offsets, last = tree.level_offsets, len(tree.levels) - 1
    for level in range(len(tree.levels)):
        lo, hi = offsets[level], offsets[level + 1]
        ids = [""] * (hi - lo)
        for d in range(lo, hi):
            ids[tree.id_rank[d]] = _domain_id(tree.paths[d], tree.hostname_leaves and level == last)
        out.append(ids)
    tree.memo["ids"] = out
    return out


def _shift_from(values: array[int], lo: int, hi: int, at: int, delta: int) -> None:
    """Add ``delta`` to each of ``values[lo:hi]`` that is at least ``at`` (the compiled
    `scorer._core.shift_from`'s pure twin)."""
    for i in range(lo, hi):
        if values[i] >= at:
            values[i] += delta


try:
    from scorer._core import shift_from
except ImportError:  # not built: the twin gives the same arrays
    shift_from = _shift_from


def _domain_id(path: tuple[str, ...], host: bool) -> str:
    return path[-1] if host else ",".join(path)


class _Work:
    """Mutable copies of a tree's arrays, edited domain by domain and frozen into a new tree."""

    def __init__(
        self,
        tree: Tree,
        free: array[int],
        drop: bool,
        with_usage: bool,
        usage: Mapping[str, Mapping[str, int]] | None,
        assigned: Mapping[object, Sequence[Requests]],
    ) -> None:
        self.tree, self.drop, self.with_usage, self.usage, self.assigned = (
            tree,
            drop,
            with_usage,
            usage,
            assigned,
        )
        self.last = len(tree.levels) - 1
        self.width = len(tree.resources)
        self.column = {name: col for col, name in enumerate(tree.resources)}
        self.capacity, self.free = array("q", tree.capacity), array("q", free)
        self.taint_class = array("i", tree.taint_class)
        self.classes: dict[tuple[Taint, ...], int] = {t: i for i, t in enumerate(tree.taint_classes)}
        self.leaf_nodes = list(tree.leaf_nodes)
        self.values = operator.itemgetter(*tree.levels)
        # The structure is the tree's own (read only) until a domain is inserted or removed:
        # a node that only changed capacity, taints or readiness copies none of it.
        self.opened = False
        self.offsets: list[int] = list(tree.level_offsets)
        self.paths: Sequence[tuple[str, ...]] = tree.paths
        self.parent, self.start, self.end, self.rank = (
            tree.parent,
            tree.child_start,
            tree.child_end,
            tree.id_rank,
        )
        self.ids: list[list[str]] = []
        self.moved = False  # a leaf was inserted or removed: leaf indexes shifted
        self.reclassed = False  # a leaf's taint class changed: classes renumbered at the end

    def _open(self) -> tuple[list[tuple[str, ...]], array[int], array[int], array[int], array[int]]:
        """The structure as copies this edit may change (made on the first change)."""
        if not self.opened:
            self.opened = True
            tree = self.tree
            self.paths, self.parent = list(tree.paths), array("i", tree.parent)
            self.start, self.end = array("i", tree.child_start), array("i", tree.child_end)
            self.rank = array("i", tree.id_rank)
            self.ids = [list(level) for level in sorted_ids(tree)]
        return self.paths, self.parent, self.start, self.end, self.rank  # type: ignore[return-value]

    def path(self, node: Node) -> tuple[str, ...]:
        found = self.values(node.labels)
        return found if self.last > 0 else (found,)

    def find(self, level: int, path: tuple[str, ...]) -> int:
        lo, hi = self.offsets[level], self.offsets[level + 1]
        i = bisect.bisect_left(self.paths, path, lo, hi)
        return i if i < hi and self.paths[i] == path else -1

    def hosts(self, changes: Sequence[Change]) -> bool:
        """Host leaves, one node each: removals first, so a hostname handed on is not shared."""
        for before, after in changes:
            if before is not None and (after is None or self.path(after) != self.path(before)):
                g = self.find(self.last, self.path(before))
                if g < 0:
                    return False
                self.remove(self.last, g)
        for before, after in changes:
            if after is None:
                continue
            path = self.path(after)
            g = self.find(self.last, path) if before is not None and self.path(before) == path else -1
            if g < 0:
                if self._has_id(self.last, path[-1]):
                    return False
                g = self.insert_leaf(path)
            self.set_row(g - self.offsets[self.last], [after], path[-1])
        return True

    def coarse(self, changes: Sequence[Change], view_nodes: Callable[[], Iterable[Node]]) -> bool:
        """Leaves of many nodes: each touched leaf recomputed from the nodes it holds now."""
        touched = {self.path(n) for change in changes for n in change if n is not None}
        members: dict[tuple[str, ...], list[Node]] = {p: [] for p in touched}
        for node in view_nodes():
            found = members.get(self.path(node))
            if found is not None:
                found.append(node)
        for path in sorted(touched):
            g = self.find(self.last, path)
            if not members[path]:
                if g >= 0:
                    self.remove(self.last, g)
                continue
            if g < 0:
                g = self.insert_leaf(path)
            self.set_row(g - self.offsets[self.last], members[path], path)
        return True

    def _has_id(self, level: int, domain_id: str) -> bool:
        ids = self.ids[level] if self.opened else sorted_ids(self.tree)[level]
        i = bisect.bisect_left(ids, domain_id)
        return i < len(ids) and ids[i] == domain_id

    def insert_leaf(self, path: tuple[str, ...]) -> int:
        """Insert a leaf and whichever of its ancestors do not exist yet; its global index."""
        for level in range(self.last):
            if self.find(level, path[: level + 1]) < 0:
                self.insert(level, path[: level + 1])
        return self.insert(self.last, path)

    def insert(self, level: int, path: tuple[str, ...]) -> int:
        """Insert one domain (its parent exists) at its place in path order, shifting after it."""
        paths, parents, start, end, rank = self._open()
        lo, hi = self.offsets[level], self.offsets[level + 1]
        g = bisect.bisect_left(paths, path, lo, hi)
        parent = self.find(level - 1, path[:-1]) if level > 0 else -1
        kept = (start[parent], end[parent]) if parent >= 0 else (0, 0)
        upper = self.offsets[-2]  # the domains with children; of [s, e), i >= g moves to i + 1
        shift_from(start, 0, upper, g, 1)
        shift_from(end, 0, upper, g + 1, 1)
        if level < self.last:
            shift_from(parents, 0, len(parents), g, 1)
        domain_id = _domain_id(path, self.tree.hostname_leaves and level == self.last)
        r = bisect.bisect_left(self.ids[level], domain_id)
        self.ids[level].insert(r, domain_id)
        shift_from(rank, lo, hi, r, 1)
        paths.insert(g, path)
        for seq, value in ((parents, parent), (start, 0), (end, 0), (rank, r)):
            seq.insert(g, value)
        for k in range(level + 1, len(self.offsets)):
            self.offsets[k] += 1
        if parent >= 0:  # a parent made just now for this child has no range yet
            start[parent], end[parent] = (g, g + 1) if kept[0] == kept[1] else (kept[0], kept[1] + 1)
        if level == self.last:
            self._insert_row(g - lo)
        return g

    def _insert_row(self, leaf: int) -> None:
        at, zeros = leaf * self.width, array("q", [0]) * self.width
        self.capacity[at:at] = zeros
        self.free[at:at] = array("q", zeros)
        self.taint_class.insert(leaf, 0)
        if self.tree.hostname_leaves:
            self.leaf_nodes.insert(leaf, self.leaf_nodes[0] if self.leaf_nodes else _PLACEHOLDER)
        self.moved = True

    def remove(self, level: int, g: int) -> None:
        """Remove one domain, and its parent when that leaves it without children."""
        paths, parents, start, end, rank = self._open()
        lo = self.offsets[level]
        parent, r = parents[g], rank[g]
        for seq in (paths, parents, start, end, rank):
            del seq[g]
        for k in range(level + 1, len(self.offsets)):
            self.offsets[k] -= 1
        shift_from(start, 0, self.offsets[-2], g + 1, -1)
        shift_from(end, 0, self.offsets[-2], g + 1, -1)
        if level < self.last:
            shift_from(parents, 0, len(parents), g + 1, -1)
        shift_from(rank, lo, self.offsets[level + 1], r + 1, -1)
        del self.ids[level][r]
        if level == self.last:
            leaf = g - lo
            del self.capacity[leaf * self.width : (leaf + 1) * self.width]
            del self.free[leaf * self.width : (leaf + 1) * self.width]
            del self.taint_class[leaf]
            if self.tree.hostname_leaves:
                del self.leaf_nodes[leaf]
            self.moved = True
        if parent >= 0 and start[parent] == end[parent]:
            self.remove(level - 1, parent)

    def set_row(self, leaf: int, members: list[Node], key: object) -> None:
        """A leaf's capacity, free capacity and taint class, as a build computes them."""
        caps, frees = leaf_row(members, self.tree.resources, self.with_usage, self.usage)
        column = self.column
        for requests in self.assigned.get(key, ()):
            for name, amount in requests:
                col = column.get(name)
                if col is not None:
                    frees[col] -= amount
        at = leaf * self.width
        self.capacity[at : at + self.width] = caps
        self.free[at : at + self.width] = frees
        if self.tree.hostname_leaves:
            cls = self.classes.setdefault(scheduling_taints(members[0], self.drop), len(self.classes))
            if self.moved or cls != self.taint_class[leaf]:
                self.reclassed = True
            self.taint_class[leaf] = cls
            self.leaf_nodes[leaf] = members[0]

    def freeze(self, changes: Sequence[Change]) -> Tree:
        tree = self.tree
        taint_class, classes = self._canonical_classes()
        paths = self.paths = tuple(self.paths)
        edited = Tree(
            levels=tree.levels,
            hostname_leaves=tree.hostname_leaves,
            level_offsets=array("i", self.offsets) if self.opened else tree.level_offsets,
            parent=self.parent,
            child_start=self.start,
            child_end=self.end,
            id_rank=self.rank,
            paths=paths,
            resources=tree.resources,
            capacity=self.capacity,
            taint_class=taint_class,
            taint_classes=classes,
            leaf_nodes=tuple(self.leaf_nodes),
            leaf_of_node=self._leaf_of_node(changes),
        )
        ids = self.ids if self.opened else tree.memo.get("ids")
        if ids is not None:  # the old tree's lists are never changed: _open copies them
            edited.memo["ids"] = ids
        return edited

    def _canonical_classes(self) -> tuple[array[int], tuple[tuple[Taint, ...], ...]]:
        """Taint classes numbered by first use along the leaves, as a build numbers them."""
        if not self.tree.hostname_leaves or not self.taint_class:
            return array("i", [0]) * len(self.taint_class), ((),)
        by_index = list(self.classes)
        if not self.reclassed and not self.moved:
            return self.taint_class, tuple(by_index)
        order = list(dict.fromkeys(self.taint_class))
        if order == list(range(len(by_index))):
            return self.taint_class, tuple(by_index)
        renumber = {old: new for new, old in enumerate(order)}
        return array("i", [renumber[c] for c in self.taint_class]), tuple(by_index[c] for c in order)

    def _leaf_of_node(self, changes: Sequence[Change]) -> Mapping[str, int]:
        """Each node's leaf path: the changed nodes' own, the others' as they were."""
        before = self.tree.leaf_of_node
        if not self.moved and self.tree.hostname_leaves:
            return before  # the same names on the same leaves
        if not isinstance(before, LeafIndex):
            raise TypeError("a tree built by build_tree keeps a LeafIndex")
        path_of = dict(before.path_of)
        for b, _ in changes:
            if b is not None:
                del path_of[b.name]
        for _, a in changes:
            if a is not None:
                path_of[a.name] = self.path(a)
        return LeafIndex(path_of, self.paths, self.offsets[self.last])


_PLACEHOLDER = Node("", {}, {})
