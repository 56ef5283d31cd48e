"""The contract between the snapshot layer and a placement engine.

Both engines (`scorer._core`, compiled, and `scorer._reference`, pure Python) expose
``place_group(tree, free, request) -> RawResult`` over exactly these types; nothing else
crosses the boundary, which is what lets the tests compare them value for value.

Also what the snapshot layer builds requests from: `Plan`, the part of a request that depends
only on the tree and the request's shape, remembered per tree so that a placement's Python work
around the engine stays a few microseconds; and the per-selector leaf exclusions.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Protocol, cast

from scorer.model import PODS, PodSetRequest, Toleration, TopologyRequest
from scorer.nodes import affinity_matches, first_untolerated, selector_matches
from scorer.resolve import ResolvedLevels, resolve
from scorer.tree import Tree

STATUS_FIT = 0
STATUS_NOT_FIT = 1
STATUS_NO_DOMAINS = 2
STATUS_FAILED = 3  # Kueue's "code assumptions violated": it assigns nothing


class EngineError(RuntimeError):
    """The engine itself failed (a working buffer overflowed, an invariant of its input broke).

    Never a placement: the caller must treat it as an internal error, not as "does not fit".
    """


EXCLUDED_NONE = 0
EXCLUDED_SELECTOR = 2
EXCLUDED_AFFINITY = 3


@dataclass(frozen=True, slots=True)
class GroupRequest:
    """One placement run: a PodSet, or a leader+workers group, with resolved level indexes.

    ``req_col``/``req_val``: requested resources in alphabetical order (``pods: 1`` included),
    with the capacity column of each (-1 when no node has it). ``leader_val`` is empty when
    there is no leader. ``inner_sizes[level]`` is the multi-layer slice size applying at that
    level (0 = none). ``layer_levels``/``layer_sizes`` are set only for multi-layer requests,
    for the failure message. ``class_excluded[c]`` is 1 when taint class ``c`` holds a taint
    the pod does not tolerate; ``label_excl`` (per leaf, or empty) flags selector/affinity
    misses. Both are read only when ``check_nodes`` (hostname is the lowest level).
    ``least_free``: an ``unconstrained`` request is placed LeastFreeCapacity-first (Kueue's
    ``TASProfileMixed``, on by default); False places it BestFit, as every other request.
    """

    req_col: array[int]
    req_val: array[int]
    leader_val: array[int]
    count: int
    slice_size: int
    requested_level: int
    slice_level: int
    inner_sizes: array[int]
    required: bool
    unconstrained: bool
    layer_levels: array[int]
    layer_sizes: array[int]
    check_nodes: bool
    class_excluded: array[int]
    label_excl: array[int] = field(default_factory=lambda: array("b"))
    least_free: bool = True


@dataclass(slots=True)
class RawResult:
    """What an engine found, as numbers; the snapshot layer turns it into Kueue's words."""

    status: int
    level: int = 0  # the level a fit was found at, or searched when it failed
    fit_count: int = 0
    total: int = 0
    layer_fits: list[int] = field(default_factory=list)
    worker_leaves: list[int] = field(default_factory=list)
    worker_counts: list[int] = field(default_factory=list)
    leader_leaves: list[int] = field(default_factory=list)
    leader_counts: list[int] = field(default_factory=list)
    total_nodes: int = 0
    taint_counts: list[int] = field(default_factory=list)
    selector_count: int = 0
    affinity_count: int = 0
    resource_counts: list[int] = field(default_factory=list)
    level_max_pods: list[int] = field(default_factory=list)
    level_max_slices: list[int] = field(default_factory=list)
    level_fitting: list[int] = field(default_factory=list)
    level_best: list[int] = field(default_factory=list)


class Engine(Protocol):
    NAME: str

    def place_group(self, tree: Tree, free: array[int], request: GroupRequest) -> RawResult: ...

    def place_group_both(
        self, tree: Tree, free: array[int], other: array[int], request: GroupRequest
    ) -> tuple[RawResult, RawResult]:
        """``request`` placed on ``free`` and, independently, on ``other`` (one call: the
        compiled engine makes both in one section without the GIL)."""
        ...


PLAN_CACHE_SIZE = 256  # distinct request shapes remembered per tree


