"""A view of one topology (a tree and its free capacity) and the workload-level placement loop.

A workload's PodSets are placed in order, each seeing the capacity the previous ones took, as
Kueue's ``FindTopologyAssignmentsForFlavor`` does; the engine places one group at a time and
this module turns its numbers into Kueue's words. `scorer.cluster.Cluster` holds the two views.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import NamedTuple

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
from scorer.nodes import first_untolerated
from scorer.request import (
    STATUS_FAILED,
    STATUS_FIT,
    STATUS_NO_DOMAINS,
    STATUS_NOT_FIT,
    Engine,
    GroupRequest,
    Plan,
    RawResult,
    label_exclusions,
    plan_of,
)
from scorer.tree import Tree

try:  # records made with their slots set directly (`scorer._core.frozen`): ~1 us each less
    from scorer._core import amounts, level_rows
    from scorer._core import frozen as _make
except ImportError:  # not built: the twins, the dataclasses' own constructors
    from scorer._reference import amounts, level_rows
    from scorer._reference import frozen as _make

_REQUEST_FIELDS = tuple(f.name for f in fields(GroupRequest))
_LEVEL_FIELDS = tuple(f.name for f in fields(LevelCapacity))
_PLACEMENT_FIELDS = tuple(f.name for f in fields(Placement))


class Group(NamedTuple):
    """What the engine places in one run: a PodSet, or a leader and its workers."""

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
        if len(groups) == 1:  # reads the snapshot's own (never mutated) array, records nothing
            return in_order(pod_sets, self._place_group(groups[0], self.free, engine, record=False))
        # a later group sees what earlier ones took; the last group's usage is not recorded
        free, found = array("q", self.free), []
        for index, group in enumerate(groups):
            found += self._place_group(group, free, engine, record=index < len(groups) - 1)
        return in_order(pod_sets, found)

    def shares_plans_with(self, other: View) -> bool:
        """Both views place on one tree the same way (only their capacities differ), so one
        plan and request serve both (`Cluster.place_now_and_never`)."""
        return (
            self.tree is other.tree
            and self.label_cache is other.label_cache
            and self._engine is other._engine
            and self.topology_name == other.topology_name
            and self.flavor_tolerations == other.flavor_tolerations
        )

    def _place_group(self, group: Group, free: array[int], engine: Engine, record: bool) -> list[Placement]:
        prepared = self.prepare(group)
        if isinstance(prepared, list):
            return prepared
        plan, request = prepared
        return self.finish(group, plan, request, engine.place_group(self.tree, free, request), free, record)

    def prepare(self, group: Group) -> tuple[Plan, GroupRequest] | list[Placement]:
        """The engine's plan and request, or the group's placements when it has no plan."""
        plan = self._plan(group)
        if isinstance(plan, str):
            return [_failed(p, plan) for p in _members(group)] + _extra(group)
        return plan, self._request(group, plan)

    def finish(
        self, group: Group, plan: Plan, request: GroupRequest, raw: RawResult, free: array[int], record: bool
    ) -> list[Placement]:
        """The engine's numbers in Kueue's words (and, when ``record``, its pods taken from ``free``)."""
        workers, leader = group.workers, group.leader
        levels = self._levels(raw, plan)
        if raw.status != STATUS_FIT:
            return [self._unplaced(p, raw, workers, plan, levels) for p in _members(group)] + _extra(group)
        if record:
            self._consume(free, request.req_col, request.req_val, raw.worker_leaves, raw.worker_counts)
        assignment = self._assignment(plan, raw.worker_leaves, raw.worker_counts)
        out = [_make(Placement, _PLACEMENT_FIELDS, _placed(workers.name, assignment, levels, workers.count))]
        if leader is not None:
            if record:
                self._consume(free, request.req_col, request.leader_val, raw.leader_leaves, raw.leader_counts)
            assignment = self._assignment(plan, raw.leader_leaves, raw.leader_counts)
            out.append(_make(Placement, _PLACEMENT_FIELDS, _placed(leader.name, assignment, levels, 1)))
        return out + _extra(group) if group.extra else out

    def _unplaced(
        self,
        p: PodSetRequest,
        raw: RawResult,
        workers: PodSetRequest,
        plan: Plan,
        levels: tuple[LevelCapacity, ...],
    ) -> Placement:
        resolved = plan.resolved
        excluded = self._excluded(raw, workers, plan.names) if raw.status == STATUS_NOT_FIT else ()
        reason = self._reason(raw, workers, plan, excluded)
        total = workers.count // resolved.slice_size
        unit = "pod" if resolved.slice_size == 1 else "slice"
        anomaly = raw.status == STATUS_FAILED
        values = (
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
        return Placement(*values)

    def _plan(self, group: Group) -> Plan | str:
        """The request's tree-and-shape part (`scorer.request.Plan`), remembered per tree."""
        return plan_of(self.tree, group.workers, group.leader, self.flavor_tolerations)

    def _request(self, group: Group, plan: Plan) -> GroupRequest:
        """The engine's input: the plan's shared arrays, this request's amounts and count."""
        workers, leader = group.workers, group.leader
        resolved = plan.resolved
        values = (
            plan.req_col, amounts(workers.requests, plan.names, plan.pods_at),
            amounts(leader.requests, plan.names, plan.pods_at) if leader else array("q"), workers.count,
            resolved.slice_size, resolved.requested_level, resolved.slice_level, plan.inner_sizes,
            resolved.required, resolved.unconstrained, plan.layer_levels, plan.layer_sizes,
            plan.check_nodes, plan.class_excluded,
            self._label_exclusions(workers) if plan.check_nodes else array("b"), resolved.least_free,
        )  # fmt: skip
        return _make(GroupRequest, _REQUEST_FIELDS, values)

    def _label_exclusions(self, pod_set: PodSetRequest) -> array[int]:
        return label_exclusions(self.tree, self.label_cache, pod_set)

    def _excluded(
        self, raw: RawResult, workers: PodSetRequest, names: Sequence[str]
    ) -> tuple[Exclusion, ...]:
        tolerations = (*workers.tolerations, *self.flavor_tolerations)
        taint_names = [str(first_untolerated(t, tolerations) or "") for t in self.tree.taint_classes]
        return messages.exclusions(raw, taint_names, names)

    def _reason(
        self,
        raw: RawResult,
        workers: PodSetRequest,
        plan: Plan,
        excluded: tuple[Exclusion, ...],
    ) -> str:
        tree, resolved = self.tree, plan.resolved
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

    def _levels(self, raw: RawResult, plan: Plan) -> tuple[LevelCapacity, ...]:
        """One LevelCapacity row per level: names and domain counts from the plan, the rest from
        the engine's per-level table."""
        pods = raw.level_max_pods
        slices = raw.level_max_slices if plan.resolved.slice_size > 1 else pods
        return level_rows(
            LevelCapacity, _LEVEL_FIELDS, plan.level_names, plan.domains, self.tree.paths,
            pods, slices, raw.level_fitting, raw.level_best,
        )  # fmt: skip

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

    def _assignment(self, plan: Plan, leaves: Sequence[int], counts: Sequence[int]) -> Assignment:
        paths = self.tree.paths
        return Assignment.of_leaves(
            plan.assign_levels, paths, plan.leaf_offset, leaves, counts, plan.check_nodes
        )

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


