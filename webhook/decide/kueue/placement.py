"""A Kueue workload placed: validated on its topology, held to its quota, scored on every flavor
(``scoring``), then the verdict — a denial with the cause in numbers, or an admission with the
injections and gang objects the policy asks for, judged again after preemption when it waits."""

from __future__ import annotations

from webhook.decide.gangs import plan as gang
from webhook.decide.gates import opted_out
from webhook.decide.kueue.delayed import delayed_reason, effective_delays, today_figure
from webhook.decide.kueue.mustwait import must_wait
from webhook.decide.kueue.never import never_message, partial_warnings
from webhook.decide.kueue.outcomes import audit_of, no_tas
from webhook.decide.kueue.preemption import victims_warning
from webhook.decide.kueue.preemption_verdict import after_preemption
from webhook.decide.kueue.quota import QuotaVerdict, check_quota
from webhook.decide.kueue.release import with_release
from webhook.decide.kueue.scoring import Scored, score_flavors
from webhook.decide.kueue.slices import partial_slices
from webhook.decide.kueue.together import split_warning
from webhook.decide.kueue.topology import Resolution, with_levels
from webhook.decide.patch import Entry, Removal, build_patch
from webhook.decide.policy import Policy, Rule, Subject
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, FlavorVerdict, Review, all_fit_now, deny, revised
from webhook.model.podset import WorkloadView
from webhook.rules import opt_out_near_miss, validate_workload
from webhook.state.cluster import ClusterState
from webhook.wire.errors import InvalidObject


def judge_placement(
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
