"""Kubernetes v1.36's native gang API, ``scheduling.k8s.io/v1alpha2``, as the Go types define it.

A ``Workload`` holds static ``spec.podGroupTemplates`` (1..8, unique ``name``), each with a
``schedulingPolicy`` (exactly one of ``basic: {}`` or ``gang: {minCount >= 1}``) and optional
``schedulingConstraints.topology`` (at most one ``{key: <label key>}``). A ``PodGroup`` is a
runtime group (``spec.podGroupTemplateRef.workload`` names the template it was stamped from;
the Job controller copies only ``schedulingPolicy`` into it) and is what the kube-scheduler
reads: its own ``schedulingConstraints`` decide the placement. A Pod joins one with
``spec.schedulingGroup.podGroupName``.

The name clash matters: Kueue's ``Workload`` is ``kueue.x-k8s.io``; only the exact apiVersion
here is read as native. Errors are ``InvalidObject`` at the API server's field paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.model.workloads.base import list_at, lookup, mapping_at, metadata
from webhook.wire.errors import FieldError, InvalidObject

NATIVE_API = "scheduling.k8s.io/v1alpha2"
NATIVE_KINDS = frozenset({"Workload", "PodGroup"})
MAX_TEMPLATES = 8  # spec.podGroupTemplates +k8s:maxItems
BASIC, GANG = "basic", "gang"
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class GroupSpec:
    """One pod group's policy: ``min_count`` pods at once (1 for basic), in one ``key`` domain."""

    name: str
    policy: str
    min_count: int
    key: str | None
    path: str  # where its schedulingPolicy sits in the object, for messages


@dataclass(frozen=True)
class NativeObject:
    """A native Workload or PodGroup: its groups, its owner reference and template reference."""

    kind: str
    namespace: str
    name: str
    groups: tuple[GroupSpec, ...]
    controller: tuple[str, str, str] | None = None  # Workload spec.controllerRef (group, kind, name)
    template_ref: tuple[str, str] | None = None  # PodGroup (workloadName, podGroupTemplateName)
    owner_job: str | None = None  # name of the batch/v1 Job that controls it, if one does


def is_native(obj: Mapping[str, Any]) -> bool:
    return obj.get("apiVersion") == NATIVE_API and obj.get("kind") in NATIVE_KINDS


def read_native(obj: Mapping[str, Any], namespace: str = "") -> NativeObject:
    """A Workload's templates or a PodGroup's one group, validated as the API server does."""
    kind = str(obj.get("kind"))
    meta = metadata(obj)
    ns = str(meta.get("namespace") or namespace)
    name = str(meta.get("name") or meta.get("generateName") or "")
    owner = _owner_job(meta)
    if kind == "Workload":
        templates = list_at(obj, ("spec", "podGroupTemplates"))
        if not templates:
            raise InvalidObject.at("spec.podGroupTemplates", "", "Required value")
        if len(templates) > MAX_TEMPLATES:
            detail = f"must have at most {MAX_TEMPLATES} items"
            raise InvalidObject.at("spec.podGroupTemplates", f"{len(templates)}: {detail}", "Too many")
        groups = tuple(_group(t, f"spec.podGroupTemplates[{i}]", True) for i, t in enumerate(templates))
        _unique(groups)
        return NativeObject(kind, ns, name, groups, _controller(obj), None, owner)
    spec = mapping_at(obj, ("spec",))
    group = _group({**spec, "name": name}, "spec", False)
    ref = mapping_at(spec, ("podGroupTemplateRef", "workload"), required=False)
    template_ref = (
        (str(ref.get("workloadName", "")), str(ref.get("podGroupTemplateName", ""))) if ref else None
    )
    return NativeObject(kind, ns, name, (group,), None, template_ref, owner)


