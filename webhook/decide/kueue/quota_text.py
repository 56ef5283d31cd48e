"""What a verdict says about quota in use: Kueue's own words when it waits, and borrowing.

Both are admission warnings, which the API server truncates at 256 characters: Kueue's reasons
come first, as many as fit whole, and the count of those left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide.kueue.quota_now import QueueQuota, QuotaFit
from webhook.decide.messages import ADMISSION_WARNING_LIMIT, clip
from webhook.model.quantity import format_quantity

QUOTED = 'Kueue: "'  # what precedes Kueue's own reasons in a waits-for-quota warning


def waits_for_quota(pod_set: str, reasons: Sequence[str]) -> str:
    """The topology fits now, the quota free now does not. Kueue's reasons (``Assignment.Message``
    sorts them and joins them with ", ") as many as the warning holds."""
    head = f'PodSet "{pod_set}" waits for quota in use ({QUOTED}'
    ordered = sorted(reasons)
    for kept in range(len(ordered), 0, -1):
        more = len(ordered) - kept
        text = f'{head}{", ".join(ordered[:kept])}"{f", {more} more" if more else ""})'
        if len(text) <= ADMISSION_WARNING_LIMIT:
            return text
    return clip(f'{head}{", ".join(ordered)}")')


def borrowing_note(fit: QuotaFit, quota: QueueQuota) -> tuple[str, ...]:
    """Admitted by borrowing: what goes over the ClusterQueue's nominal quota, and from where."""
    if not fit.borrow or not fit.borrowed:
        return ()
    parts = [
        f"{format_quantity(r, total)} of its {format_quantity(r, nominal)} nominal {r} in flavor {flavor}"
        for flavor, r, total, nominal in fit.borrowed
    ]
    where = f'fits by borrowing from cohort "{quota.root}": ClusterQueue "{quota.cq.name}"'
    return (clip(f"{where} uses {', '.join(parts)}"),)