@dataclass(frozen=True, slots=True)
class Plan:
    """The part of a GroupRequest that depends only on the tree and the request's shape.

    Resource columns of the sorted names, the taint classes the tolerations leave out, the
    resolved levels as arrays, and the per-level constants of the LevelCapacity rows: about
    8 us of Python a placement at any cluster size, the same for every workload of one shape.
    Remembered per tree (`plans`), so each placement builds only the amounts and the count.
    The arrays are shared by every request made from the plan: engines only read them (the
    compiled one through ``const`` memoryviews).
    """

    names: tuple[str, ...]
    pods_at: int  # where PODS is in names (every pod asks for one)
    req_col: array[int]
    resolved: ResolvedLevels
    inner_sizes: array[int]
    layer_levels: array[int]
    layer_sizes: array[int]
    check_nodes: bool
    class_excluded: array[int]
    level_names: tuple[str, ...]
    domains: tuple[int, ...]  # per level
    assign_levels: tuple[str, ...]  # an Assignment's levels: hostname alone when hosts are leaves
    leaf_offset: int


def plans(tree: Tree) -> dict[object, Plan | str]:
    """The tree's plans by request shape (a failure reason when the topology request cannot
    be resolved). Lives in ``tree.memo``: an edited tree is a new tree and starts empty; two
    threads racing here make two dicts, and one is dropped."""
    found = tree.memo.get("plans")
    if found is None:
        found = tree.memo["plans"] = {}
    return cast("dict[object, Plan | str]", found)


def plan_of(
    tree: Tree, workers: PodSetRequest, leader: PodSetRequest | None, flavor: tuple[Toleration, ...]
) -> Plan | str:
    """The group's plan on this tree, made on first use. Keyed by the topology request, the
    requested names in the order given, and the tolerations: what the plan depends on."""
    tolerations = (*workers.tolerations, *flavor)
    key = (workers.topology, tuple(workers.requests), tuple(leader.requests) if leader else (), tolerations)
    known = plans(tree)
    found = known.get(key)
    if found is None:
        names = tuple(sorted({*workers.requests, *(leader.requests if leader else {}), PODS}))
        found = make_plan(tree, workers.topology, names, tolerations)
        if len(known) >= PLAN_CACHE_SIZE:
            known.clear()
        known[key] = found
    return found


def make_plan(
    tree: Tree, topology: TopologyRequest, names: tuple[str, ...], tolerations: tuple[Toleration, ...]
) -> Plan | str:
    resolved = resolve(topology, tree.levels)
    if isinstance(resolved, str):
        return resolved
    check_nodes = tree.hostname_leaves
    class_excluded = array("b", [0]) * len(tree.taint_classes)
    if check_nodes:
        for cls, taints in enumerate(tree.taint_classes):
            class_excluded[cls] = first_untolerated(taints, tolerations) is not None
    offsets = tree.level_offsets
    return Plan(
        names=names,
        pods_at=names.index(PODS),
        req_col=array("i", [tree.resource_column(n) for n in names]),
        resolved=resolved,
        inner_sizes=array("i", resolved.inner_sizes),
        layer_levels=array("i", [tree.levels.index(layer.level) for layer in resolved.layers]),
        layer_sizes=array("i", [layer.size for layer in resolved.layers]),
        check_nodes=check_nodes,
        class_excluded=class_excluded,
        level_names=tree.levels,
        domains=tuple(offsets[i + 1] - offsets[i] for i in range(len(tree.levels))),
        assign_levels=tree.levels[-1:] if check_nodes else tree.levels,
        leaf_offset=tree.leaf_offset,
    )


LABEL_CACHE_SIZE = 256  # distinct selectors remembered per tree


def label_exclusions(tree: Tree, cache: dict[object, array[int]], pod_set: PodSetRequest) -> array[int]:
    """Which host leaves the PodSet's nodeSelector or required affinity excludes (empty: none
    asked). An O(nodes) Python pass, so remembered per selector for the tree's life (``cache``:
    the `scorer.snapshot.View.label_cache` every view of the tree shares)."""
    if not pod_set.node_selector and pod_set.affinity is None:
        return array("b")
    key = (tuple(sorted(pod_set.node_selector.items())), pod_set.affinity)
    try:
        found = cache.get(key)
    except TypeError:  # a selector value that does not hash: computed, not remembered
        return _exclusions_of(tree, pod_set)
    if found is None:
        found = _exclusions_of(tree, pod_set)
        if len(cache) >= LABEL_CACHE_SIZE:
            cache.clear()
        cache[key] = found
    return found


def _exclusions_of(tree: Tree, pod_set: PodSetRequest) -> array[int]:
    flags = array("b", [EXCLUDED_NONE]) * len(tree.leaf_nodes)
    for leaf, node in enumerate(tree.leaf_nodes):
        if not selector_matches(node, pod_set.node_selector):
            flags[leaf] = EXCLUDED_SELECTOR
        elif pod_set.affinity is not None and not affinity_matches(node, pod_set.affinity):
            flags[leaf] = EXCLUDED_AFFINITY
    return flags
