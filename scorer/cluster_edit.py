"""A `Cluster` after node events, edited in place of a rebuild (`scorer.tree_edit`).

Each view is edited on its own terms: ``now`` holds the Ready, uncordoned nodes with free
capacity after usage, ``never`` every matching node, empty, condition taints dropped. A node
that turns NotReady or is cordoned leaves ``now`` (its leaf removed, as Kueue's snapshot leaves
it out) and stays in ``never``. ``never`` shares ``now``'s tree while no node is away and no
condition taint is set, and gets its own (edited from ``now``'s) the moment one is.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Mapping, Sequence

from scorer.cluster import Cluster
from scorer.model import Node
from scorer.snapshot import View
from scorer.tree import matches_flavor
from scorer.tree_edit import Change, Requests, edit_tree


def edit_cluster(
    cluster: Cluster,
    changes: Sequence[Change],
    node_labels: Mapping[str, str],
    *,
    free: array[int],
    usage: Mapping[str, Mapping[str, int]] | None,
    assigned: Mapping[object, Sequence[Requests]],
    generation: int,
) -> Cluster | None:
    """``cluster`` after ``changes`` (each node before and after, None where absent), with
    ``free`` as its ``now`` free capacity before them; None where a rebuild is needed.

    ``cluster.nodes`` must be in name order (a live state's are). ``usage`` and ``assigned``
    (requests by leaf key the snapshot sees) recompute the changed leaves' free capacity.
    """
    levels = cluster.levels

    def matched(node: Node | None) -> Node | None:
        return node if node is not None and matches_flavor(node, node_labels, levels) else None

    mine = [(matched(b), matched(a)) for b, a in changes]
    mine = [(b, a) for b, a in mine if b is not None or a is not None]
    if not mine:
        return cluster.with_free(free, generation) if free is not cluster.now.free else cluster
    nodes = edit_nodes(cluster.nodes, mine)
    if nodes is None:
        return None
    now = _edit_now(cluster, nodes, mine, free, usage, assigned)
    if now is None:
        return None
    away, conditioned = cluster.away_counts()
    for before, after in mine:
        away += _away(after) - _away(before)
        conditioned += _conditioned(after) - _conditioned(before)
    if away == 0 and conditioned == 0:
        never = View(cluster.topology_name, now.tree, now.tree.capacity, now.flavor_tolerations, now.engine)
        never.label_cache = now.label_cache
    else:
        base = cluster.never
        edited = edit_tree(
            base.tree, base.free, mine, drop_condition_taints=True, with_usage=False, usage=None,
            assigned={}, view_nodes=lambda: nodes,
        )  # fmt: skip
        if edited is None:
            return None
        never = View(cluster.topology_name, *edited, now.flavor_tolerations, now.engine)
    return cluster.edited(nodes, now, never, generation, (away, conditioned))


def _edit_now(
    cluster: Cluster,
    nodes: tuple[Node, ...],
    mine: Sequence[Change],
    free: array[int],
    usage: Mapping[str, Mapping[str, int]] | None,
    assigned: Mapping[object, Sequence[Requests]],
) -> View | None:
    now = cluster.now
    changes = [(_ready(b), _ready(a)) for b, a in mine]
    changes = [(b, a) for b, a in changes if b is not None or a is not None]
    if not changes:
        return View(now.topology_name, now.tree, free, now.flavor_tolerations, now.engine, now.label_cache)
    edited = edit_tree(
        now.tree, free, changes, drop_condition_taints=False, with_usage=True, usage=usage,
        assigned=assigned, view_nodes=lambda: _schedulable(nodes),
    )  # fmt: skip
    if edited is None:
        return None
    return View(now.topology_name, *edited, now.flavor_tolerations, now.engine)


def _schedulable(nodes: Iterable[Node]) -> Iterable[Node]:
    return (n for n in nodes if n.schedulable_now)


def _ready(node: Node | None) -> Node | None:
    return node if node is not None and node.schedulable_now else None


def _away(node: Node | None) -> int:
    return int(node is not None and not node.schedulable_now)


def _conditioned(node: Node | None) -> int:
    return int(node is not None and any(t.is_condition for t in node.taints))


def edit_nodes(nodes: tuple[Node, ...], changes: Sequence[Change]) -> tuple[Node, ...] | None:
    """The node tuple (in name order) with each change's node replaced, added or removed; None
    when it is not in name order where a change lands."""
    out = list(nodes)
    for before, after in changes:
        name = (before or after).name  # type: ignore[union-attr]
        i = bisect.bisect_left(out, name, key=_name)
        present = i < len(out) and out[i].name == name
        if present != (before is not None):
            return None
        if after is None:
            del out[i]
        elif present:
            out[i] = after
        else:
            out.insert(i, after)
    return tuple(out)


def _name(node: Node) -> str:
    return node.name
