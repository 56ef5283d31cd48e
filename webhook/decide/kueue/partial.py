"""Partial admission: how many pods Kueue admits when a Job's full count does not fit.

Kueue (``PodSetReducer.Search``, gate PartialAdmission on by default) binary-searches the
counts between the full count and the PodSet's minimum with Go's ``sort.Search`` and keeps the
largest that fits; only a batch Job (``kueue.x-k8s.io/job-min-parallelism``) has a minimum.
The same search, run against "now" and against the empty cluster, says what Kueue admits now
and what it could ever admit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from scorer import View
from scorer.model import Placement, PodSetRequest


def reduced(full: int, minimum: int, fits: Callable[[int], bool]) -> int | None:
    """The count Kueue's reducer settles on, or None when no count down to ``minimum`` fits.

    A line-for-line twin of ``PodSetReducer.Search`` for one PodSet: ``sort.Search`` over
    ``0..full-minimum`` (the count is ``full - i``), succeeding only when the index it returns
    is the last one that fit.
    """
    delta = full - minimum
    if delta <= 0:
        return None
    last_good = 0
    low, high = 0, delta + 1
    while low < high:
        middle = (low + high) // 2
        if fits(full - middle):
            last_good = middle
            high = middle
        else:
            low = middle + 1
    return full - low if low == last_good else None


def place_reduced(view: View, request: PodSetRequest, minimum: int) -> tuple[int, Placement] | None:
    """Kueue's reduced count on ``view`` and the placement there (None: even the minimum fails)."""
    seen: dict[int, Placement] = {}

    def fits(count: int) -> bool:
        seen[count] = view.place([replace(request, count=count)])[0]
        return seen[count].fits

    count = reduced(request.count, minimum, fits)
    return None if count is None else (count, seen[count])
