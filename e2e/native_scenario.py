"""The cluster and the workloads of the native-scheduling suite (tests/e2e_native, capture_native_objects).

Twelve kwok nodes of 8 GPUs in 2 blocks × 2 racks × 3 hosts, some already partly used by bound
"blocker" pods so that *fits now* and *fits when empty* differ, with a different free capacity in
every rack and block (16, 20, 12, 22 GPUs free per rack; 36 and 34 per block): the v1.36.5
scheduler picks among the domains that can hold a group by its placement score, and distinct free
capacities keep that choice from being a tie it breaks at random.

Every pod asks for 4 cpu and 32 GiB per GPU, the node's own ratio (32 cpu, 256 GiB, 8 GPUs). The
scheduler's placement scorer NodeResourcesFit (MostAllocated over its scoring resources, cpu and
memory by default) never looks at GPUs; with proportional requests its choice is the GPU-fullest
domain, which is also what a GPU-aware prediction computes.

The object builders take ``k8s=`` (default: the harness's selected version, e2e/native_k8s.py) and
write that version's shapes: v1.36's ``scheduling.k8s.io/v1alpha2`` with
``podGroupTemplateRef``, or v1.37's ``v1beta1`` with ``workloadRef`` and a Job that opts into a
gang with ``spec.scheduling`` (``composite_group`` is v1.37 only: a CompositePodGroup).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from e2e.kueue_scenario import BLOCK, RACK
from e2e.native import K8S
from e2e.native_k8s import NativeK8s
from e2e.nodes import GPU

HOSTNAME = "kubernetes.io/hostname"
RACKS = {"r0": "b0", "r1": "b0", "r2": "b1", "r3": "b1"}  # rack -> block
HOSTS_PER_RACK = 3
NODE_ALLOCATABLE: Mapping[str, str] = {
    "cpu": "32",
    "memory": "256Gi",
    "pods": "110",
    GPU: "8",
    "ephemeral-storage": "400Gi",
}
# node -> GPUs its blocker pod holds: r0 8, r1 4, r2 12, r3 2 used (16/20/12/22 free).
BLOCKERS: Mapping[str, int] = {"r0-h0": 8, "r1-h0": 4, "r2-h0": 8, "r2-h1": 4, "r3-h0": 2}
BLOCKER_NAMESPACE = "blockers"
CPU_PER_GPU, GIB_PER_GPU = 4, 32
PRIORITY_CLASSES: Mapping[str, int] = {"first": 1000, "last": -10}  # pods without a class: 0


def nodes() -> dict[str, dict[str, str]]:
    """Node name -> its topology labels (the hostname as Cluster.add_node sets it too)."""
    return {
        f"{rack}-h{h}": {BLOCK: block, RACK: rack, HOSTNAME: f"{rack}-h{h}", "type": "kwok"}
        for rack, block in RACKS.items()
        for h in range(HOSTS_PER_RACK)
    }


@dataclass(frozen=True)
class Shape:
    """A pod's requests: ``gpus`` GPUs and, unless given, the node's cpu and memory per GPU."""

    gpus: int
    cpu: int | None = None
    gib: int | None = None
    priority_class: str | None = None  # one of PRIORITY_CLASSES
    node_selector: tuple[tuple[str, str], ...] = ()

    def resources(self) -> dict[str, Any]:
        cpu = CPU_PER_GPU * self.gpus if self.cpu is None else self.cpu
        gib = GIB_PER_GPU * self.gpus if self.gib is None else self.gib
        requests = {"cpu": str(cpu), "memory": f"{gib}Gi"}
        if not self.gpus:
            return {"requests": requests}
        return {"requests": {**requests, GPU: str(self.gpus)}, "limits": {GPU: str(self.gpus)}}


def pod_spec(shape: Shape | int, group: str | None = None) -> dict[str, Any]:
    shape = Shape(shape) if isinstance(shape, int) else shape
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "train", "image": "trainer:latest", "resources": shape.resources()}],
    }
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    if shape.priority_class is not None:
        spec["priorityClassName"] = shape.priority_class
    if shape.node_selector:
        spec["nodeSelector"] = dict(shape.node_selector)
    return spec


def priority_classes() -> list[dict[str, Any]]:
    """The PriorityClasses pods of a mixed group use: the scheduler tries a group's pods in
    priority order (then by when each entered its active queue, which is not creation order)."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in PRIORITY_CLASSES.items()
    ]


