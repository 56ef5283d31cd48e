"""Bound pods' requests per node *by priority*: what Kubernetes v1.37's group preemption may take.

When a pod group does not fit, the v1.37 kube-scheduler's ``PodGroupPostFilter``
(``framework/preemption/podgrouppreemption.go``) removes every pod of lower priority than the
group from the whole cluster, re-runs the group's placement (topology included) and, when it now
fits, evicts the victims it needs and binds the group. So "fits after preemption" is "fits on the
usage of the pods at or above its priority".

Kept compactly, one flat mapping per node beside its usage: each resource under the key
``"<resource>@<priority>"`` (a pod's ``spec.priority``, which admission always sets), so the live
writer keeps it in the same copy-on-write shards as usage (`state.snapshot_usage.UsageShards`)
and a dump's fold the same way. Pods of priority 0 (no class, no global default: most pods of
most clusters) are not kept: they are the node's usage less everything kept, so the cluster that
ranks nothing pays nothing for this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Requests = Mapping[str, int]
SEP = "@"


def stored_priority(obj: Mapping[str, Any]) -> int:
    """A bound pod's ``spec.priority`` (set by admission from its class), 0 when absent."""
    spec = obj.get("spec")
    value = spec.get("priority") if isinstance(spec, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def ranked(items: Iterable[tuple[str, int]], priority: int) -> list[tuple[str, int]]:
    """A pod's requests under its priority's keys."""
    return [(f"{name}{SEP}{priority}", amount) for name, amount in items]


def add_ranked(into: dict[str, dict[str, int]], node: str, requests: Requests, priority: int) -> None:
    """Count one pod's requests on ``node`` under its priority (a dump's fold); priority 0 is not kept."""
    if priority == 0:
        return
    total = into.setdefault(node, {})
    for key, amount in ranked(requests.items(), priority):
        total[key] = total.get(key, 0) + amount


def lower_than(usage: Requests, ranked_usage: Requests, priority: int) -> dict[str, int]:
    """The requests of a node's pods below ``priority``: what preemption frees there. Above 0 that
    is its usage less every kept pod at or above ``priority``; at or below 0, the kept pods below."""
    kept: dict[str, int] = {}
    for key, amount in ranked_usage.items():
        name, _, rank = key.rpartition(SEP)
        if (int(rank) >= priority) if priority > 0 else (int(rank) < priority):
            kept[name] = kept.get(name, 0) + amount
    if priority <= 0:
        return kept
    return {r: n - kept.get(r, 0) for r, n in usage.items() if n - kept.get(r, 0) > 0}


def after_preemption(
    usage: Mapping[str, Requests], ranked_usage: Mapping[str, Requests], priority: int
) -> tuple[dict[str, Requests], int]:
    """``usage`` (node -> requests) without every pod below ``priority``, and how many pods that
    evicts at most; nodes with nothing to free keep their usage."""
    out = dict(usage)
    victims = 0
    nodes = usage if priority > 0 else ranked_usage  # at or below 0 only kept pods are below
    for node in nodes:
        have = usage.get(node, {})
        freed = lower_than(have, ranked_usage.get(node, {}), priority)
        if not freed:
            continue
        victims += freed.get("pods", 0)
        out[node] = {r: have.get(r, 0) - freed.get(r, 0) for r in have}
    return out, victims
