"""The quota an admitted Workload holds, as Kueue's cache counts it against its ClusterQueue.

Kueue (``pkg/cache/scheduler``: ``clusterQueue.addWorkload`` → ``updateWorkloadUsage``) charges a
Workload that holds a quota reservation (``workload.HasActiveQuotaReservation``: ``QuotaReserved``
True, not ``Finished``, not deactivated) to ``status.admission.clusterQueue``, per flavor and
resource: ``podSetAssignments[].resourceUsage[r]`` on the flavor ``flavors[r]``
(``workload.totalRequestsFromAdmission``). Reclaimable pods (``status.reclaimablePods``) shrink
it: the usage is divided by the admitted count and multiplied by the count left. That usage,
not the pods, is what a ClusterQueue has "in use" (``status.flavorsReservation``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.model.quantity import canonical, parse_quantity
from webhook.state.fields import metadata, object_list, string_map
from webhook.state.priorities import charged_priority
from webhook.state.workloads import holds_quota

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True, slots=True)
class QuotaCharge:
    """One Workload's quota usage in its ClusterQueue: ((flavor, resource), amount) pairs."""

    workload: tuple[str, str]  # (namespace, name)
    cluster_queue: str
    amounts: tuple[tuple[FlavorResource, int], ...]
    # What preemption orders candidates by (`state.priorities.charged_priority`).
    priority: int = 0
    uid: str = ""
    reserved_at: str = ""  # QuotaReserved lastTransitionTime (RFC 3339)
    evicted: bool = False


def quota_charge(workload: Mapping[str, Any]) -> QuotaCharge | None:
    """What ``workload`` holds of its ClusterQueue's quota; None when Kueue charges nothing.

    A malformed admission raises InvalidObject naming the Workload.
    """
    if not holds_quota(workload):
        return None
    meta = metadata(workload)
    owner = (str(meta.get("namespace", "") or ""), str(meta.get("name", "") or ""))
    where = f"Workload {owner[0]}/{owner[1]}: status.admission"
    status = workload.get("status") or {}
    admission = status.get("admission") or {}
    cluster_queue = str(admission.get("clusterQueue") or "")
    if not cluster_queue:
        return None
    spec_counts, after = _counts_after_reclaim(workload, status, where)
    totals: dict[FlavorResource, int] = {}
    assignments = object_list(admission.get("podSetAssignments"), f"{where}.podSetAssignments")
    for i, assignment in enumerate(assignments):
        path = f"{where}.podSetAssignments[{i}]"
        flavors = string_map(assignment.get("flavors"), f"{path}.flavors")
        usage = string_map(assignment.get("resourceUsage"), f"{path}.resourceUsage")
        name = str(assignment.get("name"))
        count = assignment.get("count", spec_counts.get(name))  # Kueue: ptr.Deref(psa.Count, spec)
        left = after.get(name)
        for resource, text in usage.items():
            flavor = flavors.get(resource)
            if flavor is None:
                continue  # no flavor, no quota charged (Kueue's #8079: zero-quantity requests)
            amount = canonical(resource, parse_quantity(text, f"{path}.resourceUsage[{resource}]"))
            amount = _after_reclaim(amount, count, left)
            totals[(flavor, resource)] = totals.get((flavor, resource), 0) + amount
    return QuotaCharge(owner, cluster_queue, tuple(sorted(totals.items())), *charged_priority(workload))


def _counts_after_reclaim(
    workload: Mapping[str, Any], status: Mapping[str, Any], where: str
) -> tuple[dict[str, int], dict[str, int]]:
    """Each PodSet's spec count, and (``podSetsCountsAfterReclaim``) that count less its
    reclaimable pods where some are."""
    reclaimed = {
        str(entry.get("name")): entry.get("count")
        for entry in object_list(status.get("reclaimablePods"), f"{where}: status.reclaimablePods")
    }
    spec: dict[str, int] = {}
    after: dict[str, int] = {}
    for podset in object_list((workload.get("spec") or {}).get("podSets"), f"{where}: spec.podSets"):
        name, count = str(podset.get("name")), podset.get("count")
        if isinstance(count, int) and _is_int(count):
            spec[name] = count
        gone = reclaimed.get(name)
        if isinstance(count, int) and isinstance(gone, int) and _is_int(count) and _is_int(gone) and gone > 0:
            after[name] = count - min(gone, count)
    return spec, after


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _after_reclaim(amount: int, count: object, left: int | None) -> int:
    """Scaled down only when fewer pods are left than admitted (``Requests.Divide`` then ``Mul``):
    a partially admitted PodSet keeps its usage."""
    if left is None or not isinstance(count, int) or isinstance(count, bool) or not 0 <= left < count:
        return amount
    return amount // count * left


def usage_by_queue(charges: Iterable[QuotaCharge]) -> dict[str, dict[FlavorResource, int]]:
    """ClusterQueue -> (flavor, resource) -> quota in use: Kueue's ``ResourceNode.Usage``."""
    usage: dict[str, dict[FlavorResource, int]] = {}
    for charge in charges:
        into = usage.setdefault(charge.cluster_queue, {})
        for key, amount in charge.amounts:
            into[key] = into.get(key, 0) + amount
    return usage
