"""A view of one topology (a tree and its free capacity) and the workload-level placement loop.

A workload's PodSets are placed in order, each seeing the capacity the previous ones took, as
Kueue's ``FindTopologyAssignmentsForFlavor`` does; the engine places one group at a time and
this module turns its numbers into Kueue's words. `scorer.cluster.Cluster` holds the two views.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scorer import messages
from scorer.messages import Exclusion
from scorer.model import (
    PODS,
    Assignment,
    LevelCapacity,
    Placement,
    PodSetRequest,
    Toleration,
)
from scorer.nodes import affinity_matches, first_untolerated, selector_matches
from scorer.request import (
    EXCLUDED_AFFINITY,
    EXCLUDED_NONE,
    EXCLUDED_SELECTOR,
    STATUS_FAILED,
    STATUS_FIT,
    STATUS_NO_DOMAINS,
    STATUS_NOT_FIT,
    Engine,
    GroupRequest,
    RawResult,
)
from scorer.resolve import ResolvedLevels, resolve
from scorer.tree import Tree

LABEL_CACHE_SIZE = 256  # distinct selectors remembered per tree


@dataclass(frozen=True, slots=True)
class _Group:
    workers: PodSetRequest
    leader: PodSetRequest | None
    extra: tuple[PodSetRequest, ...]


class View:
    """One tree and its free capacity: the thing a workload is placed on."""

    __slots__ = ("_engine", "flavor_tolerations", "free", "label_cache", "topology_name", "tree")

    def __init__(
        self,
        topology_name: str,
        tree: Tree,
        free: array[int],
        flavor_tolerations: tuple[Toleration, ...],
        engine: Engine,
        label_cache: dict[object, array[int]] | None = None,
    ) -> None:
        self.topology_name = topology_name
        self.tree = tree
        self.free = free
        self.flavor_tolerations = flavor_tolerations
        self._engine = engine
        # Per-leaf nodeSelector/affinity exclusions by selector: node labels belong to the tree,
        # so views of one tree (every usage generation of it) share this.
        self.label_cache: dict[object, array[int]] = {} if label_cache is None else label_cache

    @property
    def engine(self) -> Engine:
        return self._engine

    def place(self, pod_sets: Sequence[PodSetRequest], engine: Engine | None = None) -> tuple[Placement, ...]:
        """Placements in input order; later groups see the capacity earlier ones took."""
        engine = engine or self._engine
        groups = _groups(pod_sets)
        # Only a later group needs the capacity an earlier one took: one group reads the
        # snapshot's own (never mutated) array, and the last group's usage is not recorded.
        free = self.free if len(groups) == 1 else array("q", self.free)
        found: dict[str, Placement] = {}
        for index, group in enumerate(groups):
            for placement in self._place_group(group, free, engine, record=index < len(groups) - 1):
                found[placement.name] = placement
        return tuple(found[p.name] for p in pod_sets)

    def _place_group(self, group: _Group, free: array[int], engine: Engine, record: bool) -> list[Placement]:
        members = [group.workers] + ([group.leader] if group.leader else [])
        extra = [
            _failed(p, f"podset group {p.topology.group!r} has more than two PodSets") for p in group.extra
        ]
        resolved = resolve(group.workers.topology, self.tree.levels)
        if isinstance(resolved, str):
            return [_failed(p, resolved) for p in members] + extra
        request, names = self._request(group, resolved)
        raw = engine.place_group(self.tree, free, request)
        levels = self._levels(raw, resolved.slice_size)
        if raw.status != STATUS_FIT:
            excluded = self._excluded(raw, group.workers, names) if raw.status == STATUS_NOT_FIT else ()
            reason = self._reason(raw, group.workers, resolved, excluded)
            total = group.workers.count // resolved.slice_size
            unit = "pod" if resolved.slice_size == 1 else "slice"
            anomaly = raw.status == STATUS_FAILED
            return [
                Placement(
                    p.name,
                    False,
                    None,
                    reason,
                    raw.fit_count,
                    total,
                    unit,
                    levels,
                    anomaly,
                    raw.total_nodes,
                    excluded,
                )
                for p in members
            ] + extra
        worker_assignment = self._assignment(raw.worker_leaves, raw.worker_counts)
        if record:
            self._consume(free, request.req_col, request.req_val, raw.worker_leaves, raw.worker_counts)
        out = [
            Placement(
                group.workers.name, True, worker_assignment, levels=levels, total_count=group.workers.count
            )
        ]
        if group.leader is not None:
            if record:
                self._consume(free, request.req_col, request.leader_val, raw.leader_leaves, raw.leader_counts)
            leader_assignment = self._assignment(raw.leader_leaves, raw.leader_counts)
            out.append(Placement(group.leader.name, True, leader_assignment, levels=levels, total_count=1))
        return out + extra

    def _request(self, group: _Group, resolved: ResolvedLevels) -> tuple[GroupRequest, list[str]]:
        workers, leader = group.workers, group.leader
        names = sorted({*workers.requests, *(leader.requests if leader else {}), PODS})
        tree = self.tree
        check_nodes = tree.hostname_leaves
        tolerations = (*workers.tolerations, *self.flavor_tolerations)
        class_excluded = array("b", [0]) * len(tree.taint_classes)
        if check_nodes:
            for cls, taints in enumerate(tree.taint_classes):
                class_excluded[cls] = first_untolerated(taints, tolerations) is not None
        layer_levels = array("i", [tree.levels.index(layer.level) for layer in resolved.layers])
        request = GroupRequest(
            req_col=array("i", [tree.resource_column(n) for n in names]),
            req_val=_values(workers.requests, names),
            leader_val=_values(leader.requests, names) if leader else array("q"),
            count=workers.count,
            slice_size=resolved.slice_size,
            requested_level=resolved.requested_level,
            slice_level=resolved.slice_level,
            inner_sizes=array("i", resolved.inner_sizes),
            required=resolved.required,
            unconstrained=resolved.unconstrained,
            layer_levels=layer_levels,
            layer_sizes=array("i", [layer.size for layer in resolved.layers]),
            check_nodes=check_nodes,
            class_excluded=class_excluded,
            label_excl=self._label_exclusions(workers) if check_nodes else array("b"),
        )
        return request, names

    def _label_exclusions(self, pod_set: PodSetRequest) -> array[int]:
        """Which host leaves the PodSet's nodeSelector or required affinity excludes (empty: none
        asked). An O(nodes) Python pass, so remembered per selector for the tree's life."""
        if not pod_set.node_selector and pod_set.affinity is None:
            return array("b")
        key = (tuple(sorted(pod_set.node_selector.items())), pod_set.affinity)
        try:
            found = self.label_cache.get(key)
        except TypeError:  # a selector value that does not hash: computed, not remembered
            return self._exclusions_of(pod_set)
        if found is None:
            found = self._exclusions_of(pod_set)
            if len(self.label_cache) >= LABEL_CACHE_SIZE:
                self.label_cache.clear()
            self.label_cache[key] = found
        return found

    def _exclusions_of(self, pod_set: PodSetRequest) -> array[int]:
        flags = array("b", [EXCLUDED_NONE]) * len(self.tree.leaf_nodes)
        for leaf, node in enumerate(self.tree.leaf_nodes):
            if not selector_matches(node, pod_set.node_selector):
                flags[leaf] = EXCLUDED_SELECTOR
            elif pod_set.affinity is not None and not affinity_matches(node, pod_set.affinity):
                flags[leaf] = EXCLUDED_AFFINITY
        return flags

    def _excluded(self, raw: RawResult, workers: PodSetRequest, names: list[str]) -> tuple[Exclusion, ...]:
        tolerations = (*workers.tolerations, *self.flavor_tolerations)
        taint_names = [str(first_untolerated(t, tolerations) or "") for t in self.tree.taint_classes]
        return messages.exclusions(raw, taint_names, names)

    def _reason(
        self,
        raw: RawResult,
        workers: PodSetRequest,
        resolved: ResolvedLevels,
        excluded: tuple[Exclusion, ...],
    ) -> str:
        tree = self.tree
        if raw.status == STATUS_NO_DOMAINS:
            return messages.no_domains_message(tree.levels[raw.level])
        if raw.status != STATUS_NOT_FIT:
            return "Kueue would find no domains for this PodSet (its placement assumptions are violated)"
        suffix = messages.exclusion_suffix(raw.total_nodes, excluded)
        if resolved.layers:
            layers = [(layer.level, layer.size) for layer in resolved.layers]
            return messages.multi_layer_message(
                self.topology_name, workers.count, layers, raw.layer_fits, suffix
            )
        return messages.not_fit_message(
            self.topology_name, raw.fit_count, raw.total, resolved.slice_size, suffix
        )

    def _levels(self, raw: RawResult, slice_size: int) -> tuple[LevelCapacity, ...]:
        tree = self.tree
        out = []
        for level, name in enumerate(tree.levels):
            best = raw.level_best[level]
            out.append(
                LevelCapacity(
                    level=name,
                    max_pods=raw.level_max_pods[level],
                    max_slices=raw.level_max_slices[level] if slice_size > 1 else raw.level_max_pods[level],
                    fitting_domains=raw.level_fitting[level],
                    domains=tree.level_offsets[level + 1] - tree.level_offsets[level],
                    best_domain=tree.paths[best] if best >= 0 else None,
                )
            )
        return tuple(out)

    def limiting_resources(self, domain: tuple[str, ...], requests: Mapping[str, int]) -> tuple[str, ...]:
        """The resources that bound how many such pods the domain holds (ties all named)."""
        tree = self.tree
        width = len(tree.resources)
        wanted = [(n, requests.get(n, 0) + (1 if n == PODS else 0)) for n in sorted({*requests, PODS})]
        columns = [(n, want, tree.resource_column(n)) for n, want in wanted if want > 0]
        held: dict[str, int] = {}
        free = self.free
        for leaf in tree.leaf_range(domain):
            for name, want, col in columns:
                have = free[leaf * width + col] if col >= 0 else 0
                held[name] = held.get(name, 0) + max(have, 0) // want
        least = min(held.values(), default=0)
        return tuple(sorted(r for r, n in held.items() if n == least))

    def _assignment(self, leaves: Sequence[int], counts: Sequence[int]) -> Assignment:
        tree = self.tree
        levels = tree.levels[-1:] if tree.hostname_leaves else tree.levels
        last_only = tree.hostname_leaves
        return Assignment.of_leaves(levels, tree.paths, tree.leaf_offset, leaves, counts, last_only)

    def _consume(
        self,
        free: array[int],
        cols: array[int],
        vals: array[int],
        leaves: Sequence[int],
        counts: Sequence[int],
    ) -> None:
        width = len(self.tree.resources)
        for leaf, n in zip(leaves, counts, strict=True):
            for col, v in zip(cols, vals, strict=True):
                if col >= 0:
                    free[leaf * width + col] -= v * n


def _values(requests: Mapping[str, int], names: Sequence[str]) -> array[int]:
    return array("q", [requests.get(n, 0) + (1 if n == PODS else 0) for n in names])


def _failed(pod_set: PodSetRequest, reason: str) -> Placement:
    return Placement(pod_set.name, False, None, reason, 0, pod_set.count)


def _groups(pod_sets: Sequence[PodSetRequest]) -> list[_Group]:
    """Kueue groups PodSets by podset-group-name; the larger of a pair is the workers."""
    order: dict[object, list[PodSetRequest]] = {}
    for i, p in enumerate(pod_sets):
        key: object = ("group", p.topology.group) if p.topology.group is not None else ("index", i)
        order.setdefault(key, []).append(p)
    groups = []
    for members in order.values():
        workers, leader = members[0], members[1] if len(members) > 1 else None
        if leader is not None and leader.count > workers.count:
            workers, leader = leader, workers
        groups.append(_Group(workers, leader, tuple(members[2:])))
    return groups
