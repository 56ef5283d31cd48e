"""Which topology applies to a workload: queue → LocalQueue → ClusterQueue → TAS flavors.

Missing or inconsistent Kueue objects are a `problem` of the resolution, reported as such;
they are never dressed up as "does not fit". A Kueue running with ``TopologyAwareScheduling`` off
has no TAS flavor (``cache.go: handleTASFlavor``): nothing resolves to a target then (``tas_off``),
and each target carries the placement gates its Kueue runs with (`state.kueue_gates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scorer import Cluster
from scorer.model import TopologyRequest
from webhook.decide.kueue.quota_now import QueueQuota, queue_quota
from webhook.decide.policy import DefaultTopology
from webhook.model.podset import PodSetView
from webhook.state.admission_checks import Delay
from webhook.state.cluster import ClusterState
from webhook.state.kueue import Flavor, Topology
from webhook.state.kueue_gates import DEFAULTS, PlacementGates


@dataclass(frozen=True)
class Target:
    """One TAS flavor (or the policy's default topology) a workload could be placed on."""

    flavor: str  # "" for the policy's default topology
    topology: Topology
    snapshot: Cluster
    node_labels: Mapping[str, str] = field(default_factory=dict)  # the flavor's node selection
    quota: QueueQuota | None = None  # its ClusterQueue quota now (`kueue.quota_now`); None: not judged
    # Kueue places this flavor's topology after an admission check (provisioned capacity) or on a
    # worker cluster (MultiKueue), not on today's nodes: `state.admission_checks`.
    delay: Delay | None = None
    gates: PlacementGates = DEFAULTS  # the placement gates the cluster's Kueue runs with


@dataclass(frozen=True)
class Resolution:
    """The TAS targets a workload may go to, in Kueue's flavor order.

    ``tas_only``: every flavor of the ClusterQueue is a TAS flavor (Kueue's ``IsTASOnly``);
    only then does Kueue apply implied TAS to a PodSet without TAS annotations. In a mixed
    queue such a PodSet goes to a non-TAS flavor, and an annotated one to a TAS flavor.
    """

    targets: tuple[Target, ...]
    queue: str | None = None
    cluster_queue: str | None = None
    problem: str | None = None  # a Kueue configuration problem, said plainly
    tas_only: bool = True
    tas_off: bool = False  # its targets are dropped: Kueue runs with TopologyAwareScheduling off


def resolve(
    state: ClusterState, namespace: str, queue: str | None, default: DefaultTopology | None
) -> Resolution:
    if queue:
        found = _from_queue(state, namespace, queue)
    else:
        found = Resolution(()) if default is None else _from_default(state, default)
    if found.targets and not state.kueue_release.placement.tas:
        return replace(found, targets=(), tas_off=True)
    return found


def _from_queue(state: ClusterState, namespace: str, queue: str) -> Resolution:
    lq = state.local_queues.get((namespace, queue))
    if lq is None:
        return Resolution((), queue, problem=f'LocalQueue "{namespace}/{queue}" not found')
    cq = state.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        problem = f'ClusterQueue "{lq.cluster_queue}" of LocalQueue "{namespace}/{queue}" not found'
        return Resolution((), queue, lq.cluster_queue, problem)
    usable: list[tuple[Flavor, Topology]] = []
    problems: list[str] = []
    for name in cq.flavors:
        flavor = state.flavors.get(name)
        if flavor is None:
            problems.append(f'ResourceFlavor "{name}" of ClusterQueue "{cq.name}" not found')
            continue
        topology = _flavor_topology(state, flavor, problems)
        if topology is not None:
            usable.append((flavor, topology))
    quota = queue_quota(state, cq.name) if usable else None  # the ClusterQueue's: every target shares it
    targets = [
        Target(
            flavor.name,
            topology,
            state.flavor_snapshot(flavor, topology),
            flavor.node_labels,
            quota,
            state.topology_delay(cq, flavor.name),
            state.kueue_release.placement,
        )
        for flavor, topology in usable
    ]
    unusable = "; ".join(problems) if problems and not targets else None
    tas_only = all(state.flavors.get(n) is not None and state.flavors[n].topology_name for n in cq.flavors)
    return Resolution(tuple(targets), queue, cq.name, problem=unusable, tas_only=tas_only)


def _flavor_topology(state: ClusterState, flavor: Flavor, problems: list[str]) -> Topology | None:
    """The flavor's Topology, when it is a TAS flavor whose Topology is usable."""
    if flavor.topology_name is None:
        return None
    topology = state.topologies.get(flavor.topology_name)
    if topology is None:
        problems.append(f'Topology "{flavor.topology_name}" of ResourceFlavor "{flavor.name}" not found')
        return None
    if not topology.levels:
        problems.append(f'Topology "{topology.name}" has no levels')
        return None
    return topology


def default_snapshot_levels(
    state: ClusterState, default: DefaultTopology | None
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The (name, levels) of the snapshot a policy's default topology is placed on, if any:
    what the live writer builds ahead so no decision builds it."""
    topology = _default_topology(state, default)
    return () if topology is None else ((topology.name, topology.levels),)


def _default_topology(state: ClusterState, default: DefaultTopology | None) -> Topology | None:
    if default is None:
        return None
    if default.levels:
        return Topology(default.name or "default", default.levels)
    # "checked against this Topology (if it exists)": a cluster without it has no TAS here.
    return state.topologies.get(default.name)


def _from_default(state: ClusterState, default: DefaultTopology) -> Resolution:
    topology = _default_topology(state, default)
    if topology is None:
        return Resolution(())
    snapshot = state.levels_snapshot(topology.name, topology.levels)
    return Resolution((Target("", topology, snapshot, gates=state.kueue_release.placement),))


def with_levels(targets: Sequence[Target], pod_sets: Sequence[PodSetView]) -> tuple[Target, ...]:
    """Kueue skips a TAS flavor whose topology lacks a requested level (``HasLevel``) and tries
    the next. With none left, the first is kept: the rules then say which level is missing."""
    wanted = {level for p in pod_sets for level in _requested_levels(p.request)}
    usable = tuple(t for t in targets if wanted <= set(t.topology.levels))
    return usable or tuple(targets[:1])


def _requested_levels(request: TopologyRequest) -> list[str]:
    found = [request.level, request.slice_level, *(layer.level for layer in request.slice_layers)]
    return [level for level in found if level]
