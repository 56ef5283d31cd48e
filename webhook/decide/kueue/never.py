"""The texts of a PodSet that can never run as asked, and of what partial admission changes."""

from __future__ import annotations

from scorer.model import Mode, Placement
from webhook.decide import messages
from webhook.decide.kueue.topology import Target
from webhook.decide.policy import Policy
from webhook.decide.verdicts import PodSetVerdict
from webhook.model.podset import PodSetView


def partial_warnings(v: PodSetVerdict) -> list[str]:
    """What partial admission changes: fewer pods now, or never the full count."""
    out = []
    if v.admitted is not None:
        out.append(
            f'PodSet "{v.name}": Kueue admits {v.admitted} of {v.count} pods now '
            f"(partial admission, minimum {v.min_count})"
        )
    if v.admissible is not None:
        out.append(
            f'PodSet "{v.name}": at most {v.admissible} of {v.count} pods can ever run at once '
            f"(partial admission, minimum {v.min_count})"
        )
    return out


def never_message(
    v: PodSetVerdict, p: PodSetView, never: Placement, level: str, target: Target, policy: Policy
) -> str:
    """Why ``v`` can never fit one domain of ``level``, in numbers, with the advice that fits:
    a blocking cause (no node can hold one pod), else the largest domain and what limits it."""
    summary = messages.request_summary(v.requests, policy.gpu_resources)
    snapshot = target.snapshot
    where = messages.Where(
        target.flavor,
        target.node_labels,
        target.topology.name,
        len(snapshot.nodes),
        snapshot.largest_allocatable(),
    )
    cause = messages.blocking_cause(where, v.requests, never)
    if cause is not None:
        slices = messages.slices_of(v.request)
        return messages.never_fits(
            v.name, v.count, summary, level, never, None, None, cause=cause, slices=slices
        )
    view = target.snapshot.never
    row = never.level_row(level)
    best = row.best_domain if row else None
    limiting = " and ".join(view.limiting_resources(best, v.requests)) if best else None
    slices = messages.slices_of(v.request)
    spread = messages.spread_request(v.request, target.topology.levels[0])  # slices kept
    whole = view.place([p.scorer_request(spread)])[0]  # with the PodSet's tolerations and selectors
    total = v.count if whole.fits else messages.pods_held(whole, slices)
    spreads = v.request.mode is not Mode.REQUIRED
    at = v.request.level
    return messages.never_fits(
        v.name, v.count, summary, level, never, limiting, total, spreads, slices=slices, request_level=at
    )
