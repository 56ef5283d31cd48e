"""Cluster state as tasgate needs it, built from plain Kubernetes objects.

The same code reads a `kubectl get -o yaml` dump for `tasgate check` and the objects a live
watch delivers. Objects are parsed once each (`state.fold`); one that does not parse is left
out alone and recorded in ``rejected`` (`state.rejected`), never failing the state. Usage is what Kueue counts
(`state.workloads`): admitted TAS Workloads' assignments per leaf domain, and bound pods that
are not TAS pods; without any Workload to read (a dump without them, Kueue not installed) every
bound, non-terminal pod counts from its node. A state is immutable once built:
the placement engine it scores with is given at build time, and scorer snapshots are built
once per TAS flavor (under a lock, so concurrent decisions never build twice) and kept for the
life of the state.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from scorer import Cluster, Engine
from scorer.model import Node, Toleration
from webhook.model.podrequests import NO_DEFAULTS, PodDefaults
from webhook.model.workloads import RuntimeKey
from webhook.state.admission_checks import AdmissionCheck, Delay, ProvisioningConfig, delay_for
from webhook.state.defaults import limit_range_defaults
from webhook.state.fold import Fold
from webhook.state.kueue import ClusterQueue, Cohort, Flavor, LocalQueue, Topology
from webhook.state.kueue_release import UNKNOWN, KueueRelease
from webhook.state.native import NativeIndex
from webhook.state.priorities import PriorityClasses
from webhook.state.quota_tree import QuotaTree
from webhook.state.quota_usage import QuotaCharge, usage_by_queue
from webhook.state.rejected import EVENT_PARSED_KINDS, Rejected
from webhook.state.snapshot_usage import moved, snapshot_scope
from webhook.state.workloads import AssignedUse, Scope


@dataclass(frozen=True)
class ClusterState:
    """Everything placement depends on at one generation; immutable once built."""

    nodes: tuple[Node, ...] = ()
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    flavors: Mapping[str, Flavor] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], LocalQueue] = field(default_factory=dict)
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    admission_checks: Mapping[str, AdmissionCheck] = field(default_factory=dict)
    provisioning_configs: Mapping[str, ProvisioningConfig] = field(default_factory=dict)
    multikueue_configs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # -> clusters
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    runtimes: Mapping[RuntimeKey, Mapping[str, Any]] = field(default_factory=dict)  # Trainer runtimes
    limit_ranges: Mapping[str, PodDefaults] = field(default_factory=dict)  # namespace -> summary
    overheads: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # RuntimeClass
    priority_classes: PriorityClasses = field(default_factory=PriorityClasses)  # `state.priorities`
    kueue_release: KueueRelease = UNKNOWN  # the Kueue the cluster runs (`state.kueue_release`)
    # Watched kinds the API server does not serve (live mode); empty when not known (files).
    unserved: frozenset[str] = frozenset()
    generation: int = 0
    engine: Engine | None = None  # the placement engine snapshots use (None: the default one)
    # Node name -> requests its pods use, when kept apart from the nodes (live mode); else None
    # and each node's own usage counts.
    usage: Mapping[str, Mapping[str, int]] | None = None
    # Node name -> its bound pods' requests by priority (`state.preemptible`): what the v1.37
    # kube-scheduler's group preemption may take.
    ranked_usage: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # Admitted TAS Workloads' usage per leaf domain, subtracted in the snapshots that see it.
    assigned: tuple[AssignedUse, ...] = ()
    # Admitted Workloads' quota usage in their ClusterQueues (`state.quota_usage`).
    charges: tuple[QuotaCharge, ...] = ()
    # Objects left out because tasgate cannot use them (malformed), sorted; `decide.kueue.depends`
    # answers "not checked" for a workload whose verdict depends on one of them.
    rejected: tuple[Rejected, ...] = ()
    # Native gang objects (scheduling.k8s.io/v1alpha2) and the Jobs they stand for (`state.native`).
    native: NativeIndex = field(default_factory=NativeIndex)
    # MultiKueue worker clusters by name, each its own state (`decide.kueue.multikueue`); empty: unknown.
    workers: Mapping[str, ClusterState] = field(default_factory=dict)
    # Worker clusters tasgate watches but cannot judge on now, and why (live mode,
    # `live.multikueue`): no state yet, a stale one, a kubeconfig it cannot read.
    unreached: Mapping[str, str] = field(default_factory=dict)
    _snapshots: dict[tuple[object, ...], Cluster] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Set by `without_workload`: the state its snapshots are derived from and the usage removed.
    _origin: tuple[ClusterState, tuple[AssignedUse, ...]] | None = field(
        default=None, repr=False, compare=False
    )

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
                found = self._snapshots[key] = self._made(key, name, levels, node_labels, tolerations)
        return found

    def _made(
        self,
        key: tuple[object, ...],
        name: str,
        levels: Sequence[str],
        node_labels: Mapping[str, str],
        tolerations: Sequence[Toleration],
    ) -> Cluster:
        """A snapshot built with the assigned usage its scope sees taken; for a state without a
        Workload (`without_workload`), its origin's snapshot with that Workload's usage given
        back: a ledger delta, the same numbers as a fresh build (a test holds it to that)."""
        if self._origin is not None:
            origin, removed = self._origin
            base = origin._snapshot(key, name, levels, node_labels, tolerations)
            return moved(base, removed, self.scope(key), self.generation, -1)
        usage, generation = self.usage, self.generation
        built = Cluster.build(
            name, levels, self.nodes, node_labels, tolerations, generation, self.engine, usage
        )
        return moved(built, self.assigned, self.scope(key), generation, 1) if self.assigned else built

    def scope(self, key: tuple[object, ...]) -> Scope:
        """Which assigned usage the snapshot ``key`` sees, under Kueue's TASHandleOverlappingFlavors."""
        return snapshot_scope(self.flavors, self.topologies, key, self.kueue_release.placement.overlapping)

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
        rejected: tuple[Rejected, ...] | None = None,
        charges: tuple[QuotaCharge, ...] | None = None,
        ranked_usage: Mapping[str, Mapping[str, int]] | None = None,
    ) -> ClusterState:
        """The next generation when only usage changed (pods, admitted Workloads): same nodes
        and objects, the writer's snapshots (trees shared, free capacity current) and usage;
        ``rejected``, when given, replaces the rejections (a pod or Workload left out or back)."""
        return replace(
            self,
            usage=usage,
            ranked_usage=self.ranked_usage if ranked_usage is None else ranked_usage,
            assigned=assigned,
            charges=self.charges if charges is None else charges,
            generation=generation,
            rejected=self.rejected if rejected is None else rejected,
            _snapshots=dict(snapshots),
            _lock=threading.Lock(),
            _origin=None,
        )

    def with_ranked_usage(self, ranked_usage: Mapping[str, Mapping[str, int]]) -> ClusterState:
        """The same generation with the live writer's per-priority usage (`state.preemptible`)."""
        return replace(
            self, ranked_usage=ranked_usage, _snapshots=dict(self.snapshots()), _lock=threading.Lock()
        )

    def without_workload(self, workload: tuple[str, str]) -> ClusterState:
        """This state as it was before ``workload`` (namespace, name) was admitted: what a
        prediction for its own admission is made on, when the state already counts it. Each
        snapshot is this state's with the Workload's usage given back (`_made`, lazily): a
        ledger delta per snapshot, never a rebuild."""
        kept = tuple(use for use in self.assigned if use.workload != workload)
        charges = tuple(c for c in self.charges if c.workload != workload)
        if len(kept) == len(self.assigned) and len(charges) == len(self.charges):
            return self
        removed = tuple(use for use in self.assigned if use.workload == workload)
        snapshots = {} if removed else dict(self._snapshots)
        origin = (self, removed) if removed else None
        return replace(
            self, assigned=kept, charges=charges, _snapshots=snapshots, _lock=threading.Lock(), _origin=origin
        )

    def pod_defaults(self, namespace: str) -> PodDefaults:
        """What LimitRanges of ``namespace`` and RuntimeClasses fill into its pod specs."""
        found = self.limit_ranges.get(namespace, NO_DEFAULTS)
        return replace(found, overheads=self.overheads) if self.overheads else found

    def level_has_nodes(self, level: str) -> bool:
        return any(level in n.labels for n in self.nodes)

    def rejected_object(self, kind: str, namespace: str, name: str) -> Rejected | None:
        """The rejection of that object, if it was left out (configuration kinds only)."""
        return self._rejected_index.get((kind, namespace, name)) if self.rejected else None

    def rejected_in(self, kind: str, namespace: str) -> Rejected | None:
        """The first rejected object of ``kind`` in ``namespace`` (a LimitRange, say), if any."""
        return self._rejected_index.get((kind, namespace, None)) if self.rejected else None

    def topology_delay(self, cluster_queue: ClusterQueue, flavor: str) -> Delay | None:
        """Why Kueue places ``flavor``'s topology elsewhere or later for this queue (None: it
        places on today's nodes): `state.admission_checks`."""
        checks, configs = self.admission_checks, self.provisioning_configs
        return delay_for(cluster_queue.checks, flavor, checks, configs, self.multikueue_configs)

    @functools.cached_property
    def quota_tree(self) -> QuotaTree:
        """Kueue's quota tree on this state's usage (`state.quota_tree`), built on first use."""
        return QuotaTree(self.cluster_queues, self.cohorts, usage_by_queue(self.charges))

    @functools.cached_property
    def _rejected_index(self) -> Mapping[tuple[str, str, str | None], Rejected]:
        """Rejected configuration objects by (kind, namespace, name) and (kind, namespace, None):
        built once per state, on the first review that needs it; pods and nodes are left out
        (no verdict depends on one by name)."""
        index: dict[tuple[str, str, str | None], Rejected] = {}
        for found in self.rejected:
            if found.kind not in EVENT_PARSED_KINDS:
                index.setdefault((found.kind, found.namespace, found.name), found)
                index.setdefault((found.kind, found.namespace, None), found)
        return index


