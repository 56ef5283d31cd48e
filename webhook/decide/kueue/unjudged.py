"""The PodSets of a workload tasgate did not judge, as Kueue will be asked for them.

A result that is not checked (no LocalQueue, no ClusterQueue or Topology in the state, a queue
without TAS, an object left out as unusable) still says what the workload asks for: each PodSet
with its count, per-pod requests and TAS request, unplaced (``judged`` False, no placements), so
`tasgate check` shows what Kueue will be asked for even where tasgate cannot say where it lands.
"""

from __future__ import annotations

from webhook.decide.verdicts import PodSetVerdict
from webhook.model.podset import WorkloadView


def unjudged(view: WorkloadView) -> tuple[PodSetVerdict, ...]:
    """One unplaced verdict per PodSet, in Kueue's order."""
    return tuple(
        PodSetVerdict(p.name, p.count, dict(p.pod_set.requests), p.request, injected=False, judged=False)
        for p in view.pod_sets
    )
