"""Plain, immutable input and output types of the topology scorer.

Everything here is already parsed: resource amounts are integers in canonical units
(``cpu`` in milli-units, every other resource in whole units rounded up), exactly the
units Kueue's ``resources.Requests`` holds. The webhook turns Kubernetes objects into
these types once, when a cluster snapshot is built.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

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
    """

    mode: Mode = Mode.IMPLIED
    level: str | None = None
    slice_level: str | None = None
    slice_size: int | None = None
    slice_layers: tuple[SliceLayer, ...] = ()
    group: str | None = None


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


@dataclass(frozen=True, slots=True)
class Assignment:
    """Kueue's TopologyAssignment: hostname only when it is the lowest level, else full paths."""

    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...]

    @property
    def total(self) -> int:
        return sum(d.count for d in self.domains)


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
