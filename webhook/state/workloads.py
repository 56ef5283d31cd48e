"""What Kueue counts as used: admitted TAS Workloads' assignments, and the pods that are not theirs.

Kueue v0.19.2's TAS snapshot (``pkg/cache/scheduler``) subtracts two kinds of usage from a leaf:

- **Workload usage** (``clusterqueue.go: updateWorkloadTASUsage`` → ``tas_flavor.go:
  TASFlavorCache.addUsage/updateUsage``): a Workload in the cache (``cache.go:
  addOrUpdateWorkloadWithoutLock`` keeps it while ``workload.HasActiveQuotaReservation``:
  ``QuotaReserved`` True, not ``Finished``, ``spec.active`` not false; admission checks need not
  have passed) adds, for each PodSet with a ``topologyAssignment`` (``workload.go:
  totalRequestsFromAdmission``), to each flavor of that PodSet and each assigned domain
  ``count × single-pod requests`` plus ``count`` pods. The single-pod requests are ``PodRequests``
  of the Workload's own ``spec.podSets[name].template.spec`` (``resources.NewRequestsFromPodSpec``),
  or ``resourceUsage / count`` when the PodSet is missing. Reclaimable pods do not shrink it
  (``PodSetResources.ScaledTo`` keeps a topology request as it is).
- **Non-TAS pod usage** (``controller/tas/non_tas_usage_controller.go: belongsToNonTASCache``):
  a pod counts from its node when it is bound, not Succeeded/Failed, and not a TAS pod
  (``util/tas/tas.go: IsTAS``: it carries one of the topology annotations below; Kueue writes
  ``podset-unconstrained-topology`` into the pods of an implied-TAS PodSet, ``podset/podset.go:
  FromAssignment``). So a TAS pod never counts through its node: before it binds its Workload
  counts it, after its Workload finishes nothing does.

Where a domain's usage lands (``cache/scheduler/snapshot.go: Snapshot`` and ``tas_flavor.go:
snapshot``, ``TASHandleOverlappingFlavors`` on by default): a topology whose lowest level is the
hostname keys leaves by hostname and its assignments name the hostname alone, and the usage of
every such flavor is summed per hostname and seen by every such flavor's snapshot; a topology
with a coarser leaf keys leaves by all level values and sees its own flavor's usage only. With
the gate off (``Scope.overlapping`` False) no usage is summed across flavors: every flavor's
snapshot sees its own flavor's usage only (``c.usage``), on nodes it shares with others too. A
domain the snapshot does not hold (node gone, NotReady, not selected) is skipped
(``tas_flavor_snapshot.go: addTASUsage``). Pure: plain dicts in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scorer.model import HOSTNAME_LABEL, PODS
from webhook.model.podrequests import stored_pod_requests
from webhook.model.quantity import canonical, parse_quantity
from webhook.state.admission import condition_true, workload_admission
from webhook.state.fields import metadata, object_list, string_map
from webhook.wire.errors import InvalidObject

# util/tas/tas.go IsTAS: any of these on a pod makes it a TAS pod, counted through its Workload.
TAS_POD_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)

Shape = tuple[tuple[str, int], ...]  # requests as sorted (resource, amount) pairs


@dataclass(frozen=True, slots=True)
class AssignedUse:
    """What one admitted PodSet takes in one leaf domain of one TAS flavor."""

    flavor: str
    levels: tuple[str, ...]  # the assignment's levels: the hostname alone, or every level
    values: tuple[str, ...]  # one per level
    requests: Shape  # count × single-pod requests, plus ``count`` pods
    workload: tuple[str, str] = ("", "")  # (namespace, name) of the Workload it belongs to

    @property
    def by_hostname(self) -> bool:
        return self.levels[-1] == HOSTNAME_LABEL


@dataclass(frozen=True)
class Scope:
    """Which assigned usage one snapshot sees: Kueue's per-flavor rule, as data.

    ``flavor`` is None for a snapshot of the policy's default topology (no Kueue flavor): it
    sees the hostname-keyed usage and, with a coarser leaf, the usage assigned on its levels.
    ``hostname_flavors`` are the TAS flavors whose topology's lowest level is the hostname (their
    usage is summed per hostname across flavors, unless ``overlapping``, Kueue's
    ``TASHandleOverlappingFlavors``, is off); ``flavors`` every TAS flavor in the state.
    """

    flavor: str | None
    levels: tuple[str, ...]
    flavors: frozenset[str]
    hostname_flavors: frozenset[str]
    overlapping: bool = True

    def sees(self, use: AssignedUse) -> bool:
        if self.levels and self.levels[-1] == HOSTNAME_LABEL:
            if self.flavor is not None and not self.overlapping:
                return use.by_hostname and use.flavor == self.flavor
            return use.by_hostname and use.flavor in self.hostname_flavors
        if self.flavor is None:
            return use.levels == self.levels and use.flavor in self.flavors
        return use.flavor == self.flavor and use.levels == self.levels


def is_tas_pod(obj: Mapping[str, Any]) -> bool:
    """Kueue's ``IsTAS``: the pod carries a topology annotation (its Workload counts it)."""
    annotations = metadata(obj).get("annotations")
    return isinstance(annotations, Mapping) and any(a in annotations for a in TAS_POD_ANNOTATIONS)