STRUCTURE = (
    "nodes",
    "topologies",
    "flavors",
    "cluster_queues",
    "local_queues",
    "cohorts",
    "admission_checks",
    "provisioning_configs",
    "multikueue_configs",
    "namespaces",
    "runtimes",
    "limit_ranges",
    "overheads",
    "priority_classes",
    "kueue_release",
)


def same_structure(a: ClusterState, b: ClusterState) -> bool:
    """Whether two states share everything but usage (``with_usage`` keeps these by reference):
    a state replaced by one of another structure is kept longer for /validate
    (``live.holder``)."""
    return all(getattr(a, name) is getattr(b, name) for name in STRUCTURE)


def build_state(
    objects: Iterable[Mapping[str, Any]],
    generation: int = 0,
    engine: Engine | None = None,
    nodes: Sequence[Node] | None = None,
    unserved: Iterable[str] = (),
    usage: Mapping[str, Mapping[str, int]] | None = None,
    assigned: tuple[AssignedUse, ...] | None = None,
    rejected: Iterable[Rejected] = (),
    charges: tuple[QuotaCharge, ...] | None = None,
    ranked_usage: Mapping[str, Mapping[str, int]] | None = None,
) -> ClusterState:
    """Fold any mix of Nodes, Pods, Namespaces, Workloads and Kueue objects into one state.

    Objects of other kinds are ignored. A malformed object is left out alone and recorded in
    ``rejected`` (with those given: objects its caller already parsed and left out), so one bad
    object never stops the state. ``nodes``, when given, are already parsed (the live mirror
    keeps them so), with ``usage`` per node name and ``assigned`` (Workloads' usage) apart from
    them, and Node, Pod and Workload objects in ``objects`` are then not expected. TAS pods
    count from their nodes only when no Workload is given: their Workloads count them
    otherwise, as Kueue does.
    """
    fold = Fold()
    for obj in objects:
        fold.add(obj)
    if not fold.seen_workloads:
        fold.count_tas_pods()
    if nodes is None:
        nodes = fold.nodes()
    return ClusterState(
        nodes=tuple(nodes),
        topologies=fold.topologies,
        flavors=fold.flavors,
        cluster_queues=fold.cluster_queues,
        local_queues=fold.local_queues,
        cohorts=fold.cohorts,
        admission_checks=fold.admission_checks,
        provisioning_configs=fold.provisioning_configs,
        multikueue_configs=fold.multikueue_configs,
        namespaces=fold.namespaces,
        runtimes=fold.runtimes,
        limit_ranges={ns: limit_range_defaults(found) for ns, found in fold.limit_ranges.items()},
        overheads=fold.overheads,
        priority_classes=PriorityClasses(fold.workload_priority_classes, fold.priority_classes),
        kueue_release=fold.kueue_release(),
        unserved=frozenset(unserved),
        generation=generation,
        engine=engine,
        usage=usage,
        ranked_usage=fold.ranked if ranked_usage is None else ranked_usage,
        assigned=tuple(fold.workloads) if assigned is None else assigned,
        charges=tuple(fold.charges) if charges is None else charges,
        rejected=tuple(sorted([*rejected, *fold.rejected])),
        native=fold.native.index(),
    )
