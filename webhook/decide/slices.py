"""A slice size that does not divide the pod count: Kueue admits it, and the pods left over never run.

Kueue's webhook checks only ``size <= count``; its TAS placement then assigns ``count / size``
whole slices, and its topology ungater ungates no more pods than that assignment holds. What
becomes of the rest was measured on the real stack (tests/e2e_cluster/test_slices.py): they keep
the ``kueue.x-k8s.io/topology`` scheduling gate for as long as the placed pods run, start only in
the place of one that ends, and in a gang of the whole count none of the pods ever starts. A
training gang so submitted never runs as asked, so it is denied with that cause (``partial-slice``),
and with the placement Kueue would make kept in the verdict.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.decide.messages import short_level
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision
from webhook.model.podset import WorkloadView
from webhook.rules.tasgate import leftover_slices


def partial_slices(decision: Decision, view: WorkloadView) -> Decision:
    """``decision`` denied as ``partial-slice`` when it would be allowed and a PodSet's slices do
    not divide its count; unchanged otherwise (a never-fits denial keeps its own cause)."""
    left = [x for x in map(leftover_slices, view.pod_sets) if x is not None]
    if not left or not decision.allowed:
        return decision
    text = " ".join(leftover_text(x.pod_set, x.count, x.size, x.level) for x in left)
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
