"""The native gangs tasgate makes (``decide.native.create``), reconciled as the PodGroups of
the other backends are: level-triggered from the pods that need them. Both releases: the PodGroups
of ``v1alpha2`` (Kubernetes v1.36) and ``v1beta1`` (v1.37) are watched, and a pod's missing group
is of the version the API server serves (the objects the decision gives are of that version too).

A pod whose ``spec.schedulingGroup`` names a PodGroup that does not exist is never scheduled
(the kube-scheduler holds it until the group appears). So the view watches the unbound pods
that carry ``schedulingGroup`` (``spec.nodeName=``: a field selector cannot ask for the group)
and the native PodGroups; a group that live pods name but the API server does not hold is
*missing*, and the reconciler walks the pods' owners up to the workload, asks the decision path
what the stored workload needs (a Workload and a PodGroup stamped from it) and POSTs both,
the Workload first (``PodGroupWorkloadExists`` refuses a PodGroup whose Workload does not exist),
each owned by the workload. Groups tasgate did not make (the Job controller's, the user's) are
no business of this: the decision path gives no objects for their owners, so nothing is made.

The pod watch is listed only once the native PodGroup list has answered that the API is served
(``NativeGate``): until then, and on a cluster without it, its list answers 404 and the watch
re-checks it as an optional kind, so such a cluster pays nothing for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live import reconcile_view as view
from webhook.live.kinds import Kind, custom_lister
from webhook.model.workloads.native import NATIVE_APIS, V1ALPHA2, V1BETA1, scheduling_group
from webhook.model.workloads.native_fields import served_minor
from webhook.wire.errors import InvalidObject

NATIVE_PODS, NATIVE_GROUPS = "reconcile-nativepods", "reconcile-nativepodgroups"
NATIVE_GROUPS_V1BETA1 = "reconcile-nativepodgroups-v1beta1"
NATIVE_GROUP_KINDS = {NATIVE_GROUPS: V1ALPHA2, NATIVE_GROUPS_V1BETA1: V1BETA1}
UNBOUND = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
DECIDE_SECONDS = 30.0  # how long the pod list waits for the PodGroup list's answer
Lister = Callable[..., Awaitable[Any]]


class NativeGate:
    """Whether the native API is served, and in which version, as the reconciler's own PodGroup
    lists found it (decided once every version answered)."""

    def __init__(self) -> None:
        self.answers: dict[str, bool] = {}
        self.decided = asyncio.Event()

    @property
    def served(self) -> bool:
        return any(self.answers.values())

    @property
    def api(self) -> str:
        """The version a missing group is created in: v1beta1 where only it is served (v1.37),
        else v1alpha2 (a real API server serves one release's versions, never both)."""
        served = {api for api, answered in self.answers.items() if answered}
        return V1BETA1 if served_minor(served) >= 37 else V1ALPHA2

    def found(self, api: str, served: bool) -> None:
        self.answers[api] = served
        if len(self.answers) == len(NATIVE_GROUP_KINDS):
            self.decided.set()

    def gated(self, make: Callable[[client.ApiClient], Lister]) -> Callable[[client.ApiClient], Lister]:
        """``make``'s lister, whose lists answer 404 while the native API is not served."""

        def wrap(api: client.ApiClient) -> Lister:
            inner = make(api)

            async def call(**kw: Any) -> Any:
                if not kw.get("watch"):
                    async with asyncio.timeout(DECIDE_SECONDS):  # wait_for can drop a cancel (3.11)
                        await self.decided.wait()
                    if not self.served:
                        raise ApiException(status=404, reason="scheduling.k8s.io is not served")
                return await inner(**kw)

            return call

        return wrap


def kinds(gate: NativeGate) -> list[Kind]:
    """The native PodGroups of each version (optional: 404 when not served) and the unbound pods."""

    def pods(api: client.ApiClient) -> Lister:
        return client.CoreV1Api(api).list_pod_for_all_namespaces

    groups = [
        Kind(name, api, "PodGroup", custom_lister(api.split("/")[0], api.split("/")[1], "podgroups"), True)
        for name, api in NATIVE_GROUP_KINDS.items()
    ]
    return [
        *groups,
        Kind(NATIVE_PODS, "v1", "Pod", gate.gated(pods), True, kwargs={"field_selector": UNBOUND}),
    ]


def parse_pod(obj: Mapping[str, Any], api: str = V1ALPHA2) -> view.GangPod | None:
    """The native group (of version ``api``) an unbound, live pod waits for; None for any other pod."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    phase = (obj.get("status") or {}).get("phase")
    if meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed") or spec.get("nodeName"):
        return None
    try:
        group = scheduling_group(spec)
    except InvalidObject:
        return None  # the API server validates the field; a pod it let through is not ours to fix
    if group is None:
        return None
    namespace = str(meta.get("namespace") or "")
    target = view.Target(api, namespace, group)
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    return view.GangPod(namespace, name, uid, target, view.controller_of(obj))


class NativeView(view.View):
    """The reconciler's view with the native kinds: their pods, their PodGroups, the gate."""

    PARSERS: Mapping[str, view.Parser] = {**view.View.PARSERS, NATIVE_PODS: parse_pod}
    GROUPS: Mapping[str, str] = {**view.View.GROUPS, **NATIVE_GROUP_KINDS}

    def __init__(self) -> None:
        self.gate = NativeGate()
        # A pod names its group, not the version: the one served (the pods are listed only once
        # the gate has decided it).
        self.PARSERS = {**self.PARSERS, NATIVE_PODS: lambda obj: parse_pod(obj, self.gate.api)}
        super().__init__()

    def pod_kinds(self, api_version: str) -> set[str]:
        return {NATIVE_PODS} if api_version in NATIVE_APIS else super().pod_kinds(api_version)

    def commit(self, pages: view.Listed) -> None:
        if pages.kind in NATIVE_GROUP_KINDS:
            self.gate.found(NATIVE_GROUP_KINDS[pages.kind], True)
        super().commit(pages)

    def mark_absent(self, kind: str) -> None:
        if kind in NATIVE_GROUP_KINDS:
            self.gate.found(NATIVE_GROUP_KINDS[kind], False)
        super().mark_absent(kind)


def carries(obj: Any, group: Mapping[str, Any]) -> bool:
    """Whether the stored object's pods will join this group: for a native PodGroup, some pod
    template's ``schedulingGroup`` names it (a Workload is carried with its PodGroup, ``wanted``);
    for the other backends, their label or annotation (``reconcile_view.carries``)."""
    if group.get("apiVersion") not in NATIVE_APIS:
        return view.carries(obj, group)
    name = (group.get("metadata") or {}).get("name")
    return group.get("kind") == "PodGroup" and bool(name) and _names(obj, str(name), 12)


def _names(obj: Any, name: str, depth: int) -> bool:
    if depth == 0:
        return False
    if isinstance(obj, Mapping):
        found = obj.get("schedulingGroup")
        if isinstance(found, Mapping) and found.get("podGroupName") == name:
            return True
        return any(_names(v, name, depth - 1) for v in obj.values() if isinstance(v, Mapping | list))
    if isinstance(obj, list):
        return any(_names(v, name, depth - 1) for v in obj)
    return False


def wanted(owner: Mapping[str, Any], groups: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """What to create for ``owner``, in order: the groups its pods join, each native PodGroup's
    Workload before it (once), never a Workload whose PodGroup nobody joins."""
    workloads = {
        str((g.get("metadata") or {}).get("name")): g
        for g in groups
        if g.get("apiVersion") in NATIVE_APIS and g.get("kind") == "Workload"
    }
    out: list[Mapping[str, Any]] = []
    for g in groups:
        if g.get("kind") == "Workload" or not carries(owner, g):
            continue
        workload = workloads.get(_workload_of(g)) if g.get("apiVersion") in NATIVE_APIS else None
        if workload is not None and workload not in out:
            out.append(workload)
        out.append(g)
    return out


def _workload_of(group: Mapping[str, Any]) -> str:
    """The Workload a native PodGroup names: ``workloadRef`` (v1beta1) or
    ``podGroupTemplateRef.workload`` (v1alpha2)."""
    spec = group.get("spec") or {}
    ref = spec.get("workloadRef") or (spec.get("podGroupTemplateRef") or {}).get("workload") or {}
    return str(ref.get("workloadName"))
