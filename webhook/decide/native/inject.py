"""What a policy rule with ``gang.backend: native`` adds: the topology constraint of a native
Workload or PodGroup the user (or the Job controller) left without one.

The Job controller makes a Workload and a PodGroup with a gang policy and no topology, and it
copies only ``schedulingPolicy`` from the Workload into the PodGroup, while the kube-scheduler
reads the PodGroup's own ``schedulingConstraints``. Both are immutable after creation, so the
constraint is added on each one's CREATE: on the PodGroup it takes effect, on the Workload it
keeps the two saying the same. A key the user wrote is never overwritten. ``level: tightest``
is the deepest level of the policy's ``defaultTopology`` whose largest domain holds the group
on the empty cluster (bounded by ``loosestLevel``); the native API has no preferred topology,
so a ``preferred`` rule adds nothing and says so. A Job the Job controller will make a gang of
is judged with the key its PodGroup will get (nothing is patched on the Job itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scorer.native import NativeRequest, place_native
from webhook.decide.native.ports import one_per_node
from webhook.decide.native.subject import Group, Subject
from webhook.decide.patch import pointer
from webhook.decide.policy import TIGHTEST, Policy, Rule
from webhook.decide.policy import Subject as Who
from webhook.model.podrequests import NO_DEFAULTS, PodDefaults, pod_requests
from webhook.model.workloads.native_v1beta1 import JOB_SCHEDULING
from webhook.state.cluster import ClusterState

BACKEND = "native"
# The group a Job controller will make (`native_subject._job`): v1.36's from the Job's counts,
# v1.37's from its spec.scheduling. Its PodGroup gets the key at its own CREATE (this webhook).
JOB_GANG = frozenset({"spec.parallelism", JOB_SCHEDULING})


@dataclass(frozen=True)
class Injected:
    subject: Subject
    patch: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()


def inject_native(
    obj: Mapping[str, Any], namespace: str, subject: Subject, policy: Policy, state: ClusterState
) -> Injected:
    """The subject with the policy's topology key on each group that has none, and the patch."""
    rule = rule_for(namespace, subject, policy, state)
    if rule is None or subject.kind == "Pod" or subject.missing:
        return Injected(subject)
    if rule.inject.mode != "required":
        note = "no topology added: the native API has only a required topology (policy mode preferred)"
        return Injected(subject, (), (note,) if rule.inject.mode == "preferred" else ())
    groups, patch, warnings = [], [], []
    for i, g in enumerate(subject.groups):
        if (
            g.spec.key is not None
            or g.pod_spec is None
            or (subject.kind == "Job" and g.spec.path not in JOB_GANG)
        ):
            groups.append(g)
            continue
        key, problem = inject_key(g, rule, policy, state, state.pod_defaults(namespace))
        if key is None:
            warnings.append(problem)
            groups.append(g)
            continue
        groups.append(replace(g, spec=replace(g.spec, key=key)))
        if subject.kind != "Job":  # a Job is judged with the key its PodGroup will be given
            patch.append(_op(obj, i if subject.kind == "Workload" else None, key))
    return Injected(replace(subject, groups=tuple(groups)), tuple(patch), tuple(warnings))


def rule_for(namespace: str, subject: Subject, policy: Policy, state: ClusterState) -> Rule | None:
    """The policy rule that selects the native backend for this subject (matched on its pods and
    GPUs, as Kueue workloads are), else None; `native_create` asks the same question."""
    pods = sum(g.count + g.members.bound for g in subject.groups)
    gpus = per_pod = 0
    for g in subject.groups:
        if g.pod_spec is None:
            continue
        requests = pod_requests(g.pod_spec, g.spec_path)
        mine = sum(requests.get(r, 0) for r in policy.gpu_resources)
        gpus += mine * (g.count + g.members.bound)
        per_pod = max(per_pod, mine)
    who = Who(namespace, state.namespaces.get(namespace, {}), None, pods, gpus, per_pod)
    rule = policy.rule_for(who)
    return rule if rule is not None and rule.gang.backend == BACKEND else None


def inject_key(
    g: Group, rule: Rule, policy: Policy, state: ClusterState, defaults: PodDefaults = NO_DEFAULTS
) -> tuple[str | None, str]:
    """The topology key a ``required`` rule gives group ``g`` (its level, or the tightest that
    holds it on the empty cluster), or None and the warning saying why none is added. The group
    is sized as the verdict sizes it (``defaults``: the namespace's LimitRange, host ports), so
    the level chosen is never one the verdict then finds too small."""
    if rule.inject.level != TIGHTEST:
        return rule.inject.level, ""
    levels: Sequence[str] = policy.default_topology.levels if policy.default_topology else ()
    if not levels:
        return None, "no topology added: level tightest needs the policy's defaultTopology levels"
    assert g.pod_spec is not None
    requests = pod_requests(g.pod_spec, g.spec_path, defaults)
    ports = one_per_node(g.pod_specs or [g.pod_spec])
    fitting = [
        key
        for key in levels
        if place_native(
            state.nodes,
            NativeRequest(
                g.spec.name, g.count + g.members.bound, g.spec.min_count, requests, key, host_ports=ports
            ),
            None,
            True,
        ).fits
    ]
    loosest = rule.inject.loosest_level
    if loosest is not None and loosest in levels:
        allowed = levels[levels.index(loosest) :]
        tight = [k for k in fitting if k in allowed]
        return (tight[-1] if tight else loosest), ""
    if not fitting:
        return None, f'no topology added: no single "{levels[0]}" domain ever holds this gang'
    return fitting[-1], ""


def _op(obj: Mapping[str, Any], template: int | None, key: str) -> dict[str, Any]:
    """One JSON Patch op adding ``topology: [{key}]`` where the object has no constraint yet."""
    spec: Any = obj.get("spec")
    base: tuple[str | int, ...] = ("spec",)
    holder: Any = spec
    if template is not None:
        base = ("spec", "podGroupTemplates", template)
        holder = spec["podGroupTemplates"][template]
    constraints = holder.get("schedulingConstraints") if isinstance(holder, Mapping) else None
    topology = [{"key": key}]
    if isinstance(constraints, Mapping):
        return {"op": "add", "path": pointer((*base, "schedulingConstraints", "topology")), "value": topology}
    return {"op": "add", "path": pointer((*base, "schedulingConstraints")), "value": {"topology": topology}}