def in_order(pod_sets: Sequence[PodSetRequest], placed: list[Placement]) -> tuple[Placement, ...]:
    """The placements of ``pod_sets``, in their order."""
    if len(pod_sets) == 1:
        return (placed[0],)
    found = {p.name: p for p in placed}
    return tuple([found[p.name] for p in pod_sets])


def _placed(
    name: str, assignment: Assignment, levels: tuple[LevelCapacity, ...], count: int
) -> tuple[object, ...]:
    """Placement(name, True, assignment, levels=levels, total_count=count), as field values."""
    return (name, True, assignment, "", 0, count, "pod", levels, False, 0, ())


def _members(group: Group) -> list[PodSetRequest]:
    return [group.workers] + ([group.leader] if group.leader else [])


def _extra(group: Group) -> list[Placement]:
    return [_failed(p, f"podset group {p.topology.group!r} has more than two PodSets") for p in group.extra]


def _failed(pod_set: PodSetRequest, reason: str) -> Placement:
    return Placement(pod_set.name, False, None, reason, 0, pod_set.count)


def one_group(pod_sets: Sequence[PodSetRequest]) -> Group | None:
    """The one group ``pod_sets`` form, or None when they form several."""
    groups = _groups(pod_sets)
    return groups[0] if len(groups) == 1 else None


def _groups(pod_sets: Sequence[PodSetRequest]) -> list[Group]:
    """Kueue groups PodSets by podset-group-name; the larger of a pair is the workers."""
    if len(pod_sets) == 1:
        return [Group(pod_sets[0], None, ())]
    if len(pod_sets) == 2 and pod_sets[0].topology.group is not None:
        first, second = pod_sets
        if first.topology.group == second.topology.group:  # a leader and its workers
            return [Group(second, first, ()) if second.count > first.count else Group(first, second, ())]
    order: dict[object, list[PodSetRequest]] = {}
    for i, p in enumerate(pod_sets):
        key: object = ("group", p.topology.group) if p.topology.group is not None else ("index", i)
        order.setdefault(key, []).append(p)
    groups = []
    for members in order.values():
        workers, leader = members[0], members[1] if len(members) > 1 else None
        if leader is not None and leader.count > workers.count:
            workers, leader = leader, workers
        groups.append(Group(workers, leader, tuple(members[2:])))
    return groups
