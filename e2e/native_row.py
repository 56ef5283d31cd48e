"""One row of the native proof table (e2e/native_table.py): a workload, the fate it was written to
meet in the real scheduler (v1.36.5, or v1.37.0 for e2e/native_rows_v137.py), and what the row
changes in the cluster first. Kept apart from the rows themselves (e2e/native_rows.py,
e2e/native_rows_more.py, e2e/native_rows_v137.py) so each can build them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "table"
ROWS_ENV = "TASGATE_NATIVE_ROWS"  # comma-separated row names: run only those (debugging)
FITS, WAITS, NEVER, ERROR = "fits", "waits", "never", "error"
# The API server refuses the row's group objects (kubectl create fails): nothing is scheduled.
REFUSED = "refused"
UNSCHEDULABLE = "Unschedulable"  # the reason of a never-fit group's condition


@dataclass(frozen=True)
class Leaf:
    """One PodGroup of a CompositePodGroup row: its name, pods, and how many bound pods mean it
    started (a gang's minCount; 1 for basic)."""

    group: str
    pods: int
    started_at: int


@dataclass(frozen=True)
class NodeChange:
    """What a row changes on one node before it runs, undone after it: labels (a key only some
    nodes carry), taints, a cordon."""

    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    cordon: bool = False


@dataclass(frozen=True)
class Row:
    """One workload of the table and the fate it was written to meet in the real scheduler."""

    name: str
    intent: str  # FITS, WAITS or NEVER
    objects: Callable[[str], list[dict[str, Any]]]
    pods: int
    min_count: int | None  # gang minCount; None for basic
    key: str | None  # the topology key; None: the whole cluster is one domain
    job: bool = False  # the Job controller makes the PodGroup
    setup: Callable[[str], list[dict[str, Any]]] | None = None  # bound pods the row adds first
    finished: tuple[str, ...] = ()  # setup pods then marked Succeeded (their room is free again)
    nodes: tuple[NodeChange, ...] = ()  # node changes, in place while the row runs
    # v1.37: the row is a CompositePodGroup ``composite`` over these PodGroups, started once
    # ``min_groups`` of them have (its gang's minGroupCount; 1 for basic)
    composite: str | None = None
    leaves: tuple[Leaf, ...] = ()
    min_groups: int = 1
    refused_as: str = UNSCHEDULABLE  # the reason a never-fit group's condition must carry

    @property
    def started_at(self) -> int:
        """How many bound pods mean the group started (a basic group: any)."""
        return self.min_count if self.min_count is not None else 1
