"""What the mirror keeps of each watched object, and lists read page by page.

Nodes are kept parsed, pods as their usage, Workloads as the leaf domains their admission takes
(`state.workloads`), PodGroups not at all (only whether their CRD is served), Namespaces as name
and labels, Kueue's Deployment and ConfigMap as what names its release (`state.kueue_manager`);
the rest (Kueue objects, LimitRanges, runtimes) whole, parsed by `build_state`.
A node, pod or Workload that does not parse is a `Rejected` instead, kept by the writer
(`live.rejections`) until the object changes or goes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from scorer.model import Node
from webhook.live import native
from webhook.live.kinds import GANG_CRD_KINDS
from webhook.live.usage import Assigned, Use
from webhook.state import kueue_manager
from webhook.state.fields import metadata
from webhook.state.nodes import parse_node, pod_usage
from webhook.state.preemptible import stored_priority
from webhook.state.quota_usage import QuotaCharge, quota_charge
from webhook.state.rejected import Rejected, rejected_of
from webhook.state.workloads import is_tas_pod, workload_usage
from webhook.wire.errors import InvalidObject

# Kueue's controller Deployment and Configuration: kept slim (`kueue_manager.slim`), and an event
# that leaves the slim object as it was (a Deployment's status) changes nothing.
SLIM_KINDS = frozenset({"deployments", "configmaps"})
# Kinds the state reads as parsed values (nodes, pod and Workload usage) or only needs to know
# are served (PodGroups): their objects are never kept whole. Memory is then bound by nodes and
# pods parsed, not by what the API server sends (a Pod object is kilobytes; its usage is a few
# integers).
NOT_KEPT = frozenset({"nodes", "pods", "workloads", *GANG_CRD_KINDS, *native.KINDS})


# Kinds whose status the state never reads. Kueue writes a ClusterQueue's and a LocalQueue's
# status on every reservation and admission (pending and reserving counts, flavor usage); kept
# whole, each such write would rebuild the whole state. Kept without their status and the
# metadata that changes with it, a status write is no change at all (`Mirror.apply` compares).
STATUS_UNREAD = frozenset(
    {
        "clusterqueues", "localqueues", "cohorts", "topologies", "resourceflavors",
        "multikueueconfigs", "provisioningrequestconfigs", "workloadpriorityclasses",
    }
)  # fmt: skip
VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def kept_of(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What of ``obj`` the state builder reads: nothing, its name and labels, all of it but
    its status, or all of it."""
    if kind in NOT_KEPT:
        return None
    if kind == "namespaces":
        meta = obj.get("metadata") or {}
        slim = {"name": meta.get("name"), "labels": meta.get("labels") or {}}
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": slim}
    if kind in SLIM_KINDS:
        return kueue_manager.slim(obj)
    if kind in STATUS_UNREAD:  # a copy: the next event is compared with it (never an alias)
        meta = obj.get("metadata")
        kept = {key: copy.deepcopy(value) for key, value in obj.items() if key not in ("status", "metadata")}
        if isinstance(meta, Mapping):
            kept["metadata"] = {k: copy.deepcopy(v) for k, v in meta.items() if k not in VOLATILE_METADATA}
        return kept
    return obj


def compared(kind: str) -> bool:
    """Whether an update of ``kind`` is a change only when what is kept of it changed (else every
    update is one: the whole object is kept, and its resourceVersion always moves). A kind not
    kept at all (a PodGroup: only whether its CRD is served counts, `Mirror.commit`) never
    changes the state by an event: each PodGroup the reconciler writes would rebuild it."""
    return kind in SLIM_KINDS or kind in STATUS_UNREAD or kind in NOT_KEPT


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class Listing:
    """One kind's list, page by page: parsed as pages arrive, swapped in whole when complete
    (`Mirror.commit`), so a 100,000-pod list never sits in memory as objects."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.raw: dict[str, Mapping[str, Any]] = {}
        self.nodes: dict[str, tuple[str, Node]] = {}
        self.pods: dict[str, Use] = {}
        self.workloads: dict[str, Assigned] = {}  # only those that take something
        self.charges: dict[str, QuotaCharge] = {}  # their quota usage (`state.quota_usage`)
        self.rejected: dict[str, Rejected] = {}  # nodes, pods and Workloads that do not parse
        self.native: dict[tuple[str, str], Any] = {}  # what the NativeBook keeps (`live.native`)

    def add(self, items: Iterable[Mapping[str, Any]]) -> None:
        if self.kind in native.KINDS:
            items_kept, left_out = native.kept_items(self.kind, items)
            self.native.update(items_kept)
            self.rejected.update(left_out)
            return
        for obj in items:
            key = key_of(obj)
            kept = kept_of(self.kind, obj)
            if kept is not None:
                self.raw[key] = kept
            if self.kind == "nodes":
                node = parsed_node(obj)
                if isinstance(node, Rejected):
                    self.rejected[key] = node
                else:
                    self.nodes[node[1].name] = node
            elif self.kind == "pods":
                use = pod_use(obj)
                if isinstance(use, Rejected):
                    self.rejected[key] = use
                elif use is not None:
                    self.pods[key] = use
                pod = native.slim_pod(obj)
                if pod is not None:
                    self.native[native.key_of(obj)] = pod
            elif self.kind == "workloads":
                found = workload_found(obj)
                if isinstance(found, Rejected):
                    self.rejected[key] = found
                    continue
                assigned, charge = found
                if assigned:
                    self.workloads[key] = assigned
                if charge is not None:
                    self.charges[key] = charge


def parsed_node(obj: Mapping[str, Any]) -> tuple[str, Node] | Rejected:
    """(resourceVersion, node without usage), or why it is left out."""
    try:
        node = parse_node(obj, {})
    except InvalidObject as exc:
        return rejected_of(obj, exc)
    return str(metadata(obj).get("resourceVersion", "")), node


def pod_use(obj: Mapping[str, Any]) -> Use | Rejected | None:
    """What a pod uses (its node, requests and whether it is a TAS pod), None when nothing,
    or why it is left out (its usage then counts nowhere: `state.rejected` says so)."""
    try:
        found = pod_usage(obj)
        return None if found is None else (found[0], found[1], is_tas_pod(obj), stored_priority(obj))
    except InvalidObject as exc:
        return rejected_of(obj, exc)


def workload_charge(obj: Mapping[str, Any]) -> QuotaCharge | Rejected | None:
    """The quota an admitted Workload holds (None when none), or why it is left out."""
    try:
        return quota_charge(obj)
    except InvalidObject as exc:
        return rejected_of(obj, exc)


def workload_found(obj: Mapping[str, Any]) -> tuple[Assigned, QuotaCharge | None] | Rejected:
    """What an admitted Workload takes: its leaf domains and its quota, or why it is left out
    (then it counts for neither, as a dump's `state.fold` leaves it out whole)."""
    uses = workload_use(obj)
    if isinstance(uses, Rejected):
        return uses
    charge = workload_charge(obj)
    return charge if isinstance(charge, Rejected) else (uses, charge)


def workload_use(obj: Mapping[str, Any]) -> Assigned | Rejected:
    """The leaf domains an admitted TAS Workload takes (() when none), or why it is left out."""
    try:
        return workload_usage(obj)
    except InvalidObject as exc:
        return rejected_of(obj, exc)
