"""The native gang objects a state holds: ``scheduling.k8s.io`` Workloads, PodGroups and (v1.37)
CompositePodGroups in whichever version the API server serves (``v1alpha2`` on Kubernetes v1.36,
``v1beta1``/``v1alpha3`` on v1.37), the pods that name a PodGroup in ``spec.schedulingGroup``, and
the batch/v1 Jobs whose pod template a Job-made Workload stands for.

A native Workload or PodGroup carries no pod template: the requests of its pods are those of
the Job its ``controllerRef`` names, or of the pods already naming the group. Whether the API
is served at all is read from the dump: any native object, a pod with ``spec.schedulingGroup``
(the API server drops the field when the gate is off), or a served group-version's discovery
document (``kubectl get --raw /apis/scheduling.k8s.io/v1beta1``, an ``APIResourceList`` naming
``workloads`` and ``podgroups``). Which release serves it (``minor``) follows the version seen:
v1.37 reads Jobs, priorities and composite groups differently (docs/native-v137.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.model.workloads.native import (
    COMPOSITE,
    MINOR,
    NativeObject,
    is_native,
    read_native,
    scheduling_group,
)
from webhook.state.fields import metadata
from webhook.state.native_nonzero import nonzero_extra
from webhook.wire.errors import InvalidObject

Key = tuple[str, str]  # (namespace, name)
TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Members:
    """The pods of one PodGroup the state holds: how many are bound and where, one pod's spec."""

    bound: int = 0
    pending: int = 0
    nodes: tuple[str, ...] = ()
    spec: Mapping[str, Any] | None = None
    names: frozenset[str] = frozenset()  # the pods counted, so a pod is never counted twice
    specs: tuple[Mapping[str, Any], ...] = ()  # the pending pods' specs, in the order seen


@dataclass(frozen=True)
class NativeIndex:
    served: bool = False
    workloads: Mapping[Key, NativeObject] = field(default_factory=dict)
    pod_groups: Mapping[Key, NativeObject] = field(default_factory=dict)
    jobs: Mapping[Key, Mapping[str, Any]] = field(default_factory=dict)
    members: Mapping[Key, Members] = field(default_factory=dict)
    # Node -> (milli-cpu, memory bytes) its bound pods count beyond their requests in the
    # kube-scheduler's NonZeroRequested, which its placement score reads (see `nonzero_extra`).
    nonzero: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    composites: Mapping[Key, NativeObject] = field(default_factory=dict)  # v1.37 CompositePodGroups
    minor: int = 36  # the Kubernetes minor whose native API version is served
    minor_known: bool = False  # read off a served version (not assumed from pods or the default)


@dataclass
class NativeFold:
    """What `state.fold` gathers of the native kinds, one object at a time."""

    served: bool = False
    workloads: dict[Key, NativeObject] = field(default_factory=dict)
    pod_groups: dict[Key, NativeObject] = field(default_factory=dict)
    jobs: dict[Key, Mapping[str, Any]] = field(default_factory=dict)
    members: dict[Key, Members] = field(default_factory=dict)
    nonzero: dict[str, tuple[int, int]] = field(default_factory=dict)
    count_nonzero: bool = True  # False when folding a manifest's pods over a state (`with_applied`)
    composites: dict[Key, NativeObject] = field(default_factory=dict)
    minor: int = 36
    minor_known: bool = False

    def add(self, obj: Mapping[str, Any]) -> bool:
        """Fold ``obj`` in when it is one of these kinds; True if it was (raises InvalidObject)."""
        api, kind = obj.get("apiVersion"), obj.get("kind")
        if kind == "APIResourceList" and obj.get("groupVersion") in MINOR:
            self._serve(str(obj["groupVersion"]))
            return True
        if is_native(obj):
            self._serve(str(api))
            found = read_native(obj)
            into = {"Workload": self.workloads, COMPOSITE: self.composites}.get(found.kind, self.pod_groups)
            into[(found.namespace, found.name)] = found
            return True
        if api == "batch/v1" and kind == "Job":
            meta = metadata(obj)
            self.jobs[(str(meta.get("namespace", "") or ""), str(meta.get("name", "")))] = obj
            return True
        return False

    def _serve(self, api: str) -> None:
        self.served = True
        self.minor = max(self.minor, MINOR[api])
        self.minor_known = True

    def add_pod(self, obj: Mapping[str, Any]) -> None:
        """Count a pod that names a PodGroup (its usage is counted by the caller, as for any pod),
        and any bound pod's non-zero extra."""
        spec = obj.get("spec")
        if self.count_nonzero:
            self._add_nonzero(obj)
        group = scheduling_group(spec)
        if group is None or not isinstance(spec, Mapping):
            return
        status = obj.get("status")
        if isinstance(status, Mapping) and status.get("phase") in TERMINAL:
            return
        self.served = True  # the API server keeps the field only when the API is enabled
        meta = metadata(obj)
        key = (str(meta.get("namespace", "") or ""), group)
        was = self.members.get(key, Members())
        pod = str(meta.get("name") or meta.get("generateName") or "")
        if pod in was.names:
            return
        node = spec.get("nodeName")
        self.members[key] = Members(
            bound=was.bound + (1 if node else 0),
            pending=was.pending + (0 if node else 1),
            nodes=(*was.nodes, str(node)) if node else was.nodes,
            spec=was.spec if was.spec is not None else spec,
            names=was.names | {pod},
            specs=was.specs if node else (*was.specs, spec),
        )

    def _add_nonzero(self, obj: Mapping[str, Any]) -> None:
        spec, status = obj.get("spec"), obj.get("status")
        if not isinstance(spec, Mapping) or not spec.get("nodeName"):
            return
        if isinstance(status, Mapping) and status.get("phase") in TERMINAL:
            return
        extra = nonzero_extra(spec)
        if extra != (0, 0):
            node = str(spec["nodeName"])
            cpu, memory = self.nonzero.get(node, (0, 0))
            self.nonzero[node] = (cpu + extra[0], memory + extra[1])

    @classmethod
    def seeded(cls, index: NativeIndex) -> NativeFold:
        """A fold that starts from ``index`` (what a state already holds); a manifest's pods
        are not bound, and their usage is not counted either."""
        return cls(
            index.served,
            dict(index.workloads),
            dict(index.pod_groups),
            dict(index.jobs),
            dict(index.members),
            dict(index.nonzero),
            count_nonzero=False,
            composites=dict(index.composites),
            minor=index.minor,
            minor_known=index.minor_known,
        )

    def index(self) -> NativeIndex:
        return NativeIndex(
            self.served,
            self.workloads,
            self.pod_groups,
            self.jobs,
            self.members,
            self.nonzero,
            self.composites,
            self.minor,
            self.minor_known,
        )


def with_applied(index: NativeIndex, objects: Iterable[Mapping[str, Any]], namespace: str) -> NativeIndex:
    """``index`` with the native objects of one manifest applied together (``tasgate check -f``):
    a PodGroup's pods, a Workload's Job may come in the same files. Objects without a namespace
    take ``namespace``; one that does not parse is left to its own verdict."""
    fold = NativeFold.seeded(index)
    for raw in objects:
        try:
            meta = metadata(raw)
            obj = {**raw, "metadata": {**meta, "namespace": namespace}} if not meta.get("namespace") else raw
            if not fold.add(obj) and obj.get("apiVersion") == "v1" and obj.get("kind") == "Pod":
                fold.add_pod(obj)
        except InvalidObject:
            continue
    return fold.index()