def bound_pod(name: str, namespace: str, node: str, shape: Shape) -> dict[str, Any]:
    """A pod bound to ``node`` by ``spec.nodeName`` (no scheduler involved): usage in a dump."""
    spec = pod_spec(shape)
    spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def blocker_pods() -> Iterator[dict[str, Any]]:
    """The bound pods that make the cluster partly used (``spec.nodeName``: no scheduler involved)."""
    for node, gpus in BLOCKERS.items():
        yield bound_pod(f"blocker-{node}", BLOCKER_NAMESPACE, node, Shape(gpus))


def indexed_job(
    name: str,
    namespace: str,
    pods: int,
    gpus: int,
    group: str | None = None,
    *,
    k8s: NativeK8s = K8S,
    gang: bool = True,
    min_count: int | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """An Indexed Job with ``parallelism == completions``: the Job controller gives it a Workload and
    a PodGroup (gang, minCount = parallelism) unless ``group`` names a PodGroup of the user's own.
    On v1.37 the gang is asked for (``spec.scheduling.schedulingPolicy.gang: {}``; the controller
    defaults its minCount to parallelism, or it is ``min_count``; ``key`` adds
    ``schedulingConstraints``, which the controller copies into the PodGroup) unless ``gang`` is
    False: the Job controller then makes a basic group."""
    spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "template": {"spec": pod_spec(gpus, group)},
    }
    if k8s.job_gang_opt_in and group is None and gang:
        asked: dict[str, Any] = {} if min_count is None else {"minCount": min_count}
        spec["scheduling"] = {"schedulingPolicy": {"gang": asked}}
        if key is not None:
            spec["scheduling"]["schedulingConstraints"] = {"topology": [{"key": key}]}
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def policy(min_count: int | None) -> dict[str, Any]:
    """``gang: {minCount}``, or ``basic: {}`` for None."""
    return {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}


def workload_and_group(
    name: str,
    namespace: str,
    min_count: int | None,
    key: str | None,
    template_key: str | None = None,
    *,
    k8s: NativeK8s = K8S,
    priority_class: str | None = None,
) -> list[dict[str, Any]]:
    """A hand-written Workload with one podGroupTemplate and the PodGroup made from it; the
    template's key is ``template_key`` if given, else ``key``, the PodGroup's (nothing copies it).
    ``priority_class`` (v1.37): the template's and the PodGroup's ``priorityClassName``, which the
    Priority admission plugin resolves into the PodGroup's ``priority``."""
    template: dict[str, Any] = {"name": "workers", "schedulingPolicy": policy(min_count)}
    group_spec: dict[str, Any] = {**k8s.template_ref(name, "workers"), "schedulingPolicy": policy(min_count)}
    if priority_class is not None:
        template["priorityClassName"] = group_spec["priorityClassName"] = priority_class
    template_key = key if template_key is None else template_key
    if template_key is not None:
        template["schedulingConstraints"] = {"topology": [{"key": template_key}]}
    if key is not None:
        group_spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    workload = {
        "apiVersion": k8s.scheduling_api,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podGroupTemplates": [template]},
    }
    group = {
        "apiVersion": k8s.scheduling_api,
        "kind": "PodGroup",
        "metadata": {"name": group_name(name), "namespace": namespace},
        "spec": group_spec,
    }
    return [workload, group]


def group_name(workload: str) -> str:
    return f"{workload}-workers"


def group_pods(
    name: str, namespace: str, pods: int, gpus: Shape | int | Sequence[Shape]
) -> list[dict[str, Any]]:
    """``pods`` bare Pods in the PodGroup of Workload ``name`` (``spec.schedulingGroup``); a
    sequence of shapes gives each pod its own, in creation order."""
    shapes = list(gpus) if isinstance(gpus, Sequence) else [gpus] * pods
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": namespace, "labels": {"group": name}},
            "spec": pod_spec(shape, group_name(name)),
        }
        for i, shape in enumerate(shapes)
    ]


