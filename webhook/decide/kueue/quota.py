"""Quota Kueue can never give: what no ClusterQueue flavor covers, or more than it will ever hold.

Kueue assigns flavors by quota before it places anything (``flavorassigner``). With its default
``quotaCheckStrategy: BlockUndeclared`` a PodSet that requests a resource no resource group of
its ClusterQueue covers gets ``resource <r> unavailable in ClusterQueue`` and waits forever; a
request above a flavor's potential capacity (``PotentialAvailable``: its nominal quota, plus
what its cohort may lend up to the borrowing limit) gets ``insufficient quota ... > maximum
capacity`` for that flavor. Outside a cohort that maximum is fixed: denied. In a cohort it is
only today's figure (the cohort may grow), so it is a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webhook.model.podset import PodSetView
from webhook.model.quantity import format_quantity
from webhook.state.kueue import ClusterQueue, FlavorQuota, ResourceGroup

PODS = "pods"


@dataclass(frozen=True)
class QuotaVerdict:
    never: tuple[str, ...] = ()  # reasons Kueue can never admit it (a denial)
    today: tuple[str, ...] = ()  # more than its cohort lends today (a warning)


def check_quota(
    pod_sets: Sequence[PodSetView], cq: ClusterQueue, cohort_members: Sequence[ClusterQueue]
) -> QuotaVerdict:
    """``cohort_members``: the other ClusterQueues of ``cq``'s cohort, which may lend to it."""
    never: list[str] = []
    today: list[str] = []
    totals: dict[str, int] = {}
    for p in pod_sets:
        count = p.pod_set.min_count or p.count  # partial admission: the least Kueue may admit
        for resource, amount in _requests(p, cq).items():
            if amount <= 0:
                continue
            if cq.group_covering(resource) is None:
                never.append(
                    f'PodSet "{p.name}" requests {resource}, which ClusterQueue "{cq.name}" does not cover: '
                    f'Kueue never admits it ("resource {resource} unavailable in ClusterQueue")'
                )
                continue
            totals[resource] = totals.get(resource, 0) + amount * count
    for resource, total in sorted(totals.items()):
        group = cq.group_covering(resource)
        assert group is not None
        # A flavor that states no quota for the resource is not Kueue's API (it requires one per
        # covered resource): nothing to judge by, so never a denial.
        known = [f for f in group.flavors if resource in f.nominal]
        if not known:
            continue
        most = max(_potential(f, resource, cq, cohort_members) for f in known)
        if total <= most:
            continue
        text = (
            f"it needs {resource}: {format_quantity(resource, total)}, more than any flavor of ClusterQueue "
            f'"{cq.name}" can hold ({format_quantity(resource, most)})'
        )
        if cq.cohort is None:
            never.append(f"{text}; with no cohort to borrow from, Kueue leaves it pending forever")
        else:
            today.append(
                f'{text} with what cohort "{cq.cohort}" lends today; it waits unless the cohort grows'
            )
    return QuotaVerdict(tuple(never), tuple(today))


def _requests(p: PodSetView, cq: ClusterQueue) -> Mapping[str, int]:
    """Per-pod requests as Kueue's quota counts them: ``pods`` only where a group covers it."""
    requests = dict(p.pod_set.requests)
    if cq.group_covering(PODS) is not None:
        requests[PODS] = 1
    return requests


def _potential(flavor: FlavorQuota, resource: str, cq: ClusterQueue, members: Sequence[ClusterQueue]) -> int:
    """``PotentialAvailable`` of one flavor, for a flat cohort of ClusterQueues."""
    nominal = flavor.nominal.get(resource, 0)
    if cq.cohort is None:
        return nominal
    lent = sum(_lendable(m, flavor.name, resource) for m in members)
    borrowing = flavor.borrowing_limit.get(resource)
    return nominal + (lent if borrowing is None else min(lent, borrowing))


def _lendable(member: ClusterQueue, flavor: str, resource: str) -> int:
    group: ResourceGroup | None = member.group_covering(resource)
    quotas = [f for f in group.flavors if f.name == flavor] if group else []
    return quotas[0].nominal.get(resource, 0) if quotas else 0
