"""Validation of a workload's TAS annotations and gang labels: every error, all at once.

``validate_workload`` runs, in this order, and returns everything it finds (never only the first
problem): the type checks of the metadata it reads, Kueue's own TAS annotation rules with Kueue's
paths and words (``validation_kueue``), tasgate's stricter topology rules (``validation_tasgate``)
and the gang-scheduling rules (``validation_gang``). Identical errors are reported once, as
``field.ErrorList.ToAggregate`` does. Keys Kueue or tasgate ignore (unknown, misspelt, misplaced)
are warnings, not errors: ``key_warnings`` (``rules.keycheck``). With Kueue's
``TASMultiLayerTopology`` gate off the constraints annotation is refused and otherwise not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from webhook.model.podset import PodSetView, WorkloadView
from webhook.rules.gang import owner_min_member_errors, validate_gang
from webhook.rules.keycheck import key_warnings, opt_out_near_miss, topology_near_misses
from webhook.rules.kueue import (
    validate_grouping,
    validate_partial_admission,
    validate_pod_set_request,
    validate_upper_bound,
)
from webhook.rules.tasgate import Levels, validate_topology
from webhook.wire.errors import FieldError

__all__ = [
    "key_warnings",
    "opt_out_near_miss",
    "owner_min_member_errors",
    "topology_near_misses",
    "validate_workload",
]


def validate_workload(
    view: WorkloadView,
    levels: Sequence[str] | None,
    level_has_nodes: Callable[[str], bool] | None = None,
    multi_layer: bool = True,
) -> list[FieldError]:
    """Every problem with the workload's TAS annotations and gang labels.

    ``levels`` are the node labels of the Topology that applies, coarsest first; None when it is
    not known (level checks are then skipped). ``level_has_nodes(level)`` says whether any node
    the workload could run on carries that label; None skips that check. ``multi_layer`` is
    Kueue's ``TASMultiLayerTopology`` gate.
    """
    errors = list(view.read_errors)
    read = [p if multi_layer else _without_constraints(p) for p in view.pod_sets]
    for pod_set, as_read in zip(view.pod_sets, read, strict=True):
        errors += validate_pod_set_request(pod_set, multi_layer)
        errors += validate_upper_bound(as_read)
    errors += validate_partial_admission(view.workload)
    if view.workload.kind != "Pod":
        errors += validate_grouping(view.pod_sets)
    known = Levels(levels, level_has_nodes)
    for pod_set in read:
        errors += validate_topology(pod_set, known)
    errors += validate_gang(view.workload, view.pod_sets)
    return _unique(errors)


def _without_constraints(view: PodSetView) -> PodSetView:
    """The PodSet as Kueue reads it with TASMultiLayerTopology off: no slice constraints."""
    if view.constraints is None:
        return view
    return replace(view, constraints=None, request=replace(view.request, slice_layers=()))


def _unique(errors: Iterable[FieldError]) -> list[FieldError]:
    seen: set[str] = set()
    out = []
    for err in errors:
        text = str(err)
        if text not in seen:
            seen.add(text)
            out.append(err)
    return out