def hand_written(
    name: str,
    namespace: str,
    pods: int,
    gpus: Shape | int | Sequence[Shape],
    min_count: int | None,
    key: str | None,
    template_key: str | None = None,
    *,
    k8s: NativeK8s = K8S,
    priority_class: str | None = None,
) -> list[dict[str, Any]]:
    """Pods, then the Workload and PodGroup they name: a native gang written by hand (the
    Workload's template with ``template_key`` when given, the groups' ``priority_class``, see
    ``workload_and_group``).

    The pods go first on purpose. GangScheduling lets a gang into a PodGroup cycle as soon as
    ``minCount`` of its pods exist, so with ``minCount`` below the count and the PodGroup created
    first, the scheduler may place the group while the API server holds only some of its pods, on
    the domain that suits those, and the rest then wait for that domain (observed: 3 of 4 in the
    rack exactly holding 3). Until its PodGroup exists no pod is tried ("waiting for pods's pod
    group ... to appear"), so this order shows the scheduler the whole group in its first cycle.
    """
    group = workload_and_group(
        name, namespace, min_count, key, template_key, k8s=k8s, priority_class=priority_class
    )
    return [*group_pods(name, namespace, pods, gpus), *group]


def job_in_group(
    name: str, namespace: str, pods: int, gpus: int, min_count: int, key: str, *, k8s: NativeK8s = K8S
) -> list[dict[str, Any]]:
    """An Indexed Job whose pods join a hand-written PodGroup with a topology key (the Job controller
    then makes no Workload of its own: the template already has ``schedulingGroup``)."""
    job = indexed_job(name, namespace, pods, gpus, group_name(name), k8s=k8s)
    return [*workload_and_group(name, namespace, min_count, key, k8s=k8s), job]


@dataclass(frozen=True)
class Child:
    """One PodGroup of a CompositePodGroup: its template name, pods, GPUs per pod, gang minCount
    (None: basic) and topology key (None: anywhere inside the composite's domain)."""

    template: str
    pods: int
    gpus: int
    min_count: int | None
    key: str | None = None


def composite_name(workload: str) -> str:
    return f"{workload}-set"


def child_group_name(workload: str, template: str) -> str:
    return f"{workload}-{template}"


def composite_group(
    name: str,
    namespace: str,
    children: Sequence[Child],
    min_group_count: int | None,
    key: str | None,
    *,
    k8s: NativeK8s,
) -> list[dict[str, Any]]:
    """A v1.37 group of groups, written by hand as a workload controller (JobSet, LWS) would:
    the pods, then a ``v1beta1`` Workload with one ``compositePodGroupTemplates`` entry ``set``
    (``gang.minGroupCount``, or basic for None; topology ``key``) holding one ``podGroupTemplates``
    entry per child, the ``v1alpha3`` CompositePodGroup ``<name>-set`` made from it, and one
    PodGroup ``<name>-<template>`` per child naming it in ``spec.parentCompositePodGroupName``.
    Pods first, like ``hand_written``: the scheduler then sees every pod in its first cycle."""
    if k8s.composite_api is None:
        raise ValueError(f"Kubernetes {k8s.version} has no CompositePodGroup")
    constraints = {"schedulingConstraints": {"topology": [{"key": key}]}} if key else {}
    composite_policy: dict[str, Any] = {"basic": {}}
    if min_group_count is not None:
        composite_policy = {"gang": {"minGroupCount": min_group_count}}

    def child_constraints(child: Child) -> dict[str, Any]:
        return {"schedulingConstraints": {"topology": [{"key": child.key}]}} if child.key else {}

    templates = [
        {"name": c.template, "schedulingPolicy": policy(c.min_count), **child_constraints(c)}
        for c in children
    ]
    workload = {
        "apiVersion": k8s.scheduling_api,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "set",
                    "schedulingPolicy": composite_policy,
                    **constraints,
                    "podGroupTemplates": templates,
                }
            ]
        },
    }
    composite = {
        "apiVersion": k8s.composite_api,
        "kind": "CompositePodGroup",
        "metadata": {"name": composite_name(name), "namespace": namespace},
        "spec": {
            "workloadRef": {"workloadName": name, "templateName": "set"},
            "schedulingPolicy": composite_policy,
            **constraints,
        },
    }
    groups = [
        {
            "apiVersion": k8s.scheduling_api,
            "kind": "PodGroup",
            "metadata": {"name": child_group_name(name, c.template), "namespace": namespace},
            "spec": {
                "parentCompositePodGroupName": composite_name(name),
                **k8s.template_ref(name, c.template),
                "schedulingPolicy": policy(c.min_count),
                **child_constraints(c),
            },
        }
        for c in children
    ]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{c.template}-{i}",
                "namespace": namespace,
                "labels": {"group": name, "template": c.template},
            },
            "spec": pod_spec(c.gpus, child_group_name(name, c.template)),
        }
        for c in children
        for i in range(c.pods)
    ]
    return [*pods, workload, composite, *groups]
