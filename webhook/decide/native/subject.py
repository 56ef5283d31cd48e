"""Which objects the native backend judges, and the pod groups each stands for.

A native ``Workload`` or ``PodGroup`` names no pods: the pods that will join each group are
found through the objects around it (the Job its ``controllerRef`` or controlling owner names,
the Workload a PodGroup was stamped from, pods already naming the PodGroup). A Job is judged
natively only when it names no Kueue queue (then it stays Kueue's, suspended until admitted)
and either its pod template names a PodGroup, or the Job controller will make it a gang
(``job_gang_candidate``) and the state shows the native API served or holds no Kueue
configuration at all (a cluster without Kueue: the native API is the only gang there).
A Pod joins through ``spec.schedulingGroup``; a Job's own pods are judged with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.model import annotations as ann
from webhook.model.workloads import owned_by_workload
from webhook.model.workloads.base import count_at, metadata
from webhook.model.workloads.native import (
    BASIC,
    COMPOSITE,
    GANG,
    GroupSpec,
    NativeObject,
    is_native,
    job_gang_candidate,
    read_native,
    scheduling_group,
)
from webhook.model.workloads.native_v1beta1 import JOB_SCHEDULING, job_scheduling
from webhook.state.cluster import ClusterState
from webhook.state.native import Members
from webhook.wire.errors import InvalidObject


@dataclass(frozen=True)
class Supply:
    """How many pods will ever join a group, as far as tasgate can tell: ``certain`` when they
    come from a Job (its parallelism is all it keeps), not when more pods may still be created.
    GangScheduling's PreEnqueue lets no pod of a gang into the queue until ``minCount`` exist."""

    pods: int
    certain: bool
    what: str  # where the figure comes from, for messages


@dataclass(frozen=True)
class Group:
    """One group to place: its policy, ``count`` queued pods of ``pod_spec``'s shape (None: not
    known), besides the ``members`` already bound."""

    spec: GroupSpec
    count: int
    pod_spec: Mapping[str, Any] | None
    spec_path: str  # field path of pod_spec, for errors
    source: str  # where the pods' requests come from, for messages
    members: Members = field(default_factory=Members)
    pod_specs: tuple[Mapping[str, Any], ...] = ()  # each queued pod's spec, when known one by one
    supply: Supply | None = None  # the pods that will exist (None: not known)
    group: NativeObject | None = None  # the PodGroup object, when one exists (v1.37: its priority)


@dataclass(frozen=True)
class Subject:
    kind: str  # "Workload", "PodGroup", "CompositePodGroup", "Job", "Pod"
    groups: tuple[Group, ...]
    missing: str = ""  # why the pods' requests are not known (then not checked)
    parent: NativeObject | None = None  # v1.37: the group's parent CompositePodGroup (or itself)
    notes: tuple[str, ...] = ()  # what could not be checked, said as warnings
    nested: bool = False  # a v1.37 Workload whose templates sit under CompositePodGroup templates


def native_subject(obj: Mapping[str, Any], namespace: str, state: ClusterState) -> Subject | None:
    """The native subject ``obj`` is, or None when the native backend does not judge it."""
    if is_native(obj):
        found = read_native(obj, namespace)
        if found.kind == "Workload":
            return _workload(found, state)
        if found.kind == COMPOSITE:
            return Subject(COMPOSITE, (), parent=found)
        return with_parent(pod_group_subject(found, state), found, state)
    if obj.get("apiVersion") == "batch/v1" and obj.get("kind") == "Job":
        return _job(obj, namespace, state)
    if obj.get("apiVersion") == "v1" and obj.get("kind") == "Pod":
        return _pod(obj, namespace, state)
    return None


def _workload(wl: NativeObject, state: ClusterState) -> Subject:
    """Each template's pods: the controlling Job's, or those of a PodGroup stamped from it."""
    job_name = wl.controller[2] if wl.controller and wl.controller[:2] == ("batch", "Job") else wl.owner_job
    job = state.native.jobs.get((wl.namespace, job_name)) if job_name else None
    groups = []
    for g in wl.groups:
        if job is not None:
            # The Job controller uses a Workload only when the Job controls it (ownerReference);
            # one naming the Job in spec.controllerRef alone it skips ("not owned by this Job").
            groups.append(_from_job(g, job, f"Job {job_name}", certain=wl.owner_job == job_name))
            continue
        stamped = _stamped(wl, g.name, state)
        if stamped is None:
            return Subject("Workload", (), _no_pods("Workload", wl.name, job_name))
        groups.append(stamped)
    return Subject("Workload", tuple(groups), nested=bool(wl.composites))


