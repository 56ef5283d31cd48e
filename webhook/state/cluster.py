"""Cluster state as tasgate needs it, built from plain Kubernetes objects.

The same code reads a `kubectl get -o yaml` dump for `tasgate check` and the objects a live
watch delivers. Quantities are parsed here, once per object. Usage is what Kueue counts
(`state.workloads`): admitted TAS Workloads' assignments per leaf domain, and bound pods that
are not TAS pods; without any Workload to read (a dump without them, Kueue not installed) every
bound, non-terminal pod counts from its node. A state is immutable once built:
the placement engine it scores with is given at build time, and scorer snapshots are built
once per TAS flavor (under a lock, so concurrent decisions never build twice) and kept for the
life of the state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from scorer import Cluster, Engine
from scorer.ledger import FreeLedger
from scorer.model import HOSTNAME_LABEL, PODS, Node, Taint, Toleration
from webhook.model.podrequests import NO_DEFAULTS, PodDefaults, stored_pod_requests
from webhook.model.quantity import canonical, parse_quantity
from webhook.model.workloads import RuntimeKey
from webhook.state.defaults import limit_range_defaults, runtime_overhead
from webhook.state.fields import metadata, object_list, string_map
from webhook.state.kueue import ClusterQueue, Flavor, LocalQueue, Topology, add_kueue_object
from webhook.state.workloads import AssignedUse, Scope, is_tas_pod, workload_usage

KUEUE_GROUP = "kueue.x-k8s.io"
TRAINER_GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = frozenset({"TrainingRuntime", "ClusterTrainingRuntime"})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class ClusterState:
    """Everything placement depends on at one generation; immutable once built."""

    nodes: tuple[Node, ...] = ()
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    flavors: Mapping[str, Flavor] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], LocalQueue] = field(default_factory=dict)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    runtimes: Mapping[RuntimeKey, Mapping[str, Any]] = field(default_factory=dict)  # Trainer runtimes
    limit_ranges: Mapping[str, PodDefaults] = field(default_factory=dict)  # namespace -> summary
    overheads: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # RuntimeClass
    # Watched kinds the API server does not serve (live mode); empty when not known (files).
    unserved: frozenset[str] = frozenset()
    generation: int = 0
    engine: Engine | None = None  # the placement engine snapshots use (None: the default one)
    # Node name -> requests its pods use, when kept apart from the nodes (live mode); else None
    # and each node's own usage counts.
    usage: Mapping[str, Mapping[str, int]] | None = None
    # Admitted TAS Workloads' usage per leaf domain, subtracted in the snapshots that see it.
    assigned: tuple[AssignedUse, ...] = ()
    _snapshots: dict[tuple[object, ...], Cluster] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def flavor_snapshot(self, flavor: Flavor, topology: Topology) -> Cluster:
        """The scorer snapshot of one TAS flavor."""
        key: tuple[object, ...] = ("flavor", flavor.name, topology.levels)
        return self._snapshot(key, topology.name, topology.levels, flavor.node_labels, flavor.tolerations)

    def levels_snapshot(self, name: str, levels: Sequence[str]) -> Cluster:
        """A snapshot over every node for a topology given by levels alone (policy default)."""
        return self._snapshot(("levels", name, tuple(levels)), name, tuple(levels), {}, ())

    def _snapshot(
        self,
        key: tuple[object, ...],
        name: str,
        levels: Sequence[str],
        node_labels: Mapping[str, str],
        tolerations: Sequence[Toleration],
    ) -> Cluster:
        found = self._snapshots.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._snapshots.get(key)
            if found is None:
                found = Cluster.build(
                    name,
                    levels,
                    self.nodes,
                    node_labels,
                    tolerations,
                    self.generation,
                    self.engine,
                    self.usage,
                )
                found = self._with_assigned(key, found)
                self._snapshots[key] = found
        return found

    def scope(self, key: tuple[object, ...]) -> Scope:
        """Which assigned usage the snapshot ``key`` (as `snapshots` keys them) sees."""
        levels_of = {
            name: topology.levels
            for name, flavor in self.flavors.items()
            if (topology := self.topologies.get(flavor.topology_name or "")) is not None and topology.levels
        }
        hostname = frozenset(name for name, levels in levels_of.items() if levels[-1] == HOSTNAME_LABEL)
        kind, name, levels = key[0], key[1], key[2]
        flavor = str(name) if kind == "flavor" else None
        return Scope(
            flavor, tuple(levels) if isinstance(levels, tuple) else (), frozenset(levels_of), hostname
        )

    def _with_assigned(self, key: tuple[object, ...], cluster: Cluster) -> Cluster:
        """``cluster`` with the assigned usage its scope sees taken from its free capacity."""
        if not self.assigned:
            return cluster
        scope = self.scope(key)
        ledger = FreeLedger(cluster)
        for use in self.assigned:
            if scope.sees(use):
                ledger.add_domain(use.values, use.requests, 1)
        return ledger.publish(self.generation)

    def prepare(self, default_levels: Iterable[tuple[str, tuple[str, ...]]] = ()) -> ClusterState:
        """Build every TAS flavor's snapshot (and those of ``default_levels``) now, so no
        decision on this state ever builds one; returns the state itself."""
        for flavor in self.flavors.values():
            topology = self.topologies.get(flavor.topology_name or "")
            if topology is not None and topology.levels:
                self.flavor_snapshot(flavor, topology)
        for name, levels in default_levels:
            if levels:
                self.levels_snapshot(name, levels)
        return self

    def snapshots(self) -> Mapping[tuple[object, ...], Cluster]:
        """The snapshots built so far, by key (a copy)."""
        with self._lock:
            return dict(self._snapshots)

    def with_usage(
        self,
        usage: Mapping[str, Mapping[str, int]],
        snapshots: Mapping[tuple[object, ...], Cluster],
        generation: int,
        assigned: tuple[AssignedUse, ...],
    ) -> ClusterState:
        """The next generation when only usage changed (pods, admitted Workloads): same nodes
        and objects, the writer's snapshots (trees shared, free capacity current) and usage."""
        return replace(
            self,
            usage=usage,
            assigned=assigned,
            generation=generation,
            _snapshots=dict(snapshots),
            _lock=threading.Lock(),
        )

    def without_workload(self, workload: tuple[str, str]) -> ClusterState:
        """This state as it was before ``workload`` (namespace, name) was admitted: what a
        prediction for its own admission is made on, when the state already counts it. Its
        snapshots are built afresh (lazily): a once-per-admission cost, never a review's."""
        kept = tuple(use for use in self.assigned if use.workload != workload)
        if len(kept) == len(self.assigned):
            return self
        return replace(self, assigned=kept, _snapshots={}, _lock=threading.Lock())

    def pod_defaults(self, namespace: str) -> PodDefaults:
        """What LimitRanges of ``namespace`` and RuntimeClasses fill into its pod specs."""
        found = self.limit_ranges.get(namespace, NO_DEFAULTS)
        return replace(found, overheads=self.overheads) if self.overheads else found

    def level_has_nodes(self, level: str) -> bool:
        return any(level in n.labels for n in self.nodes)


