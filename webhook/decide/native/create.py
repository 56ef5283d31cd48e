"""The native backend for kinds the Job controller does not make a gang of: tasgate creates the
Workload and PodGroup, and points every member pod template at the PodGroup.

With ``WorkloadWithJob`` the Job controller makes the Workload and PodGroup itself only for an
Indexed Job with ``parallelism == completions > 1`` (``native_inject`` adds the key to those). A
JobSet, LeaderWorkerSet, RayJob, a Kubeflow job, or a Job that is no gang candidate gets none,
so a policy rule with ``gang.backend: native`` would otherwise add no gang at all. For those,
when the native API is served and the workload names no Kueue queue (never two gang backends on
one workload), the mutating patch sets ``spec.schedulingGroup: {podGroupName: <name>-gang}`` on
every member template (the Job controller then leaves even a Job alone: its template names a
group), and the decision hands the live reconciler a Workload ``<name>`` (one template ``gang``:
``gang.minCount`` = every member pod, the policy's key when the rule is ``required``) and the
PodGroup ``<name>-gang`` stamped from it. The kube-scheduler reads the PodGroup's own
constraints, so both carry the key. The verdict is the one a Workload of that shape gets
(``decide_native``): never-fits is denied with the numbers, and nothing is created then.

All replicas of the workload form one gang (a LeaderWorkerSet's groups, a JobSet's replicated
Jobs): the native API's one group per PodGroup, as tasgate has no per-replica PodGroup naming.
A template that already names a group is the user's (or, named ``<name>-gang``, ours from an
earlier review of the same object: judged again, nothing patched).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from webhook.decide.gangs.plan import members
from webhook.decide.gates import opted_out
from webhook.decide.native.inject import inject_key, rule_for
from webhook.decide.native.judge import decide_native
from webhook.decide.native.subject import Group, Subject
from webhook.decide.patch import MapEntry, build_patch
from webhook.decide.policy import Policy
from webhook.decide.verdicts import Decision, Review
from webhook.model import annotations as ann
from webhook.model.paths import field_path
from webhook.model.podrequests import pod_requests
from webhook.model.workloads import PodSetTemplate, WorkloadPodSets, extract, owned_by_workload
from webhook.model.workloads.base import metadata
from webhook.model.workloads.native import (
    GANG,
    NATIVE_API,
    V1BETA1,
    GroupSpec,
    job_gang_candidate,
    scheduling_group,
)
from webhook.model.workloads.registry import ADAPTERS
from webhook.state.cluster import ClusterState
from webhook.wire.errors import InvalidObject

SUFFIX = "-gang"  # the PodGroup's name: the workload's name and this
TEMPLATE = "gang"  # the Workload's one podGroupTemplate
MAX_NAME = 253
# Not ours to point at a group: a lone Pod is no gang; a TrainJob's templates live in its runtime.
SKIPPED_KINDS = frozenset({"Pod", "TrainJob"})


def pod_group_name(workload: str) -> str:
    return f"{workload}{SUFFIX}"


def create_native(review: Review, base: Decision, state: ClusterState, policy: Policy) -> Decision | None:
    """The decision for a workload tasgate makes a native gang of, or None when it makes none
    (the rest of the decision path then judges the object as before)."""
    wl = _candidate(review, base, state, policy)
    if wl is None:
        return None
    name = pod_group_name(base.name)
    templates = members(wl)
    try:
        named = {scheduling_group(_pod_spec(p)) for p in templates}
    except InvalidObject:
        return None  # the decision path denies the bad field
    if named not in ({None}, {name}):
        return None  # a template names a group of the user's own
    group = _group(wl, templates, name)
    rule = rule_for(base.namespace, Subject(wl.kind, (group,)), policy, state)
    if rule is None:
        return None
    notes: list[str] = []
    if rule.inject.mode == "required":
        key, problem = inject_key(group, rule, policy, state, state.pod_defaults(base.namespace))
        group = replace(group, spec=replace(group.spec, key=key))
        notes += [problem] if key is None else []
    elif rule.inject.mode == "preferred":
        notes.append("no topology added: the native API has only a required topology (policy mode preferred)")
    judged = decide_native(
        replace(base, warnings=(*base.warnings, *notes)),
        Subject(wl.kind, (group,)),
        state,
        review.obj,
        replace(policy, rules=()),  # the key is chosen above: nothing is injected twice
    )
    if not judged.allowed:
        return judged
    entries = [
        MapEntry((*p.template_path, "spec"), "schedulingGroup", {"podGroupName": name}) for p in templates
    ]
    api = V1BETA1 if state.native.minor >= 37 else NATIVE_API  # the version the cluster serves
    objects = native_objects(review.obj, base.namespace, group.spec.min_count, group.spec.key, api)
    audit = {**judged.audit, "native-group": name}
    return replace(judged, patch=tuple(build_patch(review.obj, entries)), pod_groups=objects, audit=audit)


def _candidate(review: Review, base: Decision, state: ClusterState, policy: Policy) -> WorkloadPodSets | None:
    """The workload's PodSets when tasgate may make it a native gang (a new object of a kind the
    Job controller leaves alone, the API served, no Kueue queue, no operator's own gang)."""
    obj = review.obj
    if review.old_obj is not None or (base.api_version, base.kind) not in ADAPTERS:
        return None  # an UPDATE: the templates are immutable, the group made at CREATE
    if base.kind in SKIPPED_KINDS or job_gang_candidate(obj, state.native.minor) or owned_by_workload(obj):
        return None
    labels = metadata(obj).get("labels")
    queued = isinstance(labels, Mapping) and bool(labels.get(ann.QUEUE_LABEL))
    named = bool(metadata(obj).get("name"))  # generateName: the name is not known at /mutate
    if queued or not named or opted_out(obj) or not state.native.served:
        return None
    if base.namespace in policy.exempt_namespaces or len(pod_group_name(base.name)) > MAX_NAME:
        return None
    try:
        wl = extract(obj, state.runtimes, base.namespace, state.pod_defaults(base.namespace))
    except InvalidObject:
        return None
    if wl is None or wl.unresolved or wl.operator_gang is not None or not members(wl):
        return None
    return wl


