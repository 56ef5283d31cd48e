"""A v1.37 group's siblings under its CompositePodGroup, placed together (``scorer.native_composite``).

A PodGroup under a CompositePodGroup is never placed alone: the kube-scheduler's cycle takes the
composite, tries each domain of its topology key and places the child groups inside it, needing
``minGroupCount`` of them. So a child that fits on its own may still never run (no block holds
enough of its siblings), and one that fits now may have to wait. tasgate judges one level: the
group's parent and the parent's PodGroups; a deeper tree is said unchecked, never denied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scorer.native import NativePlacement
from scorer.native_composite import CompositePlacement, place_composite
from webhook.decide.native.preemption import freed_usage
from webhook.decide.native.request import native_request, on_empty
from webhook.decide.native.subject import Group, Subject, pod_group_subject
from webhook.model.podrequests import PodDefaults
from webhook.model.workloads.native import NativeObject
from webhook.state.cluster import ClusterState

LAST = "\uffff"  # a group not yet created sorts after every creation time


@dataclass(frozen=True)
class CompositeFinding:
    never: str = ""  # a denial: no domain ever holds minGroupCount children
    wait: str = ""  # a warning: none holds them now
    preempts: str = ""  # a warning: one holds them once lower-priority pods are evicted
    notes: tuple[str, ...] = ()  # what was not checked
    # Each child's placement inside the composite's chosen domain now: where the scheduler binds it.
    placements: Mapping[str, NativePlacement] = field(default_factory=dict)


def judge_composite(subject: Subject, state: ClusterState, defaults: PodDefaults) -> CompositeFinding:
    """The composite verdict for ``subject`` (a child group, or the CompositePodGroup itself)."""
    root = subject.parent
    if root is None:
        return CompositeFinding()
    if root.parent is not None:
        note = f'not checked with its sibling groups: CompositePodGroup "{root.name}" is itself nested'
        return CompositeFinding(notes=(note,))
    children, missing = _children(root, subject, state)
    if missing:
        return CompositeFinding(notes=(missing,))
    need = root.groups[0].min_count
    if len(children) < need:
        note = (
            f'CompositePodGroup "{root.name}" waits for more child groups: {len(children)} of its '
            f"minGroupCount {need} exist; the kube-scheduler tries none of them before"
        )
        return CompositeFinding(notes=(note,))
    reqs = [native_request(g, state, defaults) for g in children]
    key = root.groups[0].key
    never = place_composite(state.nodes, key, need, [on_empty(r) for r in reqs], None, True)
    if not never.fits and not never.uncertain:
        return CompositeFinding(never=_never_text(root, len(children), never))
    now = place_composite(state.nodes, key, need, reqs, state.usage, False, state.native.nonzero)
    if now.fits:
        return CompositeFinding(placements=_inside(now))
    freed = freed_usage(children[0], state)
    after = place_composite(state.nodes, key, need, reqs, freed[0], False) if freed is not None else None
    if freed is not None and after is not None and after.fits:
        return CompositeFinding(preempts=_preempts_text(root, freed[1]), placements=_inside(after))
    return CompositeFinding(wait=_wait_text(root, now))


def _inside(p: CompositePlacement) -> dict[str, NativePlacement]:
    chosen = p.chosen
    return dict(chosen.placements) if chosen is not None else {}


def _children(root: NativeObject, subject: Subject, state: ClusterState) -> tuple[list[Group], str]:
    """The root's PodGroups in ``GetChildGroups`` order (creation time, then name), the reviewed
    one as the subject has it; or why their pods are not known."""
    own = {g.group.name: g for g in subject.groups if g.group is not None}
    found: dict[str, tuple[NativeObject, Group | None]] = {}
    for (ns, name), pg in state.native.pod_groups.items():
        if ns == root.namespace and pg.parent == root.name:
            found[name] = (pg, own.get(name))
    for name, g in own.items():
        if g.group is not None and g.group.parent == root.name:
            found[name] = (found.get(name, (g.group, g))[0], g)
    ordered = sorted(found.values(), key=lambda item: (item[0].created or LAST, item[0].name))
    groups = []
    for pg, mine in ordered:
        if mine is not None:
            groups.append(mine)
            continue
        sub = pod_group_subject(pg, state)
        if sub.missing or not sub.groups:
            return [], f"not checked with its sibling groups: {sub.missing or pg.name}"
        groups.append(sub.groups[0])
    return groups, ""


def _never_text(root: NativeObject, children: int, p: CompositePlacement) -> str:
    where = f'one "{p.key}" domain' if p.key else "the cluster"
    unlabelled = "" if p.domains else f'; no node carries the label "{p.key}"'
    best = sorted(p.domains, key=lambda d: (-len(d.placed), d.value))[:3]
    shown = "; ".join(f"{d.value}: {', '.join(d.placed) or 'none'}" for d in best)
    return (
        f'CompositePodGroup "{root.name}" (gang minGroupCount {p.min_groups} of {children} child '
        f"groups, in {where}) can never be scheduled: even on the empty cluster {where} holds at "
        f"most {p.most} of its child groups together ({shown}){unlabelled}; the kube-scheduler "
        "would leave all of them pending forever."
    )


def _wait_text(root: NativeObject, p: CompositePlacement) -> str:
    where = f'"{p.key}" domain' if p.key else "placement"
    return (
        f'CompositePodGroup "{root.name}" must wait: now no {where} holds {p.min_groups} of its '
        f"child groups together (at most {p.most}); it fits when capacity frees up"
    )


def _preempts_text(root: NativeObject, victims: int) -> str:
    return (
        f'CompositePodGroup "{root.name}" fits now only by preemption: the kube-scheduler evicts '
        f"lower-priority pods for it (at most {victims} of them), then binds its groups"
    )
