"""The fields every served version of the native gang API shares, read and validated once.

``scheduling.k8s.io`` v1alpha2 (Kubernetes v1.36), v1beta1 and v1alpha3 (v1.37) spell a group's
``schedulingPolicy`` (exactly one of ``basic: {}`` or ``gang: {...}``), its
``schedulingConstraints.topology`` (at most one ``{key}``), a Workload's ``controllerRef`` and
its templates' unique names the same way (``k8s.io/api/scheduling/*/types.go``); a
CompositePodGroup's gang counts child groups (``minGroupCount``) where a PodGroup's counts pods
(``minCount``). Errors are ``InvalidObject`` at the API server's field paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.model.workloads.base import list_at, lookup, mapping_at
from webhook.wire.errors import FieldError, InvalidObject

V1ALPHA2 = "scheduling.k8s.io/v1alpha2"  # Kubernetes v1.36
V1BETA1 = "scheduling.k8s.io/v1beta1"  # Kubernetes v1.37: Workload, PodGroup
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"  # Kubernetes v1.37: the same, and CompositePodGroup
NATIVE_API = V1ALPHA2  # the v1.36 version (kept as the default of objects tasgate writes)
NATIVE_APIS = (V1ALPHA2, V1BETA1, V1ALPHA3)
MINOR = {V1ALPHA2: 36, V1BETA1: 37, V1ALPHA3: 37}  # the Kubernetes minor serving each version


def served_minor(served: frozenset[str] | set[str]) -> int:
    """The release whose versions answer: 37 when only v1.37's do, else 36. A real API server
    serves one release's versions, never both; a fake one answering every path reads as v1.36."""
    return 37 if served & {V1BETA1, V1ALPHA3} and V1ALPHA2 not in served else 36


NATIVE_KINDS = frozenset({"Workload", "PodGroup"})
COMPOSITE = "CompositePodGroup"
MAX_TEMPLATES = 8  # spec.podGroupTemplates +k8s:maxItems

BASIC, GANG = "basic", "gang"
MIN_COUNT, MIN_GROUP_COUNT = "minCount", "minGroupCount"
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class GroupSpec:
    """One group's policy: ``min_count`` members at once (1 for basic), in one ``key`` domain.
    Members are pods for a PodGroup, child groups for a CompositePodGroup (``minGroupCount``)."""

    name: str
    policy: str
    min_count: int
    key: str | None
    path: str  # where its schedulingPolicy sits in the object, for messages


def read_group(raw: Any, path: str, template: bool, counts: str = MIN_COUNT) -> GroupSpec:
    """A template's or a group object's policy and key (``counts``: the gang's count field)."""
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
        value = lookup(raw, ("schedulingPolicy", "gang", counts))
        where = f"{path}.schedulingPolicy.gang.{counts}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidObject.at(where, f"{value!r}: must be an integer")
        if value < 1:
            raise InvalidObject.at(where, f"{value}: must be greater than or equal to 1")
        min_count = value
    return GroupSpec(str(name or ""), chosen[0], min_count, read_key(raw, path), f"{path}.schedulingPolicy")


def read_key(raw: Mapping[str, Any], path: str) -> str | None:
    """``schedulingConstraints.topology[0].key``, a valid label key; None when not set."""
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
    if not _NAME.match(base) or len(base) > 63 or (prefix and (not DNS.match(prefix) or len(prefix) > 253)):
        raise InvalidObject.at(f"{where}[0].key", f'"{key}": must be a valid label key')
    return key


def check_unique(groups: tuple[GroupSpec, ...], path: str = "spec.podGroupTemplates") -> None:
    """Template names are unique within a Workload (across every level of its tree)."""
    seen: set[str] = set()
    for i, g in enumerate(groups):
        if g.name in seen:
            raise InvalidObject([FieldError(f"{path}[{i}]", f'"{g.name}"', "Duplicate value")])
        seen.add(g.name)


def controller_ref(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """A Workload's ``spec.controllerRef`` as (apiGroup, kind, name)."""
    ref = mapping_at(obj, ("spec", "controllerRef"), required=False)
    if not ref:
        return None
    return str(ref.get("apiGroup", "")), str(ref.get("kind", "")), str(ref.get("name", ""))


def owner_job(meta: Mapping[str, Any]) -> str | None:
    """The batch/v1 Job that controls the object (its controller ownerReference), if one does."""
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


def read_priority(spec: Mapping[str, Any], path: str) -> tuple[int | None, str, bool]:
    """v1.37 groups' ``priority`` (filled in by the Priority admission plugin; None when not yet),
    ``priorityClassName`` and whether ``preemptionPolicy`` lets it preempt (not ``Never``)."""
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise InvalidObject.at(f"{path}.priority", f"{priority!r}: must be an integer")
    policy = spec.get("preemptionPolicy")
    if policy not in (None, "PreemptLowerPriority", "Never"):
        raise InvalidObject.at(
            f"{path}.preemptionPolicy",
            f'"{policy}": supported values: "Never", "PreemptLowerPriority"',
            "Unsupported value",
        )
    return priority, str(spec.get("priorityClassName") or ""), policy != "Never"


@dataclass(frozen=True)
class NativeObject:
    """A native Workload, PodGroup or CompositePodGroup, whatever version it came in."""

    kind: str
    namespace: str
    name: str
    groups: tuple[GroupSpec, ...]  # a Workload's leaf templates; a group object's own policy
    controller: tuple[str, str, str] | None = None  # Workload spec.controllerRef (group, kind, name)
    template_ref: tuple[str, str] | None = None  # a group's (workloadName, templateName)
    owner_job: str | None = None  # name of the batch/v1 Job that controls it, if one does
    api: str = V1ALPHA2
    parent: str | None = None  # v1.37: parentCompositePodGroupName (a template's parent template)
    priority: int | None = None  # v1.37: spec.priority, as admission resolved it
    priority_class: str = ""
    preempts: bool = True  # v1.37: preemptionPolicy is not Never
    created: str = ""  # metadata.creationTimestamp: the scheduler orders child groups by it
    # A v1.37 Workload's composite templates, and (template, parent template) for nested ones.
    composites: tuple[GroupSpec, ...] = ()
    tree: tuple[tuple[str, str], ...] = ()

    @property
    def minor(self) -> int:
        return MINOR[self.api]


def read_templates(obj: Mapping[str, Any], path: str, required: bool) -> tuple[GroupSpec, ...]:
    """``spec.podGroupTemplates`` (1..8, unique names; () when absent and not ``required``)."""
    templates = list_at(obj, tuple(path.split(".")), required=False)
    if not templates:
        if required:
            raise InvalidObject.at(path, "", "Required value")
        return ()
    if len(templates) > MAX_TEMPLATES:
        detail = f"must have at most {MAX_TEMPLATES} items"
        raise InvalidObject.at(path, f"{len(templates)}: {detail}", "Too many")
    groups = tuple(read_group(t, f"{path}[{i}]", True) for i, t in enumerate(templates))
    check_unique(groups, path)
    return groups
