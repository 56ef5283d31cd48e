"""The snapshot build's contract in plain Python: the twin `scorer._build` is held to.

`select` keeps the nodes a flavor selects; `build_views` builds both views of them (`now`:
Ready, uncordoned nodes, free capacity after usage; `never`: every node, empty, condition taints
dropped) with `scorer.tree.build_tree`, one node at a time. The compiled module gives the same
`Built` field for field from one pass over the nodes (the differential tests hold the two to
that), and hands here whatever input its fast path cannot hold exactly, so this module is what
an answer (or an error) *is*. It also runs where the extension is not built.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from scorer.model import Node
from scorer.tree import Tree, build_tree, matches_flavor


class Built(NamedTuple):
    """Both views' trees and free capacity; ``never`` is None when it would equal ``now``'s
    structure (no node away from ``now``, none with a condition taint): the usual case."""

    now: tuple[Tree, array[int]]
    never: tuple[Tree, array[int]] | None
    away: tuple[int, int]  # (nodes away from now, nodes with a condition taint)


def select(nodes: Sequence[Node], node_labels: Mapping[str, str], levels: Sequence[str]) -> list[Node]:
    """The nodes the flavor selects that carry every level label (utiltas.NodeMatchesFlavor)."""
    return [n for n in nodes if matches_flavor(n, node_labels, levels)]


def build_views(
    levels: Sequence[str], nodes: Sequence[Node], usage: Mapping[str, Mapping[str, int]] | None
) -> Built:
    """The two views of ``nodes`` (``usage``, node name to requests, in place of each node's own
    when given)."""
    schedulable = [n for n in nodes if n.schedulable_now]
    conditioned = sum(1 for n in nodes if n.taints and any(t.is_condition for t in n.taints))
    away = (len(nodes) - len(schedulable), conditioned)
    now = build_tree(levels, schedulable, drop_condition_taints=False, with_usage=True, usage=usage)
    if away == (0, 0):
        return Built(now, None, away)
    # Schedulable nodes first: where nodes share a hostname, the leaf takes the first one's
    # path, and it must be the path "now" sees, or "never" could be tighter than "now".
    ordered = sorted(nodes, key=lambda n: not n.schedulable_now)
    never = build_tree(levels, ordered, drop_condition_taints=True, with_usage=False)
    return Built(now, never, away)