def holds_quota(workload: Mapping[str, Any]) -> bool:
    """Kueue's ``HasActiveQuotaReservation``, with the admission present to read. A Workload whose
    spec, status, admission or conditions are not of their types raises InvalidObject naming it
    (the API server's schema forbids that; a hand-made dump does not)."""
    _check_shape(workload)
    spec = workload.get("spec") or {}
    return (
        condition_true(workload, "QuotaReserved")
        and not condition_true(workload, "Finished")
        and spec.get("active") is not False
        and bool((workload.get("status") or {}).get("admission"))
    )


def _check_shape(workload: Mapping[str, Any]) -> None:
    meta = metadata(workload)
    where = f"Workload {meta.get('namespace', '')}/{meta.get('name', '')}"
    status = workload.get("status")
    for path, value in (("spec", workload.get("spec")), ("status", status)):
        if value is not None and not isinstance(value, Mapping):
            raise InvalidObject.at(f"{where}: {path}", "must be an object")
    admission = (status or {}).get("admission")
    if admission is not None and not isinstance(admission, Mapping):
        raise InvalidObject.at(f"{where}: status.admission", "must be an object")
    object_list((status or {}).get("conditions"), f"{where}: status.conditions")


def workload_usage(workload: Mapping[str, Any]) -> tuple[AssignedUse, ...]:
    """Every leaf domain an admitted TAS Workload takes; () when Kueue counts nothing for it.

    A malformed Workload raises InvalidObject naming it.
    """
    if not holds_quota(workload):
        return ()
    meta = metadata(workload)
    owner = (str(meta.get("namespace", "") or ""), str(meta.get("name", "") or ""))
    where = f"Workload {owner[0]}/{owner[1]}"
    try:
        admitted = workload_admission(workload) or {}
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidObject.at(f"{where}: status.admission", str(exc)) from exc
    raw = {str(a.get("name")): a for a in _assignments(workload, where)}
    templates = _pod_specs(workload, where)
    uses: list[AssignedUse] = []
    for name, podset in admitted.items():
        if not podset.domains:
            continue
        single = _single_pod(templates.get(name), raw.get(name, {}), podset.count, f"{where}: {name}")
        for flavor in sorted(set(podset.flavors.values())):
            for values, count in podset.domains:
                uses.append(AssignedUse(flavor, podset.levels, values, _scaled(single, count), owner))
    return tuple(uses)


def _assignments(workload: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    admission = (workload.get("status") or {}).get("admission") or {}
    return object_list(admission.get("podSetAssignments"), f"{where}: status.admission.podSetAssignments")


def _pod_specs(workload: Mapping[str, Any], where: str) -> dict[str, Mapping[str, Any]]:
    podsets = object_list((workload.get("spec") or {}).get("podSets"), f"{where}: spec.podSets")
    specs: dict[str, Mapping[str, Any]] = {}
    for podset in podsets:
        template = podset.get("template") or {}
        spec = template.get("spec") if isinstance(template, Mapping) else None
        if isinstance(spec, Mapping):
            specs[str(podset.get("name"))] = spec
    return specs


def _single_pod(
    spec: Mapping[str, Any] | None, assignment: Mapping[str, Any], count: int, where: str
) -> dict[str, int]:
    """The PodSet template's requests; without a template, its ``resourceUsage`` per pod."""
    if spec is not None:
        return stored_pod_requests(spec, f"{where}: template.spec")
    usage = string_map(assignment.get("resourceUsage"), f"{where}: resourceUsage")
    per_pod: dict[str, int] = {}
    for resource, text in usage.items():
        path = f"{where}: resourceUsage[{resource}]"
        total = canonical(resource, parse_quantity(text, path), path)
        per_pod[resource] = total // count if count > 0 else 0
    return per_pod


def _scaled(single: Mapping[str, int], count: int) -> Shape:
    requests = {name: amount * count for name, amount in single.items() if amount}
    requests[PODS] = requests.get(PODS, 0) + count
    return tuple(sorted(requests.items()))
