"""Validation of a workload's TAS annotations and gang labels: every error, all at once.

``validate_workload`` runs, in this order, and returns everything it finds (never only the first
problem): the type checks of the metadata it reads, Kueue's own TAS annotation rules with Kueue's
paths and words (``validation_kueue``), tasgate's stricter topology rules (``validation_tasgate``)
and the gang-scheduling rules (``validation_gang``). Identical errors are reported once, as
``field.ErrorList.ToAggregate`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from webhook.errors import FieldError
from webhook.validation_gang import owner_min_member_errors, validate_gang
from webhook.validation_kueue import validate_grouping, validate_pod_set_request, validate_upper_bound
from webhook.validation_tasgate import Levels, validate_topology
from webhook.validation_view import views
from webhook.workloads import WorkloadPodSets

__all__ = ["owner_min_member_errors", "validate_workload"]


def validate_workload(
    wl: WorkloadPodSets,
    levels: Sequence[str] | None,
    level_has_nodes: Callable[[str], bool] | None = None,
) -> list[FieldError]:
    """Every problem with ``wl``'s TAS annotations and gang labels.

    ``levels`` are the node labels of the Topology that applies, coarsest first; None when it is
    not known (level checks are then skipped). ``level_has_nodes(level)`` says whether any node
    the workload could run on carries that label; None skips that check.
    """
    pod_set_views, errors = views(wl)
    for view in pod_set_views:
        errors += validate_pod_set_request(view)
        errors += validate_upper_bound(view)
    if wl.kind != "Pod":
        errors += validate_grouping(pod_set_views)
    known = Levels(levels, level_has_nodes)
    for view in pod_set_views:
        errors += validate_topology(view, known)
    errors += validate_gang(wl, pod_set_views)
    return _unique(errors)


def _unique(errors: Iterable[FieldError]) -> list[FieldError]:
    seen: set[str] = set()
    out = []
    for err in errors:
        text = str(err)
        if text not in seen:
            seen.add(text)
            out.append(err)
    return out
