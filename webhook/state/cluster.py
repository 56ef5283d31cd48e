"""Cluster state as tasgate needs it, built from plain Kubernetes objects.

The same code reads a `kubectl get -o yaml` dump for `tasgate check` and the objects a live
watch delivers. Quantities are parsed here, once per object. A state is immutable once built:
the placement engine it scores with is given at build time, and scorer snapshots are built
once per TAS flavor (under a lock, so concurrent decisions never build twice) and kept for the
life of the state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scorer import Cluster, Engine
from scorer.model import PODS, Node, Taint, Toleration
from webhook.model.podrequests import pod_requests
from webhook.model.quantity import canonical, parse_quantity
from webhook.model.scheduling import parse_tolerations
from webhook.model.workloads import RuntimeKey
from webhook.wire.errors import InvalidObject

KUEUE_GROUP = "kueue.x-k8s.io"
TRAINER_GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = frozenset({"TrainingRuntime", "ClusterTrainingRuntime"})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Topology:
    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    topology_name: str | None  # None: not a TAS flavor


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    flavors: tuple[str, ...]  # every flavor of every resource group, in order, once


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


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
    generation: int = 0
    engine: Engine | None = None  # the placement engine snapshots use (None: the default one)
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
                    name, levels, self.nodes, node_labels, tolerations, self.generation, self.engine
                )
                self._snapshots[key] = found
        return found

    def level_has_nodes(self, level: str) -> bool:
        return any(level in n.labels for n in self.nodes)


def build_state(
    objects: Iterable[Mapping[str, Any]],
    generation: int = 0,
    engine: Engine | None = None,
    nodes: Sequence[Node] | None = None,
) -> ClusterState:
    """Fold any mix of Nodes, Pods, Namespaces and Kueue objects into one state.

    Objects of other kinds are ignored. A malformed object raises InvalidObject naming it.
    ``nodes``, when given, are already parsed with their usage (the live mirror keeps them so),
    and Node and Pod objects in ``objects`` are then not expected.
    """
    raw_nodes: dict[str, Mapping[str, Any]] = {}
    usage: dict[str, dict[str, int]] = {}
    topologies: dict[str, Topology] = {}
    flavors: dict[str, Flavor] = {}
    cqs: dict[str, ClusterQueue] = {}
    lqs: dict[tuple[str, str], LocalQueue] = {}
    namespaces: dict[str, Mapping[str, str]] = {}
    runtimes: dict[RuntimeKey, Mapping[str, Any]] = {}
    for obj in objects:
        kind, group = obj.get("kind"), str(obj.get("apiVersion", "")).split("/")[0]
        meta = _metadata(obj)
        name = str(meta.get("name", ""))
        if kind == "Node" and group == "v1":
            raw_nodes[name] = obj
        elif kind == "Pod" and group == "v1":
            _add_pod_usage(obj, usage)
        elif kind == "Namespace" and group == "v1":
            namespaces[name] = _str_map(meta.get("labels"), f"Namespace {name}: metadata.labels")
        elif group == TRAINER_GROUP and kind in RUNTIME_KINDS:
            runtimes[(str(kind), str(meta.get("namespace", "") or ""), name)] = obj
        elif group == KUEUE_GROUP:
            _add_kueue_object(
                obj, str(kind), name, str(meta.get("namespace", "")), topologies, flavors, cqs, lqs
            )
    if nodes is None:
        nodes = [parse_node(obj, usage.get(name, {})) for name, obj in sorted(raw_nodes.items())]
    return ClusterState(
        nodes=tuple(nodes),
        topologies=topologies,
        flavors=flavors,
        cluster_queues=cqs,
        local_queues=lqs,
        namespaces=namespaces,
        runtimes=runtimes,
        generation=generation,
        engine=engine,
    )


def _add_kueue_object(
    obj: Mapping[str, Any],
    kind: str,
    name: str,
    namespace: str,
    topologies: dict[str, Topology],
    flavors: dict[str, Flavor],
    cqs: dict[str, ClusterQueue],
    lqs: dict[tuple[str, str], LocalQueue],
) -> None:
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidObject.at(f"{kind} {name}: spec", "must be an object")
    if kind == "Topology":
        levels = tuple(
            str(lv.get("nodeLabel", "")) for lv in _list(spec.get("levels"), f"Topology {name}: spec.levels")
        )
        topologies[name] = Topology(name, levels)
    elif kind == "ResourceFlavor":
        flavors[name] = Flavor(
            name=name,
            node_labels=_str_map(spec.get("nodeLabels"), f"ResourceFlavor {name}: spec.nodeLabels"),
            tolerations=parse_tolerations(
                spec.get("tolerations"), f"ResourceFlavor {name}: spec.tolerations"
            ),
            topology_name=str(spec["topologyName"]) if spec.get("topologyName") else None,
        )
    elif kind == "ClusterQueue":
        names: list[str] = []
        for group in _list(spec.get("resourceGroups"), f"ClusterQueue {name}: spec.resourceGroups"):
            for flavor in _list(group.get("flavors"), f"ClusterQueue {name}: spec.resourceGroups[].flavors"):
                if str(flavor.get("name")) not in names:
                    names.append(str(flavor.get("name")))
        cqs[name] = ClusterQueue(name, tuple(names))
    elif kind == "LocalQueue":
        lqs[(namespace, name)] = LocalQueue(namespace, name, str(spec.get("clusterQueue", "")))


def parse_node(obj: Mapping[str, Any], usage: Mapping[str, int]) -> Node:
    """A Node as the scorer needs it: labels, parsed allocatable, taints, readiness, cordon."""
    meta = _metadata(obj)
    name = str(meta.get("name", ""))
    where = f"Node {name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = {}
    for resource, value in _str_map(status.get("allocatable"), f"{where}: status.allocatable").items():
        path = f"{where}: status.allocatable[{resource}]"
        allocatable[resource] = canonical(resource, parse_quantity(value, path), path)
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("effect", "")), str(t.get("value", "") or ""))
        for t in _list(spec.get("taints"), f"{where}: spec.taints")
    )
    conditions = _list(status.get("conditions"), f"{where}: status.conditions")
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return Node(
        name=name,
        labels=_str_map(meta.get("labels"), f"{where}: metadata.labels"),
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
    meta = _metadata(obj)
    where = f"Pod {meta.get('namespace', '')}/{meta.get('name', '')}: spec"
    requests = pod_requests(spec, where)
    requests[PODS] = requests.get(PODS, 0) + 1
    return str(node), requests


def _add_pod_usage(obj: Mapping[str, Any], usage: dict[str, dict[str, int]]) -> None:
    found = pod_usage(obj)
    if found is None:
        return
    node, requests = found
    into = usage.setdefault(node, {})
    for resource, amount in requests.items():
        into[resource] = into.get(resource, 0) + amount


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InvalidObject.at(f"{obj.get('kind')}: metadata", "must be an object")
    return meta


def _list(raw: object, path: str) -> list[Mapping[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, Mapping) for x in raw):
        raise InvalidObject.at(path, "must be a list of objects")
    return raw


def _str_map(raw: object, path: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidObject.at(path, "must be a map of strings")
    return {str(k): str(v) for k, v in raw.items()}
