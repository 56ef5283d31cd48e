"""The native gang API, ``scheduling.k8s.io``, in each version a Kubernetes release serves.

Kubernetes v1.36 serves ``v1alpha2`` Workload and PodGroup; v1.37 serves ``v1beta1`` (and
``v1alpha3``, which adds CompositePodGroup) and no longer ``v1alpha2`` (docs/native-v137.md). All
read into one `NativeObject`, so nothing past this module asks which version an object came in
except where v1.37 behaves differently (`NativeObject.minor`).

A ``Workload`` holds static templates (1..8, unique names), each with a ``schedulingPolicy``
(``basic`` or ``gang: {minCount}``) and optional ``schedulingConstraints.topology``; in v1.37 they
may nest under ``compositePodGroupTemplates``. A ``PodGroup`` is a runtime group stamped from a
template and is what the kube-scheduler reads: its own constraints decide the placement. A Pod
joins one with ``spec.schedulingGroup.podGroupName``. A v1.37 PodGroup may sit under a
``CompositePodGroup`` (``parentCompositePodGroupName``), whose gang counts child groups.

The name clash matters: Kueue's ``Workload`` is ``kueue.x-k8s.io``; only the exact apiVersions
here are read as native. Errors are ``InvalidObject`` at the API server's field paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model.workloads.base import mapping_at, metadata
from webhook.model.workloads.native_fields import (
    BASIC,
    COMPOSITE,
    DNS,
    GANG,
    MINOR,
    NATIVE_API,
    NATIVE_APIS,
    NATIVE_KINDS,
    V1ALPHA2,
    V1ALPHA3,
    V1BETA1,
    GroupSpec,
    NativeObject,
    controller_ref,
    owner_job,
    read_group,
    read_templates,
)
from webhook.model.workloads.native_v1beta1 import read_v1beta1
from webhook.wire.errors import InvalidObject

__all__ = [
    "BASIC",
    "COMPOSITE",
    "GANG",
    "MINOR",
    "NATIVE_API",
    "NATIVE_APIS",
    "V1ALPHA2",
    "V1ALPHA3",
    "V1BETA1",
    "GroupSpec",
    "NativeObject",
    "read_native",
    "scheduling_group",
]


def is_native(obj: Mapping[str, Any]) -> bool:
    api, kind = obj.get("apiVersion"), obj.get("kind")
    return api in NATIVE_APIS and (kind in NATIVE_KINDS or (kind == COMPOSITE and api == V1ALPHA3))


def read_native(obj: Mapping[str, Any], namespace: str = "") -> NativeObject:
    """A Workload's templates or a group's own policy, validated as the API server does."""
    if obj.get("apiVersion") != V1ALPHA2:
        return read_v1beta1(obj, namespace)
    kind = str(obj.get("kind"))
    meta = metadata(obj)
    ns = str(meta.get("namespace") or namespace)
    name = str(meta.get("name") or meta.get("generateName") or "")
    owner = owner_job(meta)
    if kind == "Workload":
        groups = read_templates(obj, "spec.podGroupTemplates", required=True)
        return NativeObject(kind, ns, name, groups, controller_ref(obj), None, owner)
    spec = mapping_at(obj, ("spec",))
    group = read_group({**spec, "name": name}, "spec", False)
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
    if not DNS.match(name) or len(name) > 253:
        raise InvalidObject.at(
            "spec.schedulingGroup.podGroupName", f'"{name}": must be a lowercase RFC 1123 subdomain'
        )
    return name


def job_gang_candidate(obj: Mapping[str, Any], minor: int = 36) -> bool:
    """Whether the Job controller (gate ``WorkloadWithJob``) makes a Workload and PodGroup for
    ``obj``. v1.36 (``IsGangSchedulingCandidate``): an Indexed Job with parallelism ==
    completions > 1. v1.37 (``getManagementMode``): every Job no controller owns. Either way only
    when its pod template names no schedulingGroup itself."""
    spec = obj.get("spec")
    if obj.get("apiVersion") != "batch/v1" or obj.get("kind") != "Job" or not isinstance(spec, Mapping):
        return False
    template = spec.get("template")
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    if isinstance(pod_spec, Mapping) and pod_spec.get("schedulingGroup") is not None:
        return False
    if minor >= 37:
        owners = metadata(obj).get("ownerReferences")
        return not any(isinstance(o, Mapping) and o.get("controller") is True for o in owners or [])
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism <= 1:
        return False
    return spec.get("completionMode") == "Indexed" and completions == parallelism
