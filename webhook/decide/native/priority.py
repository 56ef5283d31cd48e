"""Kubernetes v1.37's one-priority rule for a pod group (``validatePodGroup``,
``pkg/scheduler/schedule_one_podgroup.go``): every pod of a group must have the priority of the
group's *root* (the PodGroup, or the top CompositePodGroup above it), as the Priority admission
plugin resolved both from their classes. A group breaking it is refused whole at every cycle
(``SchedulerError``: "all pods in a single pod group should have the same priority as the pod
group's priority") and none of its pods is ever bound, so tasgate denies it with the two numbers.
v1.36 has no such rule (it orders the group's pods by priority instead).

The preemption policy must match too; PriorityClasses' ``preemptionPolicy`` is not in the state,
so only a pod's explicit ``spec.preemptionPolicy`` against the group's is compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decide.native.request import pod_priority
from webhook.decide.native.subject import Group
from webhook.model.workloads.native import NativeObject
from webhook.state.cluster import ClusterState


def mixed_priorities(groups: tuple[Group, ...], state: ClusterState) -> list[str]:
    """A denial text per v1.37 group whose pods do not all share its root's priority."""
    found = []
    for g in groups:
        if g.group is None or g.group.minor < 37:
            continue
        root = _root(g.group, state)
        want = _group_priority(root, state)
        for spec in g.pod_specs or ((g.pod_spec,) if g.pod_spec is not None else ()):
            text = _differs(g, root, want, spec, state)
            if text:
                found.append(text)
                break
    return found


def _differs(g: Group, root: NativeObject, want: int, spec: Mapping[str, Any], state: ClusterState) -> str:
    have = pod_priority(spec, state)
    where = f'{root.kind} "{root.name}"' if root is not g.group else "the group"
    if have != want:
        klass = spec.get("priorityClassName")
        named = f' (PriorityClass "{klass}")' if klass else ""
        return (
            f'pod group "{g.spec.name}" can never be scheduled: its pods have priority {have}{named} '
            f"but {where} has {want}; the kube-scheduler refuses the whole group at every attempt "
            "(all pods in a single pod group should have the same priority as the pod group's "
            "priority) and binds none of its pods."
        )
    policy = spec.get("preemptionPolicy")
    if policy in ("Never", "PreemptLowerPriority") and (policy != "Never") != root.preempts:
        mine = "PreemptLowerPriority" if root.preempts else "Never"
        return (
            f'pod group "{g.spec.name}" can never be scheduled: its pods have preemptionPolicy '
            f"{policy} but {where} has {mine}; the kube-scheduler refuses the whole group at every "
            "attempt and binds none of its pods."
        )
    return ""


def _root(pg: NativeObject, state: ClusterState) -> NativeObject:
    """The top of the group's tree as far as the state holds it (a missing parent ends it)."""
    seen = {pg.name}
    node = pg
    while node.parent is not None and node.parent not in seen:
        parent = state.native.composites.get((node.namespace, node.parent))
        if parent is None:
            break
        seen.add(parent.name)
        node = parent
    return node


def _group_priority(group: NativeObject, state: ClusterState) -> int:
    """``spec.priority`` as admission set it; a group not yet admitted: its class's, else default."""
    if group.priority is not None:
        return group.priority
    found = state.priority_classes.pod.get(group.priority_class)
    return found[0] if found is not None else state.priority_classes.default_value()


def group_rank(g: Group, state: ClusterState) -> tuple[int, bool] | None:
    """A v1.37 group's (priority, whether it may preempt), as its root's; for a group the Job
    controller will make, its pods' (it copies their class). None before v1.37: no group
    preemption to predict."""
    if g.group is not None:
        if g.group.minor < 37:
            return None
        root = _root(g.group, state)
        return _group_priority(root, state), root.preempts
    if state.native.minor < 37 or g.pod_spec is None:
        return None
    return pod_priority(g.pod_spec, state), g.pod_spec.get("preemptionPolicy") != "Never"