def build_state(
    objects: Iterable[Mapping[str, Any]],
    generation: int = 0,
    engine: Engine | None = None,
    nodes: Sequence[Node] | None = None,
    unserved: Iterable[str] = (),
    usage: Mapping[str, Mapping[str, int]] | None = None,
    assigned: tuple[AssignedUse, ...] | None = None,
) -> ClusterState:
    """Fold any mix of Nodes, Pods, Namespaces, Workloads and Kueue objects into one state.

    Objects of other kinds are ignored. A malformed object raises InvalidObject naming it.
    ``nodes``, when given, are already parsed (the live mirror keeps them so), with ``usage``
    per node name and ``assigned`` (Workloads' usage) apart from them, and Node, Pod and
    Workload objects in ``objects`` are then not expected. TAS pods count from their nodes only
    when no Workload is given: their Workloads count them otherwise, as Kueue does.
    """
    raw_nodes: dict[str, Mapping[str, Any]] = {}
    from_pods: dict[str, dict[str, int]] = {}
    from_tas_pods: dict[str, dict[str, int]] = {}
    workloads: list[AssignedUse] = []
    seen_workloads = False
    topologies: dict[str, Topology] = {}
    flavors: dict[str, Flavor] = {}
    cqs: dict[str, ClusterQueue] = {}
    lqs: dict[tuple[str, str], LocalQueue] = {}
    namespaces: dict[str, Mapping[str, str]] = {}
    runtimes: dict[RuntimeKey, Mapping[str, Any]] = {}
    limit_ranges: dict[str, list[Mapping[str, Any]]] = {}
    overheads: dict[str, Mapping[str, Fraction]] = {}
    for obj in objects:
        kind, group = obj.get("kind"), str(obj.get("apiVersion", "")).split("/")[0]
        meta = metadata(obj)
        name = str(meta.get("name", ""))
        if kind == "Node" and group == "v1":
            raw_nodes[name] = obj
        elif kind == "Pod" and group == "v1":
            _add_pod_usage(obj, from_tas_pods if is_tas_pod(obj) else from_pods)
        elif kind == "Workload" and group == KUEUE_GROUP:
            seen_workloads = True
            workloads.extend(workload_usage(obj))
        elif kind == "Namespace" and group == "v1":
            namespaces[name] = string_map(meta.get("labels"), f"Namespace {name}: metadata.labels")
        elif kind == "LimitRange" and group == "v1":
            limit_ranges.setdefault(str(meta.get("namespace", "")), []).append(obj)
        elif kind == "RuntimeClass" and group == "node.k8s.io":
            overheads[name] = runtime_overhead(obj)
        elif group == TRAINER_GROUP and kind in RUNTIME_KINDS:
            runtimes[(str(kind), str(meta.get("namespace", "") or ""), name)] = obj
        elif group == KUEUE_GROUP:
            add_kueue_object(
                obj, str(kind), name, str(meta.get("namespace", "")), topologies, flavors, cqs, lqs
            )
    if not seen_workloads:
        _merge(from_tas_pods, from_pods)
    if nodes is None:
        nodes = [parse_node(obj, from_pods.get(name, {})) for name, obj in sorted(raw_nodes.items())]
    return ClusterState(
        nodes=tuple(nodes),
        topologies=topologies,
        flavors=flavors,
        cluster_queues=cqs,
        local_queues=lqs,
        namespaces=namespaces,
        runtimes=runtimes,
        limit_ranges={ns: limit_range_defaults(objs) for ns, objs in limit_ranges.items()},
        overheads=overheads,
        unserved=frozenset(unserved),
        generation=generation,
        engine=engine,
        usage=usage,
        assigned=tuple(workloads) if assigned is None else assigned,
    )


