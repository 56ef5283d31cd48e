"""Plain, immutable input and output types of the topology scorer.

Everything here is already parsed: resource amounts are integers in canonical units
(``cpu`` in milli-units, every other resource in whole units rounded up), exactly the
units Kueue's ``resources.Requests`` holds. The webhook turns Kubernetes objects into
these types once, when a cluster snapshot is built.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Resources = Mapping[str, int]

HOSTNAME_LABEL = "kubernetes.io/hostname"
PODS = "pods"

# Taints that Kubernetes puts on a node while it is NotReady, unreachable, cordoned or under
# pressure. They go away when the node recovers, so the "never" (empty cluster) evaluation
# ignores them; the "now" evaluation keeps them.
CONDITION_TAINT_PREFIX = "node.kubernetes.io/"
SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        # Same text as corev1.Taint.ToString(), which Kueue puts in its exclusion stats.
        if self.value:
            return f"{self.key}={self.value}:{self.effect}"
        return f"{self.key}:{self.effect}"

    @property
    def is_condition(self) -> bool:
        return self.key.startswith(CONDITION_TAINT_PREFIX)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """corev1.Toleration.ToleratesTaint: empty effect matches all, empty key + Exists all keys."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One matchExpressions / matchFields entry of a required node affinity term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """Expressions are ANDed within a term; the terms of an affinity are ORed."""

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the scorer needs it; ``usage`` sums requests of bound, non-terminal pods."""

    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    usage: Resources = field(default_factory=dict)

    @property
    def schedulable_now(self) -> bool:
        """Kueue's TAS node cache keeps only Ready, uncordoned nodes."""
        return self.ready and not self.unschedulable


class Mode(enum.Enum):
    """How a PodSet asks to be placed; IMPLIED is Kueue's TAS-for-every-PodSet default."""

    REQUIRED = "required"
    PREFERRED = "preferred"
    UNCONSTRAINED = "unconstrained"
    IMPLIED = "implied"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SliceLayer:
    level: str
    size: int


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """The TAS annotations of one PodSet, already validated for shape.

    ``slice_layers`` carries ``podset-slice-required-topology-constraints`` (coarse to fine);
    when it is set, its first layer wins over ``slice_level``/``slice_size`` as in Kueue.
    ``least_free`` is Kueue's placement profile, not an annotation: an unconstrained request is
    placed LeastFreeCapacity-first while Kueue's ``TASProfileMixed`` gate is on (its default), and
    BestFit like every other request when it is off (False here).
    """

    mode: Mode = Mode.IMPLIED
    level: str | None = None
    slice_level: str | None = None
    slice_size: int | None = None
    slice_layers: tuple[SliceLayer, ...] = ()
    group: str | None = None
    least_free: bool = True


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    name: str
    count: int
    requests: Resources
    topology: TopologyRequest = TopologyRequest()
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[SelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    values: tuple[str, ...]
    count: int


class Assignment:
    """Kueue's TopologyAssignment: hostname only when it is the lowest level, else full paths.

    The engine answers with leaf indexes and counts; ``of_leaves`` keeps those and makes the
    per-domain tuples when ``domains`` is first read. A 128-host gang is 128 Python objects
    (about 2 µs each, more than the placement itself at 1k nodes), and most admission reviews
    never read them. Equal, hashable and immutable to its readers like the dataclass it was.
    """

    __slots__ = ("_counts", "_domains", "_last_only", "_leaves", "_offset", "_paths", "levels")

    def __init__(self, levels: tuple[str, ...], domains: tuple[DomainAssignment, ...]) -> None:
        self.levels = levels
        self._domains: tuple[DomainAssignment, ...] | None = domains
        self._paths: Sequence[tuple[str, ...]] = ()
        self._offset = 0
        self._leaves: Sequence[int] = ()
        self._counts: Sequence[int] = ()
        self._last_only = False

    @classmethod
    def of_leaves(
        cls,
        levels: tuple[str, ...],
        paths: Sequence[tuple[str, ...]],
        offset: int,
        leaves: Sequence[int],
        counts: Sequence[int],
        last_only: bool,
    ) -> Assignment:
        """Domain ``i`` is ``paths[offset + leaves[i]]`` (its last value alone when ``last_only``:
        hostname leaves) holding ``counts[i]`` pods. Nothing is copied, and the inputs are kept
        (never cleared, so concurrent first reads are safe): they must not change afterwards."""
        if len(leaves) != len(counts):
            raise ValueError("one count per leaf")
        made = cls.__new__(cls)  # every slot set here: __init__ would set five of them twice
        made.levels, made._domains = levels, None
        made._paths, made._offset, made._last_only = paths, offset, last_only
        made._leaves, made._counts = leaves, counts
        return made

    @property
    def domains(self) -> tuple[DomainAssignment, ...]:
        if self._domains is None:
            paths, offset, cut = self._paths, self._offset, -1 if self._last_only else 0
            self._domains = tuple(
                DomainAssignment(paths[offset + leaf][cut:], count)
                for leaf, count in zip(self._leaves, self._counts, strict=True)
            )
        return self._domains

    def leaf_paths(self) -> tuple[tuple[str, ...], ...]:
        """Each domain's whole path, one value per level of the topology (``domains`` cuts it to
        the hostname when that is the lowest level); the domains' own values when the assignment
        was made without its tree (unpickled, or built by hand)."""
        if not self._paths:
            return tuple(d.values for d in self.domains)
        return tuple(self._paths[self._offset + leaf] for leaf in self._leaves)

    @property
    def total(self) -> int:
        if self._domains is None:
            return sum(self._counts)
        return sum(d.count for d in self._domains)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Assignment):
            return NotImplemented
        return self.levels == other.levels and self.domains == other.domains

    def __hash__(self) -> int:
        return hash((self.levels, self.domains))

    def __repr__(self) -> str:
        return f"Assignment(levels={self.levels!r}, domains={self.domains!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as plain tuples of its domains (a decision process sends it back: C-speed,
        about 1 µs for 64 domains), never the whole tree's paths that ``_paths`` shares."""
        if self._domains is None:
            paths, offset, cut = self._paths, self._offset, -1 if self._last_only else 0
            values = tuple(paths[offset + leaf][cut:] for leaf in self._leaves)
            counts = tuple(self._counts)
        else:
            values = tuple(d.values for d in self._domains)
            counts = tuple(d.count for d in self._domains)
        return (Assignment.of_leaves, (self.levels, values, 0, range(len(values)), counts, False))


@dataclass(frozen=True, slots=True)
class LevelCapacity:
    """The best single domain of one level for one PodSet, from the fill-in counts."""

    level: str
    max_pods: int
    max_slices: int
    fitting_domains: int
    domains: int
    best_domain: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class Placement:
    """The scorer's answer for one PodSet. ``reason`` is Kueue's own text when it does not fit."""

    name: str
    fits: bool
    assignment: Assignment | None
    reason: str = ""
    fit_count: int = 0
    total_count: int = 0
    unit: str = "pod"
    levels: tuple[LevelCapacity, ...] = ()
    # Kueue's own placement would break its assumptions here (it logs an error and admits
    # with an empty assignment): not a verdict tasgate should deny on.
    anomaly: bool = False
    # When it does not fit: the nodes considered and why nodes were left out (Kueue's reasons).
    total_nodes: int = 0
    excluded: tuple[tuple[str, int], ...] = ()

    def level_row(self, level: str) -> LevelCapacity | None:
        """The per-level capacity row of ``level`` (None when the topology lacks it)."""
        return next((row for row in self.levels if row.level == level), None)
