"""A writer's running account of one snapshot's free capacity, kept current per pod event.

Pods start and finish all the time while nodes rarely change: the trees of a `Cluster` are
built once per node-set change, and a pod event only moves the free capacity of its node's
leaf, O(resources), instead of a rebuild of the cluster. An admitted Workload's assignment
names leaf domains, not nodes (`add_domain`): the hostname when the lowest level is the
hostname, else the values of every level. `publish` hands out a copy, so a published `Cluster`
never changes under a decision that is reading it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from scorer.cluster import Cluster
from scorer.tree import Tree


class FreeLedger:
    """The ``now`` free capacity of one `Cluster`, updated in place by the writer only."""

    __slots__ = ("_column", "_leaf_of", "_width", "base", "changed", "free")

    def __init__(self, base: Cluster, free: array[int] | None = None) -> None:
        """``free``, when given, is a private copy of ``base.now.free`` the ledger takes over
        (made off the event loop by its caller); else the ledger copies it."""
        tree = base.now.tree
        self.base = base
        self.free = array("q", base.now.free) if free is None else free
        self.changed = False
        self._width = len(tree.resources)
        self._leaf_of = tree.leaf_of_node
        self._column = {name: col for col, name in enumerate(tree.resources)}

    def add(self, node: str, requests: Iterable[tuple[str, int]], sign: int) -> None:
        """``sign`` +1: a pod with ``requests`` (resource, amount pairs) now uses ``node``; -1:
        it no longer does.

        Nodes outside the view (not selected, cordoned, NotReady) and resources no node of it
        has are no part of its free capacity, as in a fresh build.
        """
        leaf = self._leaf_of.get(node)
        if leaf is not None:
            self._move(leaf, requests, sign)

    def add_domain(self, values: tuple[str, ...], requests: Iterable[tuple[str, int]], sign: int) -> None:
        """As `add`, for a leaf domain named by its level values, as Kueue keys its leaves: by
        the last value (the hostname) when the lowest level is the hostname, else by all of them.

        A domain the view does not hold (its nodes gone, NotReady, not selected) is skipped, as
        Kueue skips it.
        """
        tree = self.base.now.tree
        key: object = values[-1] if tree.hostname_leaves else tuple(values)
        leaf = leaf_of_domain(tree).get(key)
        if leaf is not None:
            self._move(leaf, requests, sign)

    def _move(self, leaf: int, requests: Iterable[tuple[str, int]], sign: int) -> None:
        base = leaf * self._width
        column = self._column
        free = self.free
        for name, amount in requests:
            col = column.get(name)
            if col is not None:
                free[base + col] -= sign * amount
        self.changed = True

    def publish(self, generation: int) -> Cluster:
        """A `Cluster` sharing the base's trees, with a copy of the current free capacity."""
        if self.changed:
            self.base = self.base.with_free(array("q", self.free), generation)
            self.changed = False
        return self.base


def leaf_of_domain(tree: Tree) -> dict[object, int]:
    """Leaf index by Kueue's leaf key (hostname, or every level's value): built once per tree
    (on its first Workload event), shared by every ledger and generation of it."""
    found = tree.memo.get("domains")
    if isinstance(found, dict):
        return found
    paths = (tree.leaf_path(leaf) for leaf in range(tree.n_leaves))
    keyed = (p[-1] for p in paths) if tree.hostname_leaves else paths
    index: dict[object, int] = {key: leaf for leaf, key in enumerate(keyed)}
    tree.memo["domains"] = index
    return index
