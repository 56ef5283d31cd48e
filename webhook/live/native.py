"""The native gang objects in live mode: watched, kept slim, folded into the state's index.

``scheduling.k8s.io`` Workloads and PodGroups in each version a release serves (``v1alpha2`` on
Kubernetes v1.36, ``v1beta1`` on v1.37) and v1.37's ``v1alpha3`` CompositePodGroups, each watched
only while its group-version is served (a 404 marks the kind absent and it is re-checked, as the
PodGroup CRDs are: an upgraded API server is picked up without a restart), the Jobs a
Job-made Workload stands for, and every pod naming a PodGroup in ``spec.schedulingGroup`` — bound
ones from the Mirror's own pod watch, unbound ones from a second pod watch (``spec.nodeName=``)
that keeps nothing else. Jobs and unbound pods are listed only once the native API is known
served (``gated``): a cluster without it pays nothing for them.

The ``NativeBook`` is the Mirror's part for these kinds. A change costs a dict update and, for a
pod, its group's members recounted with the state's own fold (``state.native.NativeFold``, the
pods in name order as a dump lists them); it never rebuilds the state or a snapshot: the
publisher swaps the new ``NativeIndex`` into the last state (``Mirror._with_native``). The pods'
slim records are also what the lifecycle tracker follows native groups by (``records``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.model.workloads.native import (
    V1ALPHA2,
    V1ALPHA3,
    V1BETA1,
    job_gang_candidate,
    read_native,
    scheduling_group,
)
from webhook.model.workloads.native_fields import served_minor
from webhook.state.native import Key, Members, NativeFold, NativeIndex
from webhook.state.rejected import Rejected, rejected_of
from webhook.track.records import PodRecord, parse_pod
from webhook.wire.errors import InvalidObject

WORKLOADS, POD_GROUPS = "nativeworkloads", "nativepodgroups"  # v1alpha2 (Kubernetes v1.36)
WORKLOADS_V1BETA1, POD_GROUPS_V1BETA1 = "nativeworkloads-v1beta1", "nativepodgroups-v1beta1"  # v1.37
COMPOSITES = "nativecompositepodgroups"  # v1alpha3 (v1.37)
JOBS, UNBOUND_PODS, BOUND_PODS = "jobs", "unboundpods", "pods"
V137_KINDS = frozenset({WORKLOADS_V1BETA1, POD_GROUPS_V1BETA1, COMPOSITES})
API_VERSIONS = {
    WORKLOADS: V1ALPHA2,
    POD_GROUPS: V1ALPHA2,
    WORKLOADS_V1BETA1: V1BETA1,
    POD_GROUPS_V1BETA1: V1BETA1,
    COMPOSITES: V1ALPHA3,
}
API_KINDS = frozenset({WORKLOADS, POD_GROUPS, *V137_KINDS})  # served only with the native API
OBJECT_KINDS = frozenset({*API_KINDS, JOBS})
KINDS = frozenset({*OBJECT_KINDS, UNBOUND_PODS})  # the Mirror hands these to the book whole
UNBOUND_SELECTOR = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
Lister = Callable[..., Awaitable[Any]]
DECIDE_SECONDS = 30.0  # how long a gated list waits for the native API's discovery at start


def slim_pod(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the judge (requests, scheduling, binding) and the tracker (phase, conditions, owners,
    times) read of a pod naming a PodGroup; None for any other pod."""
    spec = obj.get("spec")
    if scheduling_group(spec) is None or not isinstance(spec, Mapping):
        return None
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    kept = ("name", "namespace", "generateName", "uid", "creationTimestamp", "ownerReferences", "labels")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {k: meta[k] for k in kept if k in meta},
        "spec": spec,
        "status": {k: status[k] for k in ("phase", "conditions") if k in status},
    }


