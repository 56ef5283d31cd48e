"""A leader and its workers that the user's own annotations let Kueue place apart.

Frameworks start a leader with its workers (LWS, a JobSet's leader job, an MPIJob launcher, a
PyTorchJob Master) and talk across them. Kueue places two PodSets together only when both carry
one ``podset-group-name``; each with its own required level is placed on its own, and nothing
says so. tasgate says it, naming the domains its placement puts each in, and what to write.
"""

from __future__ import annotations

from collections.abc import Sequence

from scorer.model import Mode
from webhook.decide import messages
from webhook.decide.verdicts import PodSetVerdict
from webhook.model import annotations as ann
from webhook.model.podset import PodSetView

PLACED_MODES = (Mode.REQUIRED, Mode.PREFERRED)


def split_warning(
    pod_sets: Sequence[PodSetView],
    verdicts: Sequence[PodSetVerdict],
    levels: Sequence[str],
) -> str | None:
    """The warning for a leader (count 1) and its workers placed in different domains now, each
    asked for at a level of its own and neither grouped; None otherwise."""
    if len(pod_sets) != 2 or min(p.count for p in pod_sets) != 1 or len(verdicts) != 2:
        return None
    if any(v.request.group or v.request.mode not in PLACED_MODES or not v.judged for v in verdicts):
        return None
    level = min(
        (v.request.level for v in verdicts if v.request.level in levels), key=levels.index, default=None
    )
    if level is None:
        return None
    places = [_domains(v, level, levels) for v in verdicts]
    if not places[0] or not places[1] or places[0] & places[1]:
        return None
    leader, workers = sorted(range(2), key=lambda i: pod_sets[i].count)
    short = messages.short_level(level)
    where = " and ".join(
        f'"{verdicts[i].name}" in {short} {", ".join(sorted(places[i]))}' for i in (leader, workers)
    )
    return (
        f"leader and workers are placed apart: {where}; give both templates the same "
        f"{ann.GROUP_NAME} to have Kueue place them together"
    )


def _domains(v: PodSetVerdict, level: str, levels: Sequence[str]) -> frozenset[str]:
    """The ``level`` values of the domains ``v`` is placed in now (empty: not placed now), read
    from the placement's own leaf paths: no walk over the cluster's nodes on a review."""
    assignment = v.now.assignment if v.now is not None and v.now.fits else None
    if assignment is None:
        return frozenset()
    depth = list(levels).index(level)
    return frozenset(path[depth] for path in assignment.leaf_paths() if len(path) == len(levels))