def _stamped(wl: NativeObject, template: str, state: ClusterState) -> Group | None:
    """The template's group as its PodGroup's pods show it (the Workload's own policy and key)."""
    for (ns, name), pg in sorted(state.native.pod_groups.items()):
        if ns != wl.namespace or pg.template_ref != (wl.name, template):
            continue
        members = state.native.members.get((ns, name))
        if members is not None and members.spec is not None:
            g = next(t for t in wl.groups if t.name == template)
            count = max(g.min_count - members.bound, members.pending)
            source = f'the pods of PodGroup "{name}"'
            supply = _seen(members, f'PodGroup "{name}"')
            return Group(g, count, members.spec, "spec", source, members, members.specs, supply)
    return None


def pod_group_subject(pg: NativeObject, state: ClusterState) -> Subject:
    """A PodGroup's one group, its pods found through the objects around it."""
    g = pg.groups[0]
    members = state.native.members.get((pg.namespace, pg.name), Members())
    naming = _jobs_naming(pg.namespace, pg.name, state)
    if members.spec is not None:
        count = max(g.min_count - members.bound, members.pending)
        source = f"its pods ({members.pending} pending)"
        supply = _seen(members, "it")
        if naming:
            supply = _from_jobs(naming, members)
        group = Group(g, count, members.spec, "spec", source, members, members.specs, supply, pg)
        return Subject("PodGroup", (group,))
    if naming:
        first, maker = naming[0]
        found = replace(_from_job(g, maker, f"Job {first}"), supply=_from_jobs(naming, members), group=pg)
        return Subject("PodGroup", (found,))
    job_name = pg.owner_job
    if job_name is None and pg.template_ref is not None:
        workload = state.native.workloads.get((pg.namespace, pg.template_ref[0]))
        if workload is not None and workload.controller and workload.controller[:2] == ("batch", "Job"):
            job_name = workload.controller[2]
    job = state.native.jobs.get((pg.namespace, job_name)) if job_name else None
    if job is not None:
        certain = job_name == pg.owner_job  # else named only by its Workload's spec.controllerRef
        return Subject("PodGroup", (replace(_from_job(g, job, f"Job {job_name}", certain), group=pg),))
    return Subject(
        "PodGroup", (Group(g, g.min_count, None, "", "", group=pg),), _no_pods("PodGroup", pg.name, job_name)
    )


def _job(obj: Mapping[str, Any], namespace: str, state: ClusterState) -> Subject | None:
    labels = metadata(obj).get("labels")
    if isinstance(labels, Mapping) and labels.get(ann.QUEUE_LABEL):
        return None  # Kueue's: suspended until Kueue admits it
    joined = _job_group(obj, namespace, state)
    if joined is not None:
        return joined
    kueue = state.topologies or state.flavors or state.cluster_queues or state.local_queues
    minor = state.native.minor
    if not job_gang_candidate(obj, minor) or not (state.native.served or not kueue):
        return None
    name = str(metadata(obj).get("name") or metadata(obj).get("generateName") or "")
    if minor >= 37:  # every root Job: a gang when spec.scheduling asks for one, else basic
        asked = job_scheduling(obj) or GroupSpec("", BASIC, 1, None, JOB_SCHEDULING)
        spec = replace(asked, name=f"{name}-pgt-0")
    else:
        spec = GroupSpec(f"{name}-pgt-0", GANG, int(obj["spec"]["parallelism"]), None, "spec.parallelism")
    return Subject("Job", (_from_job(spec, obj, "its pod template"),))


def _job_group(obj: Mapping[str, Any], namespace: str, state: ClusterState) -> Subject | None:
    """A Job whose pod template names a PodGroup itself: its pods join that group."""
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    group = scheduling_group(pod_spec)
    if group is None or not isinstance(pod_spec, Mapping) or not isinstance(spec, Mapping):
        return None
    ns = str(metadata(obj).get("namespace") or namespace)
    pg = state.native.pod_groups.get((ns, group))
    if pg is None:
        return Subject(
            "Job", (), f'PodGroup "{group}" is not in the state; the Job\'s pods wait until it exists'
        )
    count = job_pods(obj)
    members = state.native.members.get((ns, group), Members())
    g = pg.groups[0]
    name = str(metadata(obj).get("name") or metadata(obj).get("generateName") or "")
    supply = _from_jobs(((name, obj),), members)
    found = Group(
        g, max(g.min_count - members.bound, count), pod_spec, "spec.template.spec", "its pod template"
    )
    return with_parent(Subject("Job", (replace(found, members=members, supply=supply, group=pg),)), pg, state)


