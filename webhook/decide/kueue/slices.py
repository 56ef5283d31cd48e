"""A slice size that does not divide the pod count: Kueue admits it, and the pods left over wait.

Kueue's webhook checks only ``size <= count``; its TAS placement then assigns ``count / size``
whole slices, and its topology ungater ungates no more pods than that assignment holds. What
becomes of the rest was measured on the real stack (tests/e2e_cluster/test_slices.py): they keep
the ``kueue.x-k8s.io/topology`` scheduling gate for as long as the placed pods run, start only in
the place of one that ends, and in a gang of the whole count none of the pods ever starts.

So a PodSet whose own pods carry a Coscheduling gang label (the case measured) never runs and is
denied with that cause (``partial-slice``). Any other (no gang, or a Volcano or operator gang whose
minMember may be no more than the placed pods: not measured) is admitted with a warning saying
what Kueue places. The policy adds no gang to such a workload (``decision._verdict``): that gang
would be what keeps it from ever running.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.decide.messages import short_level
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision
from webhook.model import annotations as ann
from webhook.model.podset import WorkloadView
from webhook.rules.tasgate import leftover_slices


def partial_slices(decision: Decision, view: WorkloadView) -> Decision:
    """When a PodSet's slices do not divide its count and ``decision`` would be allowed: denied as
    ``partial-slice`` for a gang the user made, else a warning. A denial keeps its own cause."""
    if not decision.allowed:
        return decision
    left = [(x, p) for p in view.pod_sets if (x := leftover_slices(p)) is not None]
    if not left:
        return decision
    ganged = [x for x, p in left if any(k in p.labels for k in ann.COSCHEDULING_LABELS)]
    if not ganged:
        notes = tuple(leftover_warning(x.pod_set, x.count, x.size, x.level) for x, _ in left)
        return replace(decision, warnings=(*decision.warnings, *notes))
    text = " ".join(leftover_text(x.pod_set, x.count, x.size, x.level) for x in ganged)
    audit = {**decision.audit, "decision": "deny", "reason": Reason.PARTIAL_SLICE.value}
    return replace(
        decision,
        allowed=False,
        reason=Reason.PARTIAL_SLICE,
        message=text,
        audit=audit,
        patch=(),
        pod_groups=(),
    )


def leftover_warning(pod_set: str, count: int, size: int, level: str) -> str:
    """The same facts for a workload without a gang: it runs, its leftover pods one by one later."""
    placed = count // size * size
    left = count - placed
    fix = " or ".join(str(n) for n in (placed, placed + size) if n > 0)
    return (
        f'PodSet "{pod_set}": Kueue admits {placed} of {count} pods now, as {placed // size} whole '
        f"slice(s) of {size} per {short_level(level)}; the other {left} stay gated until a placed "
        f"pod ends, and then start in its place (no gang label added: a gang of all {count} would "
        f"never start). A multiple of {size} ({fix}) runs at once."
    )


def leftover_text(pod_set: str, count: int, size: int, level: str) -> str:
    """A slice size that does not divide the count: what Kueue and its ungater do, seen on the real
    stack (tests/e2e_cluster/test_slices.py), and the counts that would run whole."""
    placed = count // size * size
    left = count - placed
    pods = "1 pod gets no domain and stays" if left == 1 else f"{left} pods get no domain and stay"
    fix = " or ".join(str(n) for n in (placed, placed + size) if n > 0)
    return (
        f'PodSet "{pod_set}": Kueue admits {placed} of {count} pods, as {placed // size} whole '
        f"slice(s) of {size} per {short_level(level)}; {pods} gated: Kueue's topology "
        f"ungater starts them only in the place of a pod that ends, and in a gang of all {count} pods none "
        f"starts. Use a count that is a multiple of {size} ({fix})."
    )
