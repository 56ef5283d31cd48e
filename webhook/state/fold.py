"""Plain objects folded into what a cluster state holds, one object at a time.

Every kind is read object by object: an object that does not parse (InvalidObject) is left out
alone and recorded (`state.rejected`), the rest of the state is built as if it were absent.
Nothing read from a rejected object reaches the state: each reader raises before it stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scorer.model import Node
from webhook.model.workloads import RuntimeKey
from webhook.state.admission_checks import KINDS as CHECK_KINDS
from webhook.state.admission_checks import AdmissionCheck, CheckObjects, ProvisioningConfig, add_check_object
from webhook.state.defaults import LimitRange, read_limit_range, runtime_overhead
from webhook.state.fields import metadata, string_map
from webhook.state.kueue import ClusterQueue, Cohort, Flavor, LocalQueue, Topology, add_kueue_object
from webhook.state.kueue_manager import (
    ConfigGates,
    Controller,
    is_config,
    is_controller,
    read_config,
    read_controller,
)
from webhook.state.kueue_release import KueueRelease, release_of
from webhook.state.native import NativeFold
from webhook.state.nodes import add_usage, parse_node, pod_usage
from webhook.state.preemptible import add_ranked, stored_priority
from webhook.state.priorities import add_priority_class
from webhook.state.quota_usage import QuotaCharge, quota_charge
from webhook.state.rejected import Rejected, rejected_of
from webhook.state.workloads import AssignedUse, is_tas_pod, workload_usage
from webhook.wire.errors import InvalidObject

KUEUE_GROUP = "kueue.x-k8s.io"
TRAINER_GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = frozenset({"TrainingRuntime", "ClusterTrainingRuntime"})


@dataclass
class Fold:
    """What `build_state` gathers from a stream of objects of any kinds."""

    raw_nodes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    from_pods: dict[str, dict[str, int]] = field(default_factory=dict)
    from_tas_pods: dict[str, dict[str, int]] = field(default_factory=dict)
    workloads: list[AssignedUse] = field(default_factory=list)
    charges: list[QuotaCharge] = field(default_factory=list)
    seen_workloads: bool = False
    topologies: dict[str, Topology] = field(default_factory=dict)
    flavors: dict[str, Flavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    admission_checks: dict[str, AdmissionCheck] = field(default_factory=dict)
    provisioning_configs: dict[str, ProvisioningConfig] = field(default_factory=dict)
    multikueue_configs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    runtimes: dict[RuntimeKey, Mapping[str, Any]] = field(default_factory=dict)
    limit_ranges: dict[str, list[LimitRange]] = field(default_factory=dict)  # by namespace
    overheads: dict[str, Mapping[str, Fraction]] = field(default_factory=dict)
    # Bound pods' requests per node by priority (`state.preemptible`), TAS pods' apart.
    ranked: dict[str, dict[str, int]] = field(default_factory=dict)
    tas_ranked: dict[str, dict[str, int]] = field(default_factory=dict)
    workload_priority_classes: dict[str, int] = field(default_factory=dict)
    priority_classes: dict[str, tuple[int, bool]] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)
    # Kueue's own controller Deployments and Configuration ConfigMaps: the release it runs.
    kueue_controllers: list[Controller] = field(default_factory=list)
    kueue_configs: dict[tuple[str, str], ConfigGates] = field(default_factory=dict)
    native: NativeFold = field(default_factory=NativeFold)  # scheduling.k8s.io/v1alpha2 and Jobs

    def add(self, obj: Mapping[str, Any]) -> None:
        """Fold one object in; one that does not parse is recorded as rejected instead."""
        try:
            self._add(obj)
        except InvalidObject as exc:
            self.rejected.append(rejected_of(obj, exc))

    def nodes(self) -> list[Node]:
        """The Nodes seen, parsed with their pods' usage, in name order; bad ones rejected."""
        parsed = []
        for name, obj in sorted(self.raw_nodes.items()):
            try:
                parsed.append(parse_node(obj, self.from_pods.get(name, {})))
            except InvalidObject as exc:
                self.rejected.append(rejected_of(obj, exc))
        return parsed

    def kueue_release(self) -> KueueRelease:
        """The Kueue release and gates the objects seen say (`state.kueue_release`)."""
        return release_of(self.kueue_controllers, self.kueue_configs)

    def count_tas_pods(self) -> None:
        """No Workload was seen: TAS pods count on their nodes like any other."""
        add_usage(self.from_tas_pods, self.from_pods)
        add_usage(self.tas_ranked, self.ranked)

    def _add(self, obj: Mapping[str, Any]) -> None:
        kind, group = obj.get("kind"), str(obj.get("apiVersion", "")).split("/")[0]
        meta = metadata(obj)
        name = str(meta.get("name", ""))
        namespace = str(meta.get("namespace", "") or "")
        if self.native.add(obj):
            return
        if group == "v1" and kind in ("Node", "Pod", "Namespace", "LimitRange"):
            self._add_core(str(kind), name, namespace, obj)
        elif kind == "Workload" and group == KUEUE_GROUP:
            self.seen_workloads = True  # even a malformed one says Kueue counts usage
            charge = quota_charge(obj)  # read first: a malformed Workload adds nothing
            self.workloads.extend(workload_usage(obj))
            if charge is not None:
                self.charges.append(charge)
        elif kind == "Deployment" and group == "apps":
            if is_controller(obj):  # only Kueue's; other Deployments are not read
                self.kueue_controllers.append(read_controller(obj))
        elif kind == "ConfigMap" and group == "v1":
            if is_config(obj):
                self.kueue_configs[(namespace, name)] = read_config(obj)
        elif kind == "PriorityClass" and group == "scheduling.k8s.io":
            add_priority_class(obj, kind, name, self.priority_classes)
        elif kind == "WorkloadPriorityClass" and group == KUEUE_GROUP:
            add_priority_class(obj, kind, name, self.workload_priority_classes)
        elif kind == "RuntimeClass" and group == "node.k8s.io":
            self.overheads[name] = runtime_overhead(obj)
        elif group == TRAINER_GROUP and kind in RUNTIME_KINDS:
            self.runtimes[(str(kind), namespace, name)] = obj
        elif group == KUEUE_GROUP and kind in CHECK_KINDS:
            into = CheckObjects(self.admission_checks, self.provisioning_configs, self.multikueue_configs)
            add_check_object(obj, str(kind), name, into)
        elif group == KUEUE_GROUP:
            add_kueue_object(
                obj,
                str(kind),
                name,
                namespace,
                self.topologies,
                self.flavors,
                self.cluster_queues,
                self.local_queues,
                self.cohorts,
            )

    def _add_core(self, kind: str, name: str, namespace: str, obj: Mapping[str, Any]) -> None:
        if kind == "Node":
            self.raw_nodes[name] = obj  # parsed in `nodes`, once every pod's usage is known
        elif kind == "Pod":
            self.native.add_pod(obj)
            found = pod_usage(obj)
            if found is not None:
                tas = is_tas_pod(obj)
                add_usage({found[0]: found[1]}, self.from_tas_pods if tas else self.from_pods)
                add_ranked(self.tas_ranked if tas else self.ranked, found[0], found[1], stored_priority(obj))
        elif kind == "Namespace":
            labels = string_map(metadata(obj).get("labels"), f"Namespace {name}: metadata.labels")
            self.namespaces[name] = labels
        else:
            self.limit_ranges.setdefault(namespace, []).append(read_limit_range(obj))