def _pod(obj: Mapping[str, Any], namespace: str, state: ClusterState) -> Subject | None:
    spec = obj.get("spec")
    group = scheduling_group(spec)
    if group is None or not isinstance(spec, Mapping) or owned_by_workload(obj):
        return None  # a Job's pods are judged with the Job
    ns = str(metadata(obj).get("namespace") or namespace)
    pg = state.native.pod_groups.get((ns, group))
    if pg is None:
        missing = f'PodGroup "{group}" is not in the state; the kube-scheduler holds the pod until it exists'
        return Subject("Pod", (), missing)
    g = pg.groups[0]
    members = state.native.members.get((ns, group), Members())
    name = str(metadata(obj).get("name") or metadata(obj).get("generateName") or "")
    specs = members.specs if name in members.names else (*members.specs, spec)
    count = max(g.min_count - members.bound, len(specs))
    supply = Supply(members.bound + len(specs), False, f"{_pods(members.bound + len(specs))} name it so far")
    found = Group(g, count, spec, "spec", "this pod", members, specs, supply, pg)
    return with_parent(Subject("Pod", (found,)), pg, state)


def with_parent(subject: Subject, pg: NativeObject, state: ClusterState) -> Subject:
    """A v1.37 PodGroup under a CompositePodGroup is placed with its siblings: the parent named."""
    if pg.parent is None:
        return subject
    parent = state.native.composites.get((pg.namespace, pg.parent))
    if parent is None:
        note = (
            f'not checked with its sibling groups: CompositePodGroup "{pg.parent}" is not in the state '
            "(the kube-scheduler holds the group's pods until it exists)"
        )
        return replace(subject, notes=(*subject.notes, note))
    return replace(subject, parent=parent)


def _from_job(g: GroupSpec, job: Mapping[str, Any], source: str, certain: bool = True) -> Group:
    spec = job.get("spec") if isinstance(job.get("spec"), Mapping) else {}
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    count = job_pods(job)
    path = "spec.template.spec"
    name = str(metadata(job).get("name") or "")
    supply = Supply(count, certain, f'Job "{name}" runs at most {_pods(count)} at once')
    return Group(
        g,
        max(count, g.min_count),
        pod_spec if isinstance(pod_spec, Mapping) else None,
        path,
        source,
        supply=supply,
    )


def job_pods(job: Mapping[str, Any]) -> int:
    """The pods a new Job keeps at once: ``min(parallelism, completions)``, read as a Kueue Job's
    PodSet is (`model.workloads.batch.job`): parallelism defaults to 1, a count that is not a
    plausible non-negative integer is an `InvalidObject` naming its field."""
    parallelism = count_at(job, ("spec", "parallelism"), 1)
    return min(parallelism, count_at(job, ("spec", "completions"), parallelism))


def _jobs_naming(namespace: str, group: str, state: ClusterState) -> list[tuple[str, Mapping[str, Any]]]:
    """The Jobs of the state whose pod template names PodGroup ``group``: its pods come from them."""
    found = []
    for (ns, name), job in sorted(state.native.jobs.items()):
        spec = job.get("spec")
        template = spec.get("template") if isinstance(spec, Mapping) else None
        if ns == namespace and isinstance(template, Mapping):
            try:
                if scheduling_group(template.get("spec")) == group:
                    job_pods(job)  # a count that cannot be read leaves the Job out, as a bad group does
                    found.append((name, job))
            except InvalidObject:
                continue
    return found


def _from_jobs(jobs: Sequence[tuple[str, Mapping[str, Any]]], members: Members) -> Supply:
    """The pods Jobs naming a group make: all it will get (its pods already there may be theirs)."""
    made = sum(job_pods(job) for _, job in jobs)
    names = ", ".join(f'"{name}"' for name, _ in jobs)
    total = max(made, members.bound + members.pending)
    label = "Job" if len(jobs) == 1 else "Jobs"
    runs = "runs" if len(jobs) == 1 else "run"
    return Supply(total, True, f"{label} {names} {runs} at most {_pods(total)} at once")


def _seen(members: Members, where: str) -> Supply:
    n = members.bound + members.pending
    return Supply(n, False, f"{_pods(n)} name {where} so far")


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def _no_pods(kind: str, name: str, job: str | None) -> str:
    if job:
        return (
            f'{kind} "{name}": its Job "{job}" is not in the state, so the requests of its pods are unknown'
        )
    return f'{kind} "{name}": no pod that will join it is known, so their requests are unknown'