def parse_node(obj: Mapping[str, Any], usage: Mapping[str, int]) -> Node:
    """A Node as the scorer needs it: labels, parsed allocatable, taints, readiness, cordon."""
    meta = metadata(obj)
    name = str(meta.get("name", ""))
    where = f"Node {name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = {}
    for resource, value in string_map(status.get("allocatable"), f"{where}: status.allocatable").items():
        path = f"{where}: status.allocatable[{resource}]"
        allocatable[resource] = canonical(resource, parse_quantity(value, path), path)
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("effect", "")), str(t.get("value", "") or ""))
        for t in object_list(spec.get("taints"), f"{where}: spec.taints")
    )
    conditions = object_list(status.get("conditions"), f"{where}: status.conditions")
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return Node(
        name=name,
        labels=string_map(meta.get("labels"), f"{where}: metadata.labels"),
        allocatable=allocatable,
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        usage=dict(usage),
    )


def pod_usage(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]] | None:
    """(node, requests incl. one `pods`) of a bound, non-terminal pod; None otherwise."""
    spec = obj.get("spec") or {}
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = (obj.get("status") or {}).get("phase")
    if not node or phase in TERMINAL_PHASES:
        return None
    meta = metadata(obj)
    where = f"Pod {meta.get('namespace', '')}/{meta.get('name', '')}: spec"
    requests = stored_pod_requests(spec, where)
    requests[PODS] = requests.get(PODS, 0) + 1
    return str(node), requests


def _add_pod_usage(obj: Mapping[str, Any], usage: dict[str, dict[str, int]]) -> None:
    found = pod_usage(obj)
    if found is None:
        return
    node, requests = found
    _merge({node: requests}, usage)


def _merge(source: Mapping[str, Mapping[str, int]], into: dict[str, dict[str, int]]) -> None:
    """Add per-node requests of ``source`` into ``into``."""
    for node, requests in source.items():
        target = into.setdefault(node, {})
        for resource, amount in requests.items():
            target[resource] = target.get(resource, 0) + amount
