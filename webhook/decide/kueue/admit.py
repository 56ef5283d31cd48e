"""A Kueue workload's verdict, up to what placement judges: find the PodSets as Kueue does, skip
what is not Kueue's to judge (a workload's child, Kueue's own update, an exempt namespace), read
the keys, resolve the queue, flavor and topology (``topology``), then place (``placement``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decide.gates import kueues_to_manage
from webhook.decide.kueue.changes import placement_changed
from webhook.decide.kueue.depends import left_out
from webhook.decide.kueue.outcomes import no_target, no_tas, not_checked
from webhook.decide.kueue.placement import judge_placement
from webhook.decide.kueue.topology import resolve
from webhook.decide.kueue.unjudged import unjudged
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review, deny, revised, with_reason
from webhook.model import annotations as ann
from webhook.model.podset import view_workload
from webhook.model.workloads import extract, owned_by_workload, unknown_workload_reason
from webhook.rules import key_warnings
from webhook.state.cluster import ClusterState
from webhook.wire.errors import FieldError, InvalidObject


def judge_workload(review: Review, base: Decision, state: ClusterState, policy: Policy) -> Decision:
    """The Kueue verdict on ``review``'s object (``base``: its identity, reason not-a-workload)."""
    obj = review.obj
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    if owned_by_workload(obj):
        return with_reason(base, Reason.OWNED)  # a workload's child (a JobSet's Job): judged with its parent
    if review.old_obj is not None and kueues_to_manage(review, policy):
        return with_reason(base, Reason.NOT_SUSPENDED)
    exempt = base.namespace in policy.exempt_namespaces
    defaults = state.pod_defaults(base.namespace)
    try:
        wl = extract(obj, state.runtimes, base.namespace, defaults)
    except InvalidObject as exc:
        return with_reason(base, Reason.EXEMPT) if exempt else deny(base, Reason.INVALID, str(exc))
    if wl is None:
        unknown = unknown_workload_reason(obj)
        if unknown:
            note = f"tasgate does not know {base.kind} ({base.api_version}); not checked: {unknown}"
            return with_reason(base, Reason.UNKNOWN_KIND, warnings=(note,))
        return base
    if exempt:
        return with_reason(base, Reason.EXEMPT)
    # Unknown, misspelt or misplaced Kueue/tasgate keys: said on every verdict from here on.
    base = revised(base, warnings=key_warnings(obj, wl))
    labels = meta.get("labels") or {}
    if raw_meta is not None and not isinstance(raw_meta, Mapping):
        return deny(base, Reason.INVALID, str(FieldError("metadata", "must be an object")))
    if not isinstance(labels, Mapping):
        return deny(base, Reason.INVALID, str(FieldError("metadata.labels", "must be a map of strings")))
    queue = str(labels.get(ann.QUEUE_LABEL) or "") or None
    if wl.unresolved:
        rejected = left_out(state, base.namespace, queue, policy.default_topology, wl)
        if rejected is not None:
            return not_checked(base, state, queue, rejected)
        return with_reason(base, Reason.UNRESOLVED, warnings=((f"not checked: {wl.unresolved}"),))
    view = view_workload(wl)
    if review.old_obj is not None and not placement_changed(
        review.old_obj, obj, view, state.runtimes, defaults
    ):
        return with_reason(base, Reason.UNCHANGED)
    pod_sets = unjudged(view)  # not checked still lists what Kueue is asked for
    rejected = left_out(state, base.namespace, queue, policy.default_topology, wl)
    if rejected is not None:
        return not_checked(revised(base, pod_sets=pod_sets), state, queue, rejected)
    resolution = resolve(state, base.namespace, queue, policy.default_topology)
    base = revised(base, pod_sets=pod_sets, queue=queue, cluster_queue=resolution.cluster_queue)
    if resolution.problem:
        warning = f"not checked: {resolution.problem}"
        return with_reason(base, Reason.KUEUE_CONFIG, warnings=(warning,))
    if not resolution.targets:
        return no_tas(base, no_target(resolution, policy))
    try:
        return judge_placement(review, base, view, resolution, state, policy)
    except InvalidObject as exc:  # a template field the scorer reads (nodeSelector, tolerations …)
        return deny(base, Reason.INVALID, str(exc))
