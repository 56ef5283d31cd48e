"""The decision path the webhook and `tasgate check` share: one object in, one verdict out.

Pure: no network, no clock, no logging. The steps read in order — find the PodSets, skip what
is not ours, resolve the topology, validate, plan injections, score now and never, decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scorer.model import Mode, Placement, TopologyRequest
from webhook import annotations as ann
from webhook import gang, inject, messages
from webhook.cluster import ClusterState
from webhook.errors import FieldError, InvalidObject
from webhook.patch import Entry, build_patch
from webhook.podsets import scorer_request
from webhook.policy import Inject, Policy, Rule
from webhook.topology import Resolution, Target, resolve
from webhook.validation import validate_workload
from webhook.workloads import PodSetTemplate, WorkloadPodSets, extract, unknown_workload_reason


@dataclass(frozen=True)
class Review:
    """The plain input of one decision."""

    obj: Mapping[str, Any]
    namespace: str = ""
    operation: str = "CREATE"
    uid: str = ""
    dry_run: bool = False


@dataclass(frozen=True)
class PodSetVerdict:
    name: str
    count: int
    requests: Mapping[str, int]
    request: TopologyRequest
    injected: bool
    flavor: str | None = None
    now: Placement | None = None
    never: Placement | None = None


@dataclass(frozen=True)
class FlavorVerdict:
    """How the workload fares on one TAS flavor of its ClusterQueue ("" = policy default)."""

    flavor: str
    topology: str
    fits_now: bool
    fits_never: bool


@dataclass(frozen=True)
class Decision:
    api_version: str
    kind: str
    namespace: str
    name: str
    allowed: bool
    reason: str  # a short code: fits, waits, never-fits, invalid, exempt, not-a-workload, ...
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()
    audit: Mapping[str, str] = field(default_factory=dict)
    pod_groups: tuple[dict[str, Any], ...] = ()
    pod_sets: tuple[PodSetVerdict, ...] = ()
    topology: str | None = None
    flavors: tuple[FlavorVerdict, ...] = ()
    queue: str | None = None
    cluster_queue: str | None = None
    generation: int = 0


def decide(review: Review, state: ClusterState, policy: Policy) -> Decision:
    obj = review.obj
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    base = Decision(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or review.namespace),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        allowed=True,
        reason="not-a-workload",
        generation=state.generation,
    )
    exempt = base.namespace in policy.exempt_namespaces
    try:
        wl = extract(obj, state.runtimes, base.namespace)
    except InvalidObject as exc:
        return _with(base, "exempt") if exempt else _deny(base, "invalid", str(exc))
    if wl is not None and _controlled(meta):
        return _with(base, "owned")  # a workload's child (a JobSet's Job): judged with its parent
    if wl is None:
        unknown = unknown_workload_reason(obj)
        if unknown:
            note = messages.clip(
                f"tasgate does not know {base.kind} ({base.api_version}); not checked: {unknown}"
            )
            return _with(base, "unknown-kind", warnings=(note,))
        return base
    if exempt:
        return _with(base, "exempt")
    labels = meta.get("labels") or {}
    if raw_meta is not None and not isinstance(raw_meta, Mapping):
        return _deny(base, "invalid", str(FieldError("metadata", "must be an object")))
    if not isinstance(labels, Mapping):
        return _deny(base, "invalid", str(FieldError("metadata.labels", "must be a map of strings")))
    if wl.unresolved:
        return _with(base, "unresolved", warnings=(messages.clip(f"not checked: {wl.unresolved}"),))
    queue = str(labels.get(ann.QUEUE_LABEL) or "") or None
    resolution = resolve(state, base.namespace, queue, policy.default_topology)
    base = replace(base, queue=queue, cluster_queue=resolution.cluster_queue)
    if resolution.problem:
        return _with(base, "kueue-config", warnings=(messages.clip(f"not checked: {resolution.problem}"),))
    if not resolution.targets:
        return _with(base, "no-tas")
    try:
        return _judge(review, base, wl, resolution, state, policy)
    except InvalidObject as exc:  # a template field the scorer reads (nodeSelector, tolerations …)
        return _deny(base, "invalid", str(exc))


def _judge(
    review: Review,
    base: Decision,
    wl: WorkloadPodSets,
    resolution: Resolution,
    state: ClusterState,
    policy: Policy,
) -> Decision:
    first = resolution.targets[0]
    errors = validate_workload(wl, first.topology.levels, state.level_has_nodes)
    if errors:
        return _deny(base, "invalid", str(InvalidObject(errors)))
    ns_labels = state.namespaces.get(base.namespace, {})
    gpus = (
        sum(ps.requests.get(r, 0) * ps.count for ps in wl.pod_sets for r in policy.gpu_resources) * wl.groups
    )
    rule = policy.rule_for(base.namespace, ns_labels, base.queue, wl.total_pods, gpus)
    mutable = wl.runtime is None  # a TrainJob's templates live in its runtime: not ours to patch
    wanted = rule.inject if rule and mutable else None
    verdicts, target, plan, flavors = _score(wl, wanted, resolution.targets)
    base = replace(base, flavors=flavors)
    return _verdict(review, base, wl, plan, verdicts, target, rule if mutable else None, policy)


def _score(
    wl: WorkloadPodSets, wanted: Inject | None, targets: Sequence[Target]
) -> tuple[tuple[PodSetVerdict, ...], Target, inject.Plan, tuple[FlavorVerdict, ...]]:
    """Every flavor in order, each with what the policy injects for it ("tightest" differs per
    flavor); the first where everything fits when empty is where Kueue goes. When none does,
    the flavor that holds the most pods when empty speaks for the denial."""
    scored = []
    for target in targets:
        plan = inject.plan(wl.pod_sets, wanted, target)
        requests = [scorer_request(p, r) for p, r in zip(wl.pod_sets, plan.requests, strict=True)]
        now, never = target.snapshot.now.place(requests), target.snapshot.never.place(requests)
        verdicts = tuple(
            PodSetVerdict(p.name, p.count, p.requests, r, i, target.flavor or None, a, b)
            for p, r, i, a, b in zip(wl.pod_sets, plan.requests, plan.injected, now, never, strict=True)
        )
        scored.append((verdicts, target, plan))
    summaries = tuple(_flavor_summary(v, t) for v, t, _ in scored)
    for verdicts, target, plan in scored:
        if all(v.never and (v.never.fits or v.never.anomaly) for v in verdicts):
            return verdicts, target, plan, summaries
    verdicts, target, plan = max(scored, key=lambda s: sum(_held_when_empty(v) for v in s[0]))
    return verdicts, target, plan, summaries


def _flavor_summary(verdicts: Sequence[PodSetVerdict], target: Target) -> FlavorVerdict:
    return FlavorVerdict(
        flavor=target.flavor,
        topology=target.topology.name,
        fits_now=all(v.now is not None and v.now.fits for v in verdicts),
        fits_never=all(v.never is not None and v.never.fits for v in verdicts),
    )


def _held_when_empty(v: PodSetVerdict) -> int:
    return v.count if v.never is None or v.never.fits else v.never.fit_count


def _verdict(
    review: Review,
    base: Decision,
    wl: WorkloadPodSets,
    plan: inject.Plan,
    verdicts: Sequence[PodSetVerdict],
    target: Target,
    rule: Rule | None,
    policy: Policy,
) -> Decision:
    base = replace(base, pod_sets=tuple(verdicts), topology=target.topology.name)
    warnings = [messages.clip(p) for p in plan.problems]
    denials = []
    for v, p in zip(verdicts, wl.pod_sets, strict=True):
        never, now = v.never, v.now
        if never is None or now is None:
            continue
        level = v.request.level or target.topology.levels[-1]
        if not never.fits and not never.anomaly:
            denials.append(_never_message(v, p, never, level, target, policy))
        elif never.anomaly:
            warnings.append(messages.clip(f'PodSet "{v.name}": {never.reason}'))
        elif not now.fits:
            warnings.append(messages.waits(p.name, p.count, level, now))
    audit = _audit(base, verdicts, target, "never-fits" if denials else ("waits" if warnings else "fits"))
    if denials:
        return replace(
            base,
            allowed=False,
            reason="never-fits",
            message=" ".join(denials),
            audit=audit,
            warnings=tuple(warnings),
        )
    backend = rule.gang if rule else None
    if backend is not None and backend.backend != "none" and wl.groups > 1:
        # Kueue admits each replica group on its own; one PodGroup across them would hold
        # admitted groups back for the others.
        note = f"no gang labels added: its {wl.groups} replica groups are separate gangs"
        warnings.append(messages.clip(note))
        backend = None
    name = gang.group_name(review.obj, review.uid)
    entries: list[Entry] = list(plan.entries) + gang.gang_entries(wl, backend, name)
    groups = gang.pod_groups(wl, backend, base.namespace, entries)
    reason = "waits" if any(v.now and not v.now.fits for v in verdicts) else "fits"
    return replace(
        base,
        allowed=True,
        reason=reason,
        warnings=tuple(warnings),
        patch=tuple(build_patch(review.obj, entries)),
        audit={**audit, "decision": reason},
        pod_groups=tuple(groups),
    )


def _never_message(
    v: PodSetVerdict, p: PodSetTemplate, never: Placement, level: str, target: Target, policy: Policy
) -> str:
    summary = messages.request_summary(v.requests, policy.gpu_resources)
    view = target.snapshot.never
    best = next((row.best_domain for row in never.levels if row.level == level), None)
    limiting = " and ".join(view.limiting_resources(best, v.requests)) if best else None
    spread = TopologyRequest(Mode.PREFERRED, target.topology.levels[0])
    whole = view.place([scorer_request(p, spread)])[0]  # with the PodSet's tolerations and selectors
    total = v.count if whole.fits else whole.fit_count
    spreads = v.request.mode is not Mode.REQUIRED
    return messages.never_fits(v.name, v.count, summary, level, never, limiting, total, spreads)


def _audit(
    base: Decision, verdicts: Sequence[PodSetVerdict], target: Target, decision: str
) -> dict[str, str]:
    levels = sorted({v.request.level or v.request.mode.value for v in verdicts})
    return {
        "decision": decision,
        "topology": target.topology.name,
        "flavor": target.flavor or "policy-default",
        "level": ",".join(levels),
        "fits-now": str(all(v.now is not None and v.now.fits for v in verdicts)).lower(),
        "fits-never": str(all(v.never is not None and v.never.fits for v in verdicts)).lower(),
        "injected": str(any(v.injected for v in verdicts)).lower(),
    }


def _controlled(meta: Mapping[str, Any]) -> bool:
    refs = meta.get("ownerReferences") or []
    return isinstance(refs, list) and any(
        isinstance(r, Mapping) and r.get("controller") is True for r in refs
    )


def _deny(base: Decision, reason: str, message: str) -> Decision:
    return replace(base, allowed=False, reason=reason, message=message, audit={"decision": reason})


def _with(base: Decision, reason: str, warnings: tuple[str, ...] = ()) -> Decision:
    return replace(base, reason=reason, warnings=warnings, audit={"decision": reason})
