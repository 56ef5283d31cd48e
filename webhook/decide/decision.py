"""The decision path the webhook and `tasgate check` share: one object in, one verdict out.

Pure: no network, no clock, no logging. The steps read in order — find the PodSets, skip what
is not ours, read each PodSet once (``model.podset``), resolve the topology, validate, plan
injections and score every flavor (``scoring``), decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from webhook.decide import gang
from webhook.decide.changes import placement_changed
from webhook.decide.delayed import delayed_reason, effective_delays, today_figure
from webhook.decide.depends import left_out
from webhook.decide.gates import kueues_to_manage, opted_out
from webhook.decide.multikueue import dispatched_to, on_workers
from webhook.decide.mustwait import must_wait
from webhook.decide.native import decide_native
from webhook.decide.native_create import create_native
from webhook.decide.native_subject import native_subject
from webhook.decide.never import never_message, partial_warnings
from webhook.decide.outcomes import audit_of, deny, no_target, no_tas, not_checked, with_reason
from webhook.decide.patch import Entry, Removal, apply_entries, build_patch
from webhook.decide.policy import Policy, Rule, Subject
from webhook.decide.preemption import victims_warning
from webhook.decide.preemption_verdict import after_preemption
from webhook.decide.quota import QuotaVerdict, check_quota
from webhook.decide.reasons import Reason
from webhook.decide.release import with_release
from webhook.decide.scoring import Scored, score_flavors
from webhook.decide.slices import partial_slices
from webhook.decide.together import split_warning
from webhook.decide.topology import Resolution, resolve, with_levels
from webhook.decide.unjudged import unjudged
from webhook.decide.verdicts import (
    Decision,
    FlavorVerdict,
    Review,
    all_fit_now,
    revised,
)
from webhook.model import annotations as ann
from webhook.model.podset import WorkloadView, view_workload
from webhook.model.workloads import extract, owned_by_workload, unknown_workload_reason
from webhook.rules import key_warnings, opt_out_near_miss, validate_workload
from webhook.state.cluster import ClusterState
from webhook.wire.errors import FieldError, InvalidObject


def decide(review: Review, state: ClusterState, policy: Policy) -> Decision:
    decision = _decide(review, state, policy)
    if decision.reason is Reason.MULTIKUEUE and decision.allowed and (state.workers or state.unreached):
        # Judged where Kueue dispatches it, as the manager leaves it (`decide.multikueue`).
        workers, unreached = dispatched_to(state, decision.cluster_queue)
        dispatched = replace(review, obj=apply_entries(review.obj, decision.patch))
        judged = {name: _decide(dispatched, worker, policy) for name, worker in workers.items()}
        return on_workers(decision, judged, unreached)
    return decision


def _decide(review: Review, state: ClusterState, policy: Policy) -> Decision:
    obj = review.obj
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    base = Decision(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or review.namespace),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        allowed=True,
        reason=Reason.NOT_A_WORKLOAD,
        generation=state.generation,
    )
    created = create_native(review, base, state, policy)  # a native gang tasgate makes itself
    if created is not None:
        return created
    try:
        subject = native_subject(obj, base.namespace, state)
    except InvalidObject as exc:
        return deny(base, Reason.INVALID, str(exc))
    if subject is not None and base.namespace not in policy.exempt_namespaces:
        return decide_native(base, subject, state, obj, policy)
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
        return _judge(review, base, view, resolution, state, policy)
    except InvalidObject as exc:  # a template field the scorer reads (nodeSelector, tolerations …)
        return deny(base, Reason.INVALID, str(exc))


def _judge(
    review: Review,
    base: Decision,
    view: WorkloadView,
    resolution: Resolution,
    state: ClusterState,
    policy: Policy,
) -> Decision:
    wl = view.workload
    # Kueue applies implied TAS only in a queue whose every flavor is a TAS flavor; elsewhere a
    # PodSet without TAS annotations goes to a non-TAS flavor, and nothing is injected into it.
    judged = [resolution.tas_only or p.explicit_tas for p in view.pod_sets]
    if not any(judged):
        return no_tas(base, f'no PodSet asks for TAS in mixed ClusterQueue "{resolution.cluster_queue}"')
    targets = with_levels(resolution.targets, [p for p, j in zip(view.pod_sets, judged, strict=True) if j])
    targets = effective_delays(targets, view.pod_sets)
    # Nodes a check provisions (or a worker cluster's) carry the levels today's nodes may lack.
    has_nodes = None if any(t.delay for t in targets) else state.level_has_nodes
    errors = validate_workload(view, targets[0].topology.levels, has_nodes, targets[0].gates.multi_layer)
    if errors:
        return deny(base, Reason.INVALID, str(InvalidObject(errors)))
    quota = _quota(view, resolution, state)
    if quota.never:
        return deny(base, Reason.OVER_QUOTA, " ".join(quota.never))
    ns_labels = state.namespaces.get(base.namespace, {})
    gpus = (
        sum(ps.requests.get(r, 0) * ps.count for ps in wl.pod_sets for r in policy.gpu_resources) * wl.groups
    )
    per_pod = max((sum(ps.requests.get(r, 0) for r in policy.gpu_resources) for ps in wl.pod_sets), default=0)
    rule = policy.rule_for(Subject(base.namespace, ns_labels, base.queue, wl.total_pods, gpus, per_pod))
    # A TrainJob's templates live in its runtime: not ours to patch. A workload may opt out.
    # A misspelt opt-out may have meant one: nothing is added then either.
    opted = opted_out(review.obj) or opt_out_near_miss(review.obj, wl.pod_sets)
    mutable = wl.runtime is None and not opted
    wanted = rule.inject if rule and mutable and resolution.tas_only else None
    scored, flavors = score_flavors(view.pod_sets, wanted, targets, judged)
    topology = scored.target.topology.name
    gang_rule = rule if mutable else None
    decision = _verdict(review, base, view, scored, flavors, topology, gang_rule, policy, state.unserved)
    decision = partial_slices(decision, view)  # Kueue places whole slices only
    if decision.allowed and decision.reason is Reason.WAITS:  # Kueue may preempt for it
        args = (base.namespace, base.queue, resolution.cluster_queue, view.pod_sets, wanted, judged)
        found = after_preemption(review.obj, *args, targets, scored, state, policy)
        if found is not None:  # judged again on the state after eviction; never made a denial
            after = _verdict(
                review, base, view, found.scored, found.flavors, topology, gang_rule, policy, state.unserved
            )
            after = partial_slices(after, view)
            reason = Reason.ADMITTED_AFTER_PREEMPTION
            audit = audit_of(found.scored.verdicts, found.scored.target, reason)
            if after.allowed:
                note = victims_warning(found.preemption)
                decision = revised(after, reason=reason, audit=audit, warnings=(note, *after.warnings))
    if quota.today and decision.allowed:
        decision = revised(decision, warnings=(*decision.warnings, *((t) for t in quota.today)))
    apart = split_warning(view.pod_sets, decision.pod_sets, scored.target.topology.levels)
    if apart and decision.allowed:
        decision = revised(decision, warnings=(*decision.warnings, apart))
    return with_release(decision, state.kueue_release)  # the Kueue judged for; a warning if not proven


def _quota(view: WorkloadView, resolution: Resolution, state: ClusterState) -> QuotaVerdict:
    cq = state.cluster_queues.get(resolution.cluster_queue or "")
    if cq is None:
        return QuotaVerdict()  # the policy's default topology: no queue, no quota
    members = [m for m in state.cluster_queues.values() if m.cohort == cq.cohort and m.name != cq.name]
    return check_quota(view.pod_sets, cq, members if cq.cohort else ())


def _verdict(
    review: Review,
    base: Decision,
    view: WorkloadView,
    scored: Scored,
    flavors: tuple[FlavorVerdict, ...],
    topology: str,
    rule: Rule | None,
    policy: Policy,
    state_unserved: frozenset[str] = frozenset(),
) -> Decision:
    """The verdict on ``scored``, with what scoring found (``flavors``, the PodSets' verdicts and
    the ``topology`` that speaks) set on ``base`` in the same step."""
    target = scored.target
    warnings = [*base.warnings, *scored.plan.problems]
    if target.delay is not None:
        warnings.append(target.delay.describe(base.cluster_queue or ""))
    denials = []
    for v, p in zip(scored.verdicts, view.pod_sets, strict=True):
        never, now = v.never, v.now
        if never is None or now is None:
            continue
        level = v.request.level or target.topology.levels[-1]
        if target.delay is not None:  # placed later or elsewhere: today's nodes are a figure
            today = today_figure(v, level, target.delay)
            warnings += [today] if today else []
        elif not never.fits and not never.anomaly:
            denials.append(never_message(v, p, never, level, target, policy))
        elif never.anomaly:
            warnings.append(f'PodSet "{v.name}": {never.reason}')
        else:
            warnings += partial_warnings(v)
            figure = must_wait(v, level)  # the one must-wait figure map, /topology and the tracker show
            if figure is not None:
                warnings.append(figure.message)
    if denials:
        audit = audit_of(scored.verdicts, target, Reason.NEVER_FITS)
        message = " ".join(denials)
        return revised(
            base,
            flavors=flavors,
            pod_sets=scored.verdicts,
            topology=topology,
            allowed=False,
            reason=Reason.NEVER_FITS,
            message=message,
            audit=audit,
            warnings=tuple(warnings),
        )
    backend = gang.backend_for(rule.gang if rule else None, view, state_unserved, warnings)
    name = gang.group_name(review.obj, review.uid)
    entries: list[Entry | Removal] = [*scored.plan.entries, *gang.gang_entries(view, backend, name)]
    groups = gang.pod_groups(view, backend, base.namespace, [e for e in entries if isinstance(e, Entry)])
    reason = Reason.FITS if all_fit_now(scored.verdicts) else Reason.WAITS
    if target.delay is not None:
        reason = delayed_reason(target.delay)
    return revised(
        base,
        flavors=flavors,
        pod_sets=scored.verdicts,
        topology=topology,
        allowed=True,
        reason=reason,
        warnings=tuple(warnings),
        patch=tuple(build_patch(review.obj, entries)),
        audit=audit_of(scored.verdicts, target, reason),
        pod_groups=tuple(groups),
    )
