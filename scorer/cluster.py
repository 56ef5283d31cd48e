"""One TAS flavor's nodes at one cluster-state generation, with its two views.

``now`` is Kueue's node set (Ready and uncordoned, free capacity after usage); ``never`` is
every matching node, empty, with condition taints dropped. The ``never`` view reuses the
``now`` structure whenever no node is away and no condition taint is set, which is usual.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence

from scorer.engines import default_engine
from scorer.model import Node, Placement, PodSetRequest, Toleration
from scorer.request import Engine
from scorer.snapshot import View, in_order, one_group
from scorer.tree import Tree

try:  # one read of the nodes into columns, the tree shape in C (scorer/_build.pyx)
    from scorer._build import build_views, select
except ImportError:  # not built: the twin gives the same trees
    from scorer._reference_build import build_views, select


class Cluster:
    """One TAS flavor's nodes at one cluster-state generation, with its two views."""

    __slots__ = (
        "_away",
        "_largest",
        "_never",
        "flavor_tolerations",
        "generation",
        "levels",
        "nodes",
        "now",
        "topology_name",
    )

    def __init__(
        self,
        topology_name: str,
        levels: Sequence[str],
        nodes: Sequence[Node],
        flavor_tolerations: Sequence[Toleration] = (),
        generation: int = 0,
        engine: Engine | None = None,
        usage: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        self.topology_name = topology_name
        self.levels = tuple(levels)
        self.nodes = tuple(nodes)
        self.flavor_tolerations = tuple(flavor_tolerations)
        self.generation = generation
        self._largest: Mapping[str, int] | None = None
        eng = engine or default_engine()
        built = build_views(self.levels, self.nodes, usage)
        self._away = built.away
        tree, free = built.now
        self.now = View(topology_name, tree, free, self.flavor_tolerations, eng)
        self._never = self._derive_never(tree, built.never, eng)

    def _derive_never(self, now_tree: Tree, never: tuple[Tree, array[int]] | None, engine: Engine) -> View:
        """Reuse the structure when no node is away and no condition taint is set: usually."""
        if never is None:
            return View(
                self.topology_name,
                now_tree,
                now_tree.capacity,
                self.flavor_tolerations,
                engine,
                self.now.label_cache,
            )
        return View(self.topology_name, *never, self.flavor_tolerations, engine)

    @property
    def never(self) -> View:
        return self._never

    def place_now_and_never(
        self, pod_sets: Sequence[PodSetRequest]
    ) -> tuple[tuple[Placement, ...], tuple[Placement, ...]]:
        """``(now.place(pod_sets), never.place(pod_sets))``. When the views share a tree (the
        usual case: no node away) and the PodSets form one group, one plan and request serve
        both and the engine places the pair in one call (`Engine.place_group_both`): with two
        decision threads the GIL changes hands once a decision, not twice (`make bench-threads`)."""
        now, never = self.now, self._never
        group = one_group(pod_sets)
        if group is None or not now.shares_plans_with(never):
            return now.place(pod_sets), never.place(pod_sets)
        prepared = now.prepare(group)
        if isinstance(prepared, list):
            return in_order(pod_sets, prepared), in_order(pod_sets, prepared)
        plan, request = prepared
        raw_now, raw_never = now.engine.place_group_both(now.tree, now.free, never.free, request)
        placed_now = now.finish(group, plan, request, raw_now, now.free, record=False)
        placed_never = never.finish(group, plan, request, raw_never, never.free, record=False)
        return in_order(pod_sets, placed_now), in_order(pod_sets, placed_never)

    def largest_allocatable(self) -> Mapping[str, int]:
        """The most of each resource any one node offers: what a pod larger than every node is
        told. Computed once per node set (a generation that only moved usage shares it)."""
        found = self._largest
        if found is None:
            largest: dict[str, int] = {}
            for node in self.nodes:
                for resource, amount in node.allocatable.items():
                    if amount > largest.get(resource, 0):
                        largest[resource] = amount
            found = self._largest = largest
        return found

    def away_counts(self) -> tuple[int, int]:
        """(nodes away from ``now``, nodes with a condition taint): while both are 0 the two
        views share one tree. Counted by the build, then kept by edits."""
        return self._away

    def edited(
        self, nodes: tuple[Node, ...], now: View, never: View, generation: int, away: tuple[int, int]
    ) -> Cluster:
        """This cluster's flavor over another node set, with views already made for it
        (`scorer.cluster_edit`)."""
        other = Cluster.__new__(Cluster)
        for slot in Cluster.__slots__:
            setattr(other, slot, getattr(self, slot))
        other.nodes, other.now, other._never, other.generation = nodes, now, never, generation
        other._largest, other._away = None, away
        return other

    def with_free(self, free: array[int], generation: int) -> Cluster:
        """The same nodes and trees with other free capacity in the ``now`` view: what a new
        generation is when only pods changed (the trees are shared, never copied)."""
        if len(free) != len(self.now.free):
            raise ValueError(f"free capacity has {len(free)} entries, the tree {len(self.now.free)}")
        other = Cluster.__new__(Cluster)
        for slot in Cluster.__slots__:
            setattr(other, slot, getattr(self, slot))
        other.generation = generation
        now = self.now
        other.now = View(
            now.topology_name, now.tree, free, now.flavor_tolerations, now.engine, now.label_cache
        )
        return other

    @classmethod
    def build(
        cls,
        topology_name: str,
        levels: Sequence[str],
        nodes: Sequence[Node],
        flavor_node_labels: Mapping[str, str] | None = None,
        flavor_tolerations: Sequence[Toleration] = (),
        generation: int = 0,
        engine: Engine | None = None,
        usage: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Cluster:
        """Keep the nodes the flavor selects and that carry every level label.

        ``usage`` (node name to requests in use), when given, is counted instead of each node's own.
        """
        matching = select(nodes, flavor_node_labels or {}, levels)
        return cls(topology_name, levels, matching, flavor_tolerations, generation, engine, usage)
