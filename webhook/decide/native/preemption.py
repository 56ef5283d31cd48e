"""Kubernetes v1.37's group preemption, predicted: a group that does not fit now but does once
every lower-priority pod is gone is placed there by the kube-scheduler (``PodGroupPostFilter``
evicts the victims it needs, nominates the nodes and binds the group on its next cycle), so it is
admitted, with the number of pods it may evict. ``preemptionPolicy: Never`` preempts nothing.

Only pods that count on their node are victims here (a Kueue TAS pod counts through its Workload's
assignment instead): a group that would fit only by evicting those reads as "must wait", never
as a denial.
"""

from __future__ import annotations

from collections.abc import Mapping

from scorer.native import NativePlacement, NativeRequest, place_native
from webhook.decide.native.priority import group_rank
from webhook.decide.native.subject import Group
from webhook.state.cluster import ClusterState
from webhook.state.preemptible import after_preemption

Usage = Mapping[str, Mapping[str, int]]


def preempting(g: Group, req: NativeRequest, state: ClusterState) -> tuple[NativePlacement, int] | None:
    """The group's placement once the pods below its priority are evicted, and how many pods
    that is at most; None when it may not preempt, nothing is below it, or it still does not fit."""
    freed = freed_usage(g, state)
    if freed is None:
        return None
    usage, victims = freed
    found = place_native(state.nodes, req, usage, empty=False, nonzero=state.native.nonzero)
    return (found, victims) if found.fits else None


def freed_usage(g: Group, state: ClusterState) -> tuple[Usage, int] | None:
    """Usage without the pods below the group's priority, when it is a v1.37 group that may
    preempt and some pod is below it."""
    rank = group_rank(g, state)
    if rank is None or not rank[1]:
        return None
    usage: Usage = state.usage if state.usage is not None else {n.name: n.usage for n in state.nodes}
    freed, victims = after_preemption(usage, state.ranked_usage, rank[0])
    return (freed, victims) if victims else None


def preemption_text(name: str, victims: int) -> str:
    return (
        f'pod group "{name}" fits now only by preemption: the kube-scheduler evicts lower-priority '
        f"pods for it (at most {victims} of them), then binds it"
    )
