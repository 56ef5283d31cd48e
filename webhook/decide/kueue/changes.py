"""Whether an UPDATE changes anything placement depends on.

Counts, per-pod requests, the node constraints the scorer reads (nodeSelector, required node
affinity, tolerations), TAS annotations, gang labels and the queue: the same fields every other
step reads, through the same PodSet views, so "unchanged" cannot disagree with what the decision
would look at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model import annotations as ann
from webhook.model.podrequests import NO_DEFAULTS, PodDefaults
from webhook.model.podset import PodSetView, WorkloadView, view_workload
from webhook.model.workloads import RuntimeKey, extract
from webhook.wire.errors import BadRequest, InvalidObject


def placement_changed(
    old: Mapping[str, Any],
    new_obj: Mapping[str, Any],
    new: WorkloadView,
    runtimes: Mapping[RuntimeKey, Mapping[str, Any]],
    defaults: PodDefaults = NO_DEFAULTS,
) -> bool:
    """Whether ``new`` (read from ``new_obj``) differs from ``old``; an unreadable old one differs."""
    try:
        before = extract(old, runtimes, new.workload.namespace, defaults)
    except (InvalidObject, BadRequest):
        return True
    if before is None:
        return True
    return fingerprint(view_workload(before), _queue(old)) != fingerprint(new, _queue(new_obj))


def fingerprint(view: WorkloadView, queue: str | None) -> tuple[object, ...]:
    sets = tuple(
        (
            p.name,
            p.count,
            tuple(sorted(p.pod_set.requests.items())),
            _node_constraints(p),
            tuple(sorted(p.annotations.items())),
            tuple(sorted(p.labels.items())),
        )
        for p in view.pod_sets
    )
    return (queue, view.workload.groups, sets)


def _node_constraints(p: PodSetView) -> object:
    """What the scorer reads of the template's spec (read once: the decision reuses it); a
    field it cannot read is compared by what is wrong with it."""
    try:
        request = p.scorer_request()
    except InvalidObject as exc:
        return str(exc)
    return (tuple(sorted(request.node_selector.items())), request.affinity, request.tolerations)


def _queue(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    value = labels.get(ann.QUEUE_LABEL) if isinstance(labels, Mapping) else None
    return str(value) if value is not None else None
