"""Which changes are the user's to judge, and what the policy may touch.

Kueue writes to the workloads it manages (start, stop, its webhook's pod-index offset); those
writes are never judged nor contradicted. A workload may also opt out of mutation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decide.policy import Policy
from webhook.decide.verdicts import Review
from webhook.model import annotations as ann
from webhook.model.workloads import suspended


def kueues_to_manage(review: Review, policy: Policy) -> bool:
    """Kueue starts a workload by unsuspending it and stops it by suspending it again, editing
    templates as it goes; a running workload is Kueue's to manage. An UPDATE of a workload that
    stays suspended (queued) is judged, and so is one that unsuspends it or suspends a running
    one unless Kueue asks: a user can neither start a queued gang around the gate nor send a
    running one back to the queue resized in the same write."""
    assert review.old_obj is not None
    before, after = suspended(review.old_obj), suspended(review.obj)
    if before is False:
        return after is not True or review.user in policy.kueue_users
    return after is False and review.user in policy.kueue_users


def opted_out(obj: Mapping[str, Any]) -> bool:
    """``tasgate.io/inject: "false"`` on the workload: validated and judged, never mutated."""
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    return isinstance(notes, Mapping) and str(notes.get(ann.INJECT_OPT_OUT, "")).lower() == "false"