def scheduling_group(pod_spec: Any) -> str | None:
    """A pod's ``spec.schedulingGroup.podGroupName`` (a DNS subdomain), None when not set."""
    if not isinstance(pod_spec, Mapping):
        return None
    found = pod_spec.get("schedulingGroup")
    if found is None:
        return None
    if not isinstance(found, Mapping) or not isinstance(found.get("podGroupName"), str):
        raise InvalidObject.at("spec.schedulingGroup.podGroupName", "", "Required value")
    name = str(found["podGroupName"])
    if not _DNS.match(name) or len(name) > 253:
        raise InvalidObject.at(
            "spec.schedulingGroup.podGroupName", f'"{name}": must be a lowercase RFC 1123 subdomain'
        )
    return name


def job_gang_candidate(obj: Mapping[str, Any]) -> bool:
    """``IsGangSchedulingCandidate``: the Job controller (gate ``WorkloadWithJob``) makes a
    Workload and PodGroup for an Indexed Job with parallelism == completions > 1 whose pod
    template names no schedulingGroup itself."""
    spec = obj.get("spec")
    if obj.get("apiVersion") != "batch/v1" or obj.get("kind") != "Job" or not isinstance(spec, Mapping):
        return False
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism <= 1:
        return False
    if spec.get("completionMode") != "Indexed" or completions != parallelism:
        return False
    template = spec.get("template")
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    return not (isinstance(pod_spec, Mapping) and pod_spec.get("schedulingGroup") is not None)


def _group(raw: Any, path: str, template: bool) -> GroupSpec:
    if not isinstance(raw, Mapping):
        raise InvalidObject.at(path, "must be an object")
    name = raw.get("name")
    if template and (not isinstance(name, str) or not name):
        raise InvalidObject.at(f"{path}.name", "", "Required value")
    policy = mapping_at(raw, ("schedulingPolicy",), required=False)
    chosen = [k for k in (BASIC, GANG) if policy.get(k) is not None]
    if len(chosen) != 1:
        detail = "must specify exactly one of: `basic`, `gang`"
        raise InvalidObject.at(f"{path}.schedulingPolicy", detail)
    min_count = 1
    if chosen[0] == GANG:
        value = lookup(raw, ("schedulingPolicy", "gang", "minCount"))
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidObject.at(f"{path}.schedulingPolicy.gang.minCount", f"{value!r}: must be an integer")
        if value < 1:
            raise InvalidObject.at(
                f"{path}.schedulingPolicy.gang.minCount", f"{value}: must be greater than or equal to 1"
            )
        min_count = value
    return GroupSpec(str(name or ""), chosen[0], min_count, _key(raw, path), f"{path}.schedulingPolicy")


def _key(raw: Mapping[str, Any], path: str) -> str | None:
    constraints = mapping_at(raw, ("schedulingConstraints",), required=False)
    topology = list_at(constraints, ("topology",), required=False)
    where = f"{path}.schedulingConstraints.topology"
    if len(topology) > 1:
        raise InvalidObject.at(where, f"{len(topology)}: must have at most 1 items", "Too many")
    if not topology:
        return None
    key = topology[0].get("key") if isinstance(topology[0], Mapping) else None
    if not isinstance(key, str) or not key:
        raise InvalidObject.at(f"{where}[0].key", "", "Required value")
    prefix, _, base = key.rpartition("/")
    if not _NAME.match(base) or len(base) > 63 or (prefix and (not _DNS.match(prefix) or len(prefix) > 253)):
        raise InvalidObject.at(f"{where}[0].key", f'"{key}": must be a valid label key')
    return key


def _unique(groups: tuple[GroupSpec, ...]) -> None:
    seen: set[str] = set()
    for i, g in enumerate(groups):
        if g.name in seen:
            raise InvalidObject(
                [FieldError(f"spec.podGroupTemplates[{i}]", f'"{g.name}"', "Duplicate value")]
            )
        seen.add(g.name)


def _controller(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    ref = mapping_at(obj, ("spec", "controllerRef"), required=False)
    if not ref:
        return None
    return str(ref.get("apiGroup", "")), str(ref.get("kind", "")), str(ref.get("name", ""))


def _owner_job(meta: Mapping[str, Any]) -> str | None:
    owners = meta.get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if (
            isinstance(owner, Mapping)
            and owner.get("controller") is True
            and owner.get("apiVersion") == "batch/v1"
            and owner.get("kind") == "Job"
        ):
            return str(owner.get("name", ""))
    return None