def _pod_spec(p: PodSetTemplate) -> Mapping[str, Any] | None:
    spec = p.template.get("spec")
    return spec if isinstance(spec, Mapping) else None


def _group(wl: WorkloadPodSets, templates: Sequence[PodSetTemplate], name: str) -> Group:
    """Every member pod of every replica as one gang; one spec per pod when the templates ask
    for different amounts (the scheduler's per-pod cycle), else the first template's."""
    total = sum(p.count for p in templates) * wl.groups
    first = templates[0]
    spec = GroupSpec(name, GANG, total, None, "spec.schedulingGroup")
    pod_specs: tuple[Mapping[str, Any], ...] = ()
    shapes = {_shape(p) for p in templates}
    if len(shapes) > 1:
        pod_specs = tuple(_pod_spec(p) or {} for p in templates for _ in range(p.count * wl.groups))
    path = field_path((*first.template_path, "spec"))
    return Group(spec, total, _pod_spec(first), path, "its pod templates", pod_specs=pod_specs)


def _shape(p: PodSetTemplate) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(pod_requests(_pod_spec(p) or {}, "spec").items()))


def native_objects(
    obj: Mapping[str, Any], namespace: str, min_count: int, key: str | None, api: str = NATIVE_API
) -> tuple[dict[str, Any], ...]:
    """The Workload (first: v1.36's ``PodGroupWorkloadExists`` refuses a PodGroup before its
    Workload) and the PodGroup stamped from it, as ``k8s.io/api/scheduling/<api's version>`` spells
    them (v1beta1: ``workloadRef``). The reconciler adds the ownerReference to the workload (its
    uid is known once it is stored)."""
    name = str(metadata(obj).get("name"))
    group, _, _ = str(obj.get("apiVersion")).rpartition("/")

    def policy() -> dict[str, Any]:
        return {"gang": {"minCount": min_count}}

    def constraints() -> dict[str, Any]:
        return {"schedulingConstraints": {"topology": [{"key": key}]}} if key else {}

    ref = (
        {"workloadRef": {"workloadName": name, "templateName": TEMPLATE}}
        if api != NATIVE_API
        else {"podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": TEMPLATE}}}
    )
    workload = {
        "apiVersion": api,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "controllerRef": {"apiGroup": group, "kind": str(obj.get("kind")), "name": name},
            "podGroupTemplates": [{"name": TEMPLATE, "schedulingPolicy": policy(), **constraints()}],
        },
    }
    pod_group = {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {"name": pod_group_name(name), "namespace": namespace},
        "spec": {
            **ref,
            "schedulingPolicy": policy(),
            **constraints(),
        },
    }
    return workload, pod_group
