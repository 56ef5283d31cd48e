"""What a verdict says about quota in use: Kueue's own words when it waits, and borrowing."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide.quota_now import QueueQuota, QuotaFit
from webhook.model.quantity import format_quantity


def kueue_message(pod_set: str, reasons: Sequence[str]) -> str:
    """``Assignment.Message`` of Kueue v0.19.2: the reasons sorted, joined with ", "."""
    return f"couldn't assign flavors to pod set {pod_set}: {', '.join(sorted(reasons))}"


def waits_for_quota(pod_set: str, reasons: Sequence[str]) -> str:
    """The topology fits now, the quota free now does not: it waits until quota is released."""
    return (
        f'PodSet "{pod_set}" waits for quota in use: Kueue keeps it pending '
        f'("{kueue_message(pod_set, reasons)}") until admitted workloads of its ClusterQueue or '
        "cohort release quota"
    )


def borrowing_note(fit: QuotaFit, quota: QueueQuota) -> tuple[str, ...]:
    """Admitted by borrowing: what goes over the ClusterQueue's nominal quota, and from where."""
    if not fit.borrow or not fit.borrowed:
        return ()
    parts = [
        f"{resource} in flavor {flavor}: {format_quantity(resource, total)} in use with it, "
        f"{format_quantity(resource, nominal)} nominal"
        for flavor, resource, total, nominal in fit.borrowed
    ]
    return (
        f'fits by borrowing from cohort "{quota.root}": ClusterQueue "{quota.cq.name}" goes over its '
        f"nominal quota ({'; '.join(parts)}); Kueue may reclaim borrowed quota for the lenders",
    )