def slim_job(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a native verdict reads of a Job (its counts and pod template), for the Jobs the Job
    controller makes gangs of or whose template names a PodGroup; None for every other Job."""
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    named = scheduling_group(template.get("spec") if isinstance(template, Mapping) else None)
    if not isinstance(spec, Mapping) or not (named or job_gang_candidate(obj, 37)):
        return None  # (v1.37's rule keeps every Job v1.36's keeps)
    meta = obj.get("metadata") or {}
    kept = ("parallelism", "completions", "completionMode", "template", "scheduling")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta},
        "spec": {k: spec[k] for k in kept if k in spec},
    }


def native_item(kind: str, obj: Mapping[str, Any]) -> Any:
    """What the book keeps of one object of ``kind``: a NativeObject, a slim Job or pod, None
    (nothing to keep), or the `Rejected` saying why a Workload/PodGroup is left out."""
    if kind in API_KINDS:
        try:
            return read_native(obj)
        except InvalidObject as exc:
            return rejected_of(obj, exc)
    if kind == JOBS:
        return slim_job(obj)
    return slim_pod(obj)


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class NativeBook:
    """The native objects and group members the state's ``NativeIndex`` is made of."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[Key, Any]] = {k: {} for k in OBJECT_KINDS}
        self.pods: dict[str, dict[Key, Mapping[str, Any]]] = {BOUND_PODS: {}, UNBOUND_PODS: {}}
        self.records: dict[Key, PodRecord] = {}  # every native pod, for the tracker
        self.by_group: dict[Key, set[Key]] = {}  # (namespace, PodGroup) -> its pods
        self.members: dict[Key, Members] = {}
        self.served: set[str] = set()  # native API kinds the API server lists
        # Whether the native API is served is decided once one version's kind lists, or every
        # version's kind answered it is not (v1.37 answers 404 for v1alpha2 before v1beta1 lists).
        self.decided = asyncio.Event()
        self.answered: set[str] = set()
        self.version = 0
        self._index = NativeIndex()
        self._indexed = 0
        self.listeners: list[Callable[[], None]] = []  # told when a native pod changed

    @property
    def api_served(self) -> bool:
        return bool(self.served)

    # -- what the Mirror hands over; each returns whether the index changed --

    def commit(self, kind: str, items: Mapping[Key, Any]) -> bool:
        """A complete list of ``kind`` (objects or pods): replaces what was kept."""
        if kind in API_KINDS:
            self.served.add(kind)
            self.answered.add(kind)
            self.decided.set()
        if kind in OBJECT_KINDS:
            self.objects[kind] = dict(items)
            return self._bump()  # a relist is rare: no comparison
        changed = False
        old = self.pods[kind]
        for key in set(old) | set(items):
            changed = self._set_pod(kind, key, items.get(key)) or changed
        return changed

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> tuple[bool, Rejected | None]:
        """One watch event; (whether the index changed, the rejection of ``obj`` if left out)."""
        found = None if event == "DELETED" else native_item(kind, obj)
        rejected = found if isinstance(found, Rejected) else None
        kept = None if rejected is not None else found
        key = key_of(obj)
        if kind not in OBJECT_KINDS:
            return self._set_pod(kind, key, kept), None
        table = self.objects[kind]
        if kept is None:
            return (table.pop(key, None) is not None and self._bump()), rejected
        if table.get(key) == kept:
            return False, None
        table[key] = kept
        return self._bump(), None

    def absent(self, kind: str) -> bool:
        """``kind`` is not served (or, gated, the native API is not): nothing of it is kept."""
        was = kind in self.served
        if kind in API_KINDS:
            self.served.discard(kind)
            self.answered.add(kind)
            if self.answered >= API_KINDS:
                self.decided.set()
        if kind in OBJECT_KINDS:
            had = bool(self.objects[kind])
            self.objects[kind] = {}
            return self._bump() if had or was else False
        return self.commit(kind, {})

    # -- pods --

    def _set_pod(self, source: str, key: Key, pod: Mapping[str, Any] | None) -> bool:
        table = self.pods[source]
        before = table.get(key)
        if before == pod:
            return False
        if pod is None:
            del table[key]
        else:
            table[key] = pod
        groups = {g for g in (_group_of(before), _group_of(pod)) if g is not None}
        for group in groups:
            self.by_group.setdefault(group, set()).add(key)
        self._record(key)
        changed = False
        for group in groups:
            changed = self._recount(group) or changed
        for tell in self.listeners:
            tell()
        return changed

    def _pod(self, key: Key) -> Mapping[str, Any] | None:
        """The pod as the bound watch has it, else the unbound one (both while it binds)."""
        return self.pods[BOUND_PODS].get(key) or self.pods[UNBOUND_PODS].get(key)

    def _record(self, key: Key) -> None:
        pod = self._pod(key)
        if pod is None:
            self.records.pop(key, None)
        else:
            self.records[key] = parse_pod(pod)

    def _recount(self, group: Key) -> bool:
        """The group's members as a dump's fold counts them (pods in name order)."""
        keys = self.by_group.get(group, set())
        fold = NativeFold()
        for key in sorted(keys):
            pod = self._pod(key)
            if pod is not None:
                fold.add_pod(pod)
        live = {k for k in keys if self._pod(k) is not None and _group_of(self._pod(k)) == group}
        if live:
            self.by_group[group] = live
        else:
            self.by_group.pop(group, None)
        members = fold.members.get(group)
        if self.members.get(group) == members:
            return False
        if members is None:
            self.members.pop(group, None)
        else:
            self.members[group] = members
        return self._bump()

    # -- out --

    def _bump(self) -> bool:
        self.version += 1
        return True

    def index(self) -> NativeIndex:
        """The index of what is kept now (the same object until something changes)."""
        if self._indexed != self.version:
            objects = self.objects
            self._index = NativeIndex(
                self.api_served or bool(self.members) or any(objects[k] for k in API_KINDS),
                {**objects[WORKLOADS], **objects[WORKLOADS_V1BETA1]},
                {**objects[POD_GROUPS], **objects[POD_GROUPS_V1BETA1]},
                dict(objects[JOBS]),
                dict(self.members),
                composites=dict(objects[COMPOSITES]),
                minor=self._minor(),
                minor_known=bool(self.served) or any(objects[k] for k in API_KINDS),
            )
            self._indexed = self.version
        return self._index

    def _minor(self) -> int:
        """37 when only v1.37's versions answer or hold objects; 36 otherwise (a real API server
        serves one release's versions, never both)."""
        if any(self.objects[k] for k in V137_KINDS):
            return 37
        return served_minor({API_VERSIONS[k] for k in self.served})

    def gated(self, make: Callable[[client.ApiClient], Lister]) -> Callable[[client.ApiClient], Lister]:
        """``make``'s lister, whose lists answer 404 while the native API is not served (the
        watch then marks the kind absent and re-checks it, as for a CRD not installed)."""

        def wrap(api: client.ApiClient) -> Lister:
            inner = make(api)

            async def call(**kw: Any) -> Any:
                if not kw.get("watch"):
                    async with asyncio.timeout(DECIDE_SECONDS):  # wait_for can drop a cancel (3.11)
                        await self.decided.wait()
                    if not self.api_served:
                        raise ApiException(status=404, reason="scheduling.k8s.io is not served")
                return await inner(**kw)

            return call

        return wrap


def _group_of(pod: Mapping[str, Any] | None) -> Key | None:
    if pod is None:
        return None
    group = scheduling_group(pod.get("spec"))
    return None if group is None else (str((pod.get("metadata") or {}).get("namespace") or ""), group)


def kept_items(kind: str, items: Iterable[Mapping[str, Any]]) -> tuple[dict[Key, Any], dict[str, Rejected]]:
    """A list page's objects as the book keeps them, and the rejected ones by Mirror key."""
    kept: dict[Key, Any] = {}
    rejected: dict[str, Rejected] = {}
    for obj in items:
        found = native_item(kind, obj)
        if isinstance(found, Rejected):
            namespace, name = key_of(obj)
            rejected[f"{namespace}/{name}"] = found
        elif found is not None:
            kept[key_of(obj)] = found
    return kept, rejected
