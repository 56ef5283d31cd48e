"""Kubernetes v1.37's native gang API: ``scheduling.k8s.io/v1beta1`` Workload and PodGroup and
``v1alpha3`` (the same, and CompositePodGroup), as ``k8s.io/api/scheduling/v1beta1/types.go`` and
``v1alpha3/types.go`` define them (docs/native-v137.md).

What differs from v1alpha2: a group names its template in ``spec.workloadRef: {workloadName,
templateName}``; groups carry ``priority``/``priorityClassName`` and ``preemptionPolicy``; a
PodGroup may sit under a CompositePodGroup (``parentCompositePodGroupName``), whose
``schedulingPolicy.gang.minGroupCount`` counts child groups; and a Workload holds either
``podGroupTemplates`` or ``compositePodGroupTemplates`` (a tree at most 4 deep, each level at most
8 templates, names unique over the whole tree). A Job asks for a gang in ``spec.scheduling``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model.workloads.base import count_at, list_at, mapping_at, metadata
from webhook.model.workloads.native_fields import (
    COMPOSITE,
    GANG,
    MAX_TEMPLATES,
    MIN_GROUP_COUNT,
    GroupSpec,
    NativeObject,
    check_unique,
    controller_ref,
    owner_job,
    read_group,
    read_priority,
    read_templates,
)
from webhook.wire.errors import InvalidObject

MAX_DEPTH = 4  # a Workload's template tree
JOB_SCHEDULING = "spec.scheduling.schedulingPolicy"  # where a v1.37 Job's group policy sits


def read_v1beta1(obj: Mapping[str, Any], namespace: str) -> NativeObject:
    """A v1beta1/v1alpha3 Workload, PodGroup or CompositePodGroup."""
    api, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    meta = metadata(obj)
    ns = str(meta.get("namespace") or namespace)
    name = str(meta.get("name") or meta.get("generateName") or "")
    created = str(meta.get("creationTimestamp") or "")
    if kind == "Workload":
        leaves, composites, tree = _workload_templates(obj)
        return NativeObject(
            kind, ns, name, leaves, controller_ref(obj), None, owner_job(meta),
            api=api, created=created, composites=composites, tree=tree,
        )  # fmt: skip
    spec = mapping_at(obj, ("spec",))
    counts = MIN_GROUP_COUNT if kind == COMPOSITE else "minCount"
    group = read_group({**spec, "name": name}, "spec", False, counts)
    ref = mapping_at(spec, ("workloadRef",), required=False)
    if kind == COMPOSITE and not ref:
        raise InvalidObject.at("spec.workloadRef", "", "Required value")
    template_ref = (str(ref.get("workloadName", "")), str(ref.get("templateName", ""))) if ref else None
    parent = spec.get("parentCompositePodGroupName")
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise InvalidObject.at("spec.parentCompositePodGroupName", f"{parent!r}: must be a name")
    if parent and not ref:
        raise InvalidObject.at("spec.workloadRef", "", "Required value")  # needed with a parent
    priority, klass, preempts = read_priority(spec, "spec")
    return NativeObject(
        kind, ns, name, (group,), None, template_ref, owner_job(meta),
        api=api, parent=parent or None, priority=priority, priority_class=klass, preempts=preempts,
        created=created,
    )  # fmt: skip


def _workload_templates(
    obj: Mapping[str, Any],
) -> tuple[tuple[GroupSpec, ...], tuple[GroupSpec, ...], tuple[tuple[str, str], ...]]:
    """A Workload's leaf templates, its composite templates and each nested one's parent."""
    spec = mapping_at(obj, ("spec",))
    plain = spec.get("podGroupTemplates")
    composite = spec.get("compositePodGroupTemplates")
    if bool(plain) == bool(composite):
        detail = "must specify exactly one of: `podGroupTemplates`, `compositePodGroupTemplates`"
        raise InvalidObject.at("spec", detail)
    if plain:
        return read_templates(obj, "spec.podGroupTemplates", required=True), (), ()
    leaves: list[GroupSpec] = []
    composites: list[GroupSpec] = []
    tree: list[tuple[str, str]] = []
    _walk(spec, "spec", None, 1, leaves, composites, tree)
    check_unique((*composites, *leaves), "spec.compositePodGroupTemplates")
    return tuple(leaves), tuple(composites), tuple(tree)


def _walk(
    raw: Mapping[str, Any],
    path: str,
    parent: str | None,
    depth: int,
    leaves: list[GroupSpec],
    composites: list[GroupSpec],
    tree: list[tuple[str, str]],
) -> None:
    """One level of the template tree: its PodGroup templates, then its composite templates."""
    if depth > MAX_DEPTH:
        raise InvalidObject.at(path, f"must be at most {MAX_DEPTH} levels deep", "Invalid value")
    for field, is_leaf in (("podGroupTemplates", True), ("compositePodGroupTemplates", False)):
        items = list_at(raw, (field,), required=False)
        if len(items) > MAX_TEMPLATES:
            detail = f"{len(items)}: must have at most {MAX_TEMPLATES} items"
            raise InvalidObject.at(f"{path}.{field}", detail, "Too many")
        for i, item in enumerate(items):
            where = f"{path}.{field}[{i}]"
            group = read_group(item, where, True, "minCount" if is_leaf else MIN_GROUP_COUNT)
            (leaves if is_leaf else composites).append(group)
            if parent is not None:
                tree.append((group.name, parent))
            if not is_leaf:
                _walk(item, where, group.name, depth + 1, leaves, composites, tree)


def job_scheduling(obj: Mapping[str, Any]) -> GroupSpec | None:
    """A v1.37 Job's ``spec.scheduling`` as the group the Job controller makes of it
    (``WorkloadItemForJob``): basic unless it asks for a gang; a gang's ``minCount`` defaults to
    the Job's parallelism (at least 1). None when the Job sets no ``spec.scheduling``."""
    raw = mapping_at(obj, ("spec", "scheduling"), required=False)
    if not raw:
        return None
    policy = mapping_at(raw, ("schedulingPolicy",), required=False)
    name = f"{metadata(obj).get('name') or metadata(obj).get('generateName') or ''}"
    if isinstance(policy.get(GANG), Mapping) and policy[GANG].get("minCount") is None:
        parallelism = count_at(obj, ("spec", "parallelism"), 1)
        gang = {**policy[GANG], "minCount": max(1, parallelism)}
        raw = {**raw, "schedulingPolicy": {**policy, GANG: gang}}
    if not policy:
        raw = {**raw, "schedulingPolicy": {"basic": {}}}
    return read_group({**raw, "name": name}, "spec.scheduling", False)
