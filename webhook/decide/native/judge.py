"""The native backend's verdict: a v1.36 pod group placed as the kube-scheduler's PodGroup cycle
places it (``scorer.native``), on the empty cluster (never) and on the free capacity now.

Same rules as for Kueue: deny what can never fit one domain of the topology key, with the
numbers; admit with a warning what must wait; admit the rest, with the scheduler's predicted
domain in ``podSets[].now.assignment``. The placement differs from Kueue's: the scheduler scores
every domain that holds ``minCount`` pods by ``NodeResourcesFit`` (MostAllocated over the
domain's cpu and memory) plus ``PodGroupPodsCount`` (pods placed), and breaks ties at random.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scorer.model import (
    Assignment,
    DomainAssignment,
    LevelCapacity,
    Mode,
    Placement,
    TopologyRequest,
)
from scorer.native import NativePlacement, place_native
from webhook.decide.native.composite import judge_composite
from webhook.decide.native.inject import inject_native
from webhook.decide.native.preemption import preempting, preemption_text
from webhook.decide.native.priority import mixed_priorities
from webhook.decide.native.request import native_request, on_empty, several_sizes
from webhook.decide.native.subject import Group, Subject
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, PodSetVerdict, all_fit_now
from webhook.model.podrequests import PodDefaults
from webhook.model.quantity import format_quantity
from webhook.model.workloads.native import GANG
from webhook.state.cluster import ClusterState
from webhook.wire.errors import InvalidObject


def decide_native(
    base: Decision, subject: Subject, state: ClusterState, obj: Mapping[str, Any], policy: Policy
) -> Decision:
    """The verdict on one native subject (``decide.native.subject``), with what the policy adds."""
    if subject.missing:
        return _with(base, Reason.NATIVE_UNKNOWN, True, warnings=(f"not checked: {subject.missing}",))
    try:
        injected = inject_native(obj, base.namespace, subject, policy, state)
        defaults = state.pod_defaults(base.namespace)
        verdicts = tuple(_judge(g, state, defaults) for g in injected.subject.groups)
        composite = judge_composite(injected.subject, state, defaults)
    except InvalidObject as exc:
        return _with(base, Reason.INVALID, False, message=str(exc))
    groups = injected.subject.groups
    notes = [*injected.warnings, *subject.notes, *composite.notes]
    if composite.placements:  # a child is placed inside its composite's domain
        verdicts = tuple(_inside(g, v, composite.placements) for g, v in zip(groups, verdicts, strict=True))
    if subject.kind == "Workload":
        verdicts = _stamped_without_key(groups, verdicts, state, defaults, notes)
    base = replace(base, warnings=(*base.warnings, *notes), patch=injected.patch)
    base = replace(base, pod_sets=verdicts, topology=None)
    short = [(g, g.supply) for g in groups if _short(g)]
    denials = [_too_few_text(g) for g, supply in short if supply is not None and supply.certain]
    never = [_never_text(v, g, defaults) for g, v in zip(groups, verdicts, strict=True) if _never(v)]
    if subject.nested:  # a composite's gang may be met by its other child groups
        notes_never = tuple(f"{text} Its CompositePodGroup may still run without it." for text in never)
        base, never = replace(base, warnings=(*base.warnings, *notes_never)), []
    denials += never
    denials += [*mixed_priorities(groups, state), *([composite.never] if composite.never else [])]
    if denials:
        return _with(base, Reason.NEVER_FITS, False, message=" ".join(denials))
    waits = tuple(_wait_text(v) for v in verdicts if not v.fits_now and not _never(v))
    preempts = [(v.name, (v.native or {}).get("preempts")) for v in verdicts]
    waits += tuple(preemption_text(name, victims) for name, victims in preempts if victims)
    waits += tuple(text for text in (composite.wait, composite.preempts) if text)
    waits += tuple(_too_few_text(g) for g, supply in short if supply is not None and not supply.certain)
    reason = Reason.FITS if all_fit_now(verdicts) and not composite.wait else Reason.WAITS
    return _with(base, reason, True, warnings=(*base.warnings, *waits))


def _stamped_without_key(
    groups: tuple[Group, ...],
    verdicts: tuple[PodSetVerdict, ...],
    state: ClusterState,
    defaults: PodDefaults,
    notes: list[str],
) -> tuple[PodSetVerdict, ...]:
    """A Workload's templates as the PodGroups the scheduler reads may be: without the key.

    The kube-scheduler reads only a PodGroup's own ``schedulingConstraints``; the Job controller,
    the one stamper in v1.36.5, copies only ``schedulingPolicy`` into it, and a PodGroup written by
    hand need not repeat the template's key. So a template that never fits one domain of its key
    is no denial (its PodGroup is denied at its own CREATE if it carries the key): a warning with
    the numbers, and the verdict the template's policy gets with no key at all.
    """
    out = []
    for g, v in zip(groups, verdicts, strict=True):
        if g.spec.key is None or v.never is None or v.never.fits:
            out.append(v)
            continue
        notes.append(
            f'pod group template "{g.spec.name}": even on the empty cluster {v.never.reason}, so a '
            f'PodGroup stamped from it with topology key "{g.spec.key}" would never be scheduled; '
            "the kube-scheduler reads the PodGroup's own constraints (the Job controller copies none)"
        )
        out.append(_judge(replace(g, spec=replace(g.spec, key=None)), state, defaults))
    return tuple(out)


def _inside(g: Group, v: PodSetVerdict, placements: Mapping[str, NativePlacement]) -> PodSetVerdict:
    found = placements.get(g.spec.name)
    if found is None:
        return v
    return replace(v, now=_placement(g, found, g.members.bound), native=_native_json(g, found))


def _never(v: PodSetVerdict) -> bool:
    return v.never is not None and not v.never.fits


def _short(g: Group) -> bool:
    """A gang with fewer pods to come than its minCount: GangScheduling's PreEnqueue keeps every
    one of them out of the scheduling queue until ``minCount`` exist, so none is ever tried."""
    return g.spec.policy == GANG and g.supply is not None and g.supply.pods < g.spec.min_count


def _too_few_text(g: Group) -> str:
    assert g.supply is not None
    head = f'pod group "{g.spec.name}" (gang minCount {g.spec.min_count})'
    gate = f"the kube-scheduler tries none of its pods until {g.spec.min_count} exist"
    if g.supply.certain:
        return f"{head} can never be scheduled: {g.supply.what}, fewer than its minCount; {gate}."
    return f"{head} waits for more pods: {g.supply.what}; {gate}"


def _judge(g: Group, state: ClusterState, defaults: PodDefaults) -> PodSetVerdict:
    """One group placed now and on the empty cluster (``native_request`` reads its pods)."""
    req = native_request(g, state, defaults)
    now = place_native(state.nodes, req, state.usage, empty=False, nonzero=state.native.nonzero)
    never = place_native(state.nodes, on_empty(req), None, True)
    preempted = preempting(g, req, state) if not now.fits and never.fits else None
    if preempted is not None:
        now = preempted[0]
    request = TopologyRequest(Mode.REQUIRED if g.spec.key else Mode.UNCONSTRAINED, g.spec.key)
    return PodSetVerdict(
        name=g.spec.name,
        count=g.count + g.members.bound,
        requests=req.requests,
        request=request,
        injected=False,
        now=_placement(g, now, g.members.bound, req.bound_domain),
        never=_placement(g, never),
        min_count=g.spec.min_count,
        native={**_native_json(g, now), **({"preempts": preempted[1]} if preempted else {})},
    )


def _placement(g: Group, p: NativePlacement, bound: int = 0, confined: str | None = None) -> Placement:
    levels = (g.spec.key,) if g.spec.key else ()
    best = max(p.domains, key=lambda d: d.capacity, default=None)
    row = LevelCapacity(
        level=g.spec.key or "(any node)",
        max_pods=best.capacity if best else 0,
        max_slices=best.capacity if best else 0,
        fitting_domains=sum(d.feasible for d in p.domains),
        domains=len(p.domains),
        best_domain=(best.value,) if best and g.spec.key else None,
    )
    assignment = None
    if p.fits and p.domain is not None:
        values = (p.domain,) if g.spec.key else ()
        assignment = Assignment(levels, (DomainAssignment(values, p.count),))
    return Placement(
        name=g.spec.name,
        fits=p.fits,
        assignment=assignment,
        reason="" if p.fits else _shortfall(g, p, bound, confined),
        fit_count=best.capacity if best else 0,
        total_count=g.spec.min_count,
        levels=(row,),
        total_nodes=p.total_nodes,
    )


def _shortfall(g: Group, p: NativePlacement, bound: int, confined: str | None) -> str:
    """Why no domain is feasible, in words that stay true when the best domain is big enough
    and something else stops it (the bound pods' domain, the per-pod order of mixed shapes)."""
    where = f'one "{g.spec.key}" domain' if g.spec.key else "the cluster"
    most = max((d.capacity for d in p.domains), default=0)
    unlabelled = p.total_nodes - p.labelled_nodes
    note = f" ({unlabelled} of {p.total_nodes} nodes lack the label)" if g.spec.key and unlabelled else ""
    if not p.domains:
        return f'no node carries the label "{g.spec.key}"{note}'
    if g.spec.policy != GANG:
        return f"{where} holds none of its pods{note}"
    need = g.spec.min_count - bound
    if confined is not None:
        held = next((d.capacity for d in p.domains if d.value == confined), 0)
        if confined == "" or held < need:
            at = f'"{confined}"' if confined else "no single domain"
            return (
                f"its {_pods(bound)} already bound sit in {at}, which holds {held} of the {need} more needed"
            )
    if most < need:
        more = " more" if bound else ""
        return f"{where} holds at most {most}{more} of the {_pods(need)} its gang needs{note}"
    which = f'no "{g.spec.key}" domain takes' if g.spec.key else "the cluster does not take"
    return (
        f"{which} {_pods(need)} at once: room for {most} pods, but not for its pods as the "
        f"kube-scheduler tries them (in priority order, each on its least allocated node){note}"
    )


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def _never_text(v: PodSetVerdict, g: Group, defaults: PodDefaults) -> str:
    assert v.never is not None
    req = ", ".join(f"{r}: {format_quantity(r, n)}" for r, n in sorted(v.requests.items())) or "no requests"
    if several_sizes(g, defaults):
        req = f"{len(g.pod_specs)} pods of several sizes, tried in the kube-scheduler's order"
    else:
        req = f"per pod {req}"
    policy = f"gang minCount {v.min_count}" if (v.native or {}).get("policy") == GANG else "basic"
    return (
        f'pod group "{v.name}" ({policy}, {req}) can never be scheduled: '
        f"even on the empty cluster {v.never.reason}; the kube-scheduler would leave it pending forever."
    )


def _wait_text(v: PodSetVerdict) -> str:
    now = v.now.reason if v.now is not None else ""
    return f'pod group "{v.name}" must wait: now {now}; it fits when capacity frees up'


def _native_json(g: Group, p: NativePlacement) -> dict[str, Any]:
    """What the scheduler's PodGroup cycle would weigh, now: every domain's figures."""
    return {
        "backend": "kube-scheduler",
        "policy": g.spec.policy,
        "topologyKey": g.spec.key,
        "podsFrom": g.source,
        "scheduled": g.members.bound,
        "tiedDomains": list(p.tied),
        "domains": [
            {
                "value": d.value,
                "capacity": d.capacity,
                "placed": d.placed,
                "feasible": d.feasible,
                "nodeResourcesFit": d.fit_score,
                "podGroupPodsCount": d.pods_score,
            }
            for d in p.domains
        ],
    }


def _with(
    base: Decision,
    reason: Reason,
    allowed: bool,
    message: str = "",
    warnings: tuple[str, ...] | None = None,
) -> Decision:
    audit = {"decision": "allow" if allowed else "deny", "reason": reason.value, "backend": "native"}
    return replace(
        base,
        patch=base.patch if allowed else (),
        allowed=allowed,
        reason=reason,
        message=message,
        warnings=base.warnings if warnings is None else warnings,
        audit=audit,
    )
