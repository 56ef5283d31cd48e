"""One row of the native proof table (e2e/native_table.py): a workload, the fate it was written to
meet in the v1.36.5 scheduler, and what the row changes in the cluster first. Kept apart from
the rows themselves (e2e/native_rows.py, e2e/native_rows_more.py) so both can build them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "table"
ROWS_ENV = "TASGATE_NATIVE_ROWS"  # comma-separated row names: run only those (debugging)
FITS, WAITS, NEVER, ERROR = "fits", "waits", "never", "error"


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

    @property
    def started_at(self) -> int:
        """How many bound pods mean the group started (a basic group: any)."""
        return self.min_count if self.min_count is not None else 1
