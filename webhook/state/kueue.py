"""Kueue's objects as tasgate reads them: Topology, ResourceFlavor, ClusterQueue (with its
quotas and cohort), Cohort and LocalQueue, from `kueue.x-k8s.io` v1beta2 (or v1beta1) objects.

Quotas are read as Kueue reads them (`model.quantity.quota_amount`): ``nominalQuota: 1E`` of
cpu is an unlimited quota, as in Kueue, not an error. A malformed object raises InvalidObject
naming it; the state leaves it out alone (`state.rejected`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scorer.model import Toleration
from webhook.model.quantity import quota_amount
from webhook.model.scheduling import parse_tolerations
from webhook.state.admission_checks import CheckRule, parse_check_rules
from webhook.state.fields import object_list, string_map
from webhook.state.priorities import Preemption, parse_preemption
from webhook.wire.errors import InvalidObject


@dataclass(frozen=True)
class Topology:
    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    topology_name: str | None  # None: not a TAS flavor


@dataclass(frozen=True)
class FlavorQuota:
    """One flavor's quotas in a resource group, canonical amounts per resource."""

    name: str
    nominal: Mapping[str, int]
    borrowing_limit: Mapping[str, int]  # a quota may be ``quantity.UNLIMITED``
    lending_limit: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuota, ...]


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    flavors: tuple[str, ...]  # every flavor of every resource group, in order, once
    groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    # spec.flavorFungibility.whenCanBorrow (v1beta2 default MayStopSearch): whether a flavor that
    # fits only by borrowing ends Kueue's flavor search (``flavorassigner.shouldTryNextFlavor``).
    try_next_when_borrowing: bool = False
    preemption: Preemption = field(default_factory=Preemption)  # spec.preemption (`state.priorities`)
    checks: tuple[CheckRule, ...] = ()  # admission checks (`state.admission_checks`)

    def group_covering(self, resource: str) -> ResourceGroup | None:
        return self._covering.get(resource)

    @functools.cached_property
    def _covering(self) -> Mapping[str, ResourceGroup]:
        """Each covered resource's first group, built once: a review asks about every resource
        of every PodSet several times (quota checks, flavor choice)."""
        found: dict[str, ResourceGroup] = {}
        for group in self.groups:
            for resource in group.covered:
                found.setdefault(resource, group)
        return found


@dataclass(frozen=True)
class Cohort:
    """A ``Cohort`` object: a node of Kueue's cohort tree, with quotas of its own (lendable to
    its children, or, within ``lendingLimit``, to its own parent)."""

    name: str
    parent: str | None
    groups: tuple[ResourceGroup, ...] = ()


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


def add_kueue_object(
    obj: Mapping[str, Any],
    kind: str,
    name: str,
    namespace: str,
    topologies: dict[str, Topology],
    flavors: dict[str, Flavor],
    cqs: dict[str, ClusterQueue],
    lqs: dict[tuple[str, str], LocalQueue],
    cohorts: dict[str, Cohort] | None = None,
) -> None:
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidObject.at(f"{kind} {name}: spec", "must be an object")
    if kind == "Topology":
        levels = tuple(
            str(lv.get("nodeLabel", ""))
            for lv in object_list(spec.get("levels"), f"Topology {name}: spec.levels")
        )
        topologies[name] = Topology(name, levels)
    elif kind == "ResourceFlavor":
        flavors[name] = Flavor(
            name=name,
            node_labels=string_map(spec.get("nodeLabels"), f"ResourceFlavor {name}: spec.nodeLabels"),
            tolerations=parse_tolerations(
                spec.get("tolerations"), f"ResourceFlavor {name}: spec.tolerations"
            ),
            topology_name=str(spec["topologyName"]) if spec.get("topologyName") else None,
        )
    elif kind == "ClusterQueue":
        cqs[name] = parse_cluster_queue(name, spec)
    elif kind == "LocalQueue":
        lqs[(namespace, name)] = LocalQueue(namespace, name, str(spec.get("clusterQueue", "")))
    elif kind == "Cohort" and cohorts is not None:
        cohorts[name] = parse_cohort(name, spec)


def parse_cluster_queue(name: str, spec: Mapping[str, Any]) -> ClusterQueue:
    """Flavors in order, each resource group's quotas, the cohort (``cohortName`` in v1beta2,
    ``cohort`` in v1beta1), ``flavorFungibility.whenCanBorrow`` and the admission checks."""
    names, groups = parse_resource_groups(f"ClusterQueue {name}: spec.resourceGroups", spec)
    cohort = spec.get("cohortName") or spec.get("cohort")
    fungibility = spec.get("flavorFungibility")
    borrow = fungibility.get("whenCanBorrow") if isinstance(fungibility, Mapping) else None
    try_next = borrow == "TryNextFlavor"
    return ClusterQueue(
        name,
        names,
        groups,
        str(cohort) if cohort else None,
        try_next_when_borrowing=try_next,
        preemption=parse_preemption(name, spec),
        checks=parse_check_rules(name, spec),
    )


def parse_cohort(name: str, spec: Mapping[str, Any]) -> Cohort:
    """A Cohort (``kueue.x-k8s.io/v1beta2``): its parent and its own resource groups' quotas."""
    _, groups = parse_resource_groups(f"Cohort {name}: spec.resourceGroups", spec)
    parent = spec.get("parentName")
    return Cohort(name, str(parent) if parent else None, groups)


def parse_resource_groups(
    where: str, spec: Mapping[str, Any]
) -> tuple[tuple[str, ...], tuple[ResourceGroup, ...]]:
    """Every flavor named, in order and once, and each resource group's quotas."""
    names: list[str] = []
    groups = []
    for i, group in enumerate(object_list(spec.get("resourceGroups"), where)):
        covered = tuple(str(r) for r in group.get("coveredResources") or [])
        flavors = []
        for j, flavor in enumerate(object_list(group.get("flavors"), f"{where}[{i}].flavors")):
            flavor_name = str(flavor.get("name"))
            if flavor_name not in names:
                names.append(flavor_name)
            flavors.append(_flavor_quota(flavor_name, flavor, f"{where}[{i}].flavors[{j}]"))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(names), tuple(groups)


def _flavor_quota(name: str, raw: Mapping[str, Any], where: str) -> FlavorQuota:
    nominal: dict[str, int] = {}
    borrowing: dict[str, int] = {}
    lending: dict[str, int] = {}
    fields = (("nominalQuota", nominal), ("borrowingLimit", borrowing), ("lendingLimit", lending))
    for k, resource in enumerate(object_list(raw.get("resources"), f"{where}.resources")):
        r = str(resource.get("name", ""))
        for key, into in fields:
            value = resource.get(key)
            if value is not None:
                into[r] = quota_amount(r, value, f"{where}.resources[{k}].{key}")
    return FlavorQuota(name, nominal, borrowing, lending)
