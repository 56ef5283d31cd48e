"""The native v1.36 gangs tasgate makes (``decide.native.create``), reconciled as the PodGroups of
the other backends are: level-triggered from the pods that need them.

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
from webhook.model.workloads.native import NATIVE_API, scheduling_group
from webhook.wire.errors import InvalidObject

NATIVE_PODS, NATIVE_GROUPS = "reconcile-nativepods", "reconcile-nativepodgroups"
UNBOUND = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
DECIDE_SECONDS = 30.0  # how long the pod list waits for the PodGroup list's answer
Lister = Callable[..., Awaitable[Any]]


class NativeGate:
    """Whether the native API is served, as the reconciler's own PodGroup list found it."""

    def __init__(self) -> None:
        self.served = False
        self.decided = asyncio.Event()

    def found(self, served: bool) -> None:
        self.served = served
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
                        raise ApiException(status=404, reason=f"{NATIVE_API} is not served")
                return await inner(**kw)

            return call

        return wrap


def kinds(gate: NativeGate) -> list[Kind]:
    """The native PodGroups (optional: 404 when the API is not served) and the unbound pods."""
    group, version = NATIVE_API.split("/")

    def pods(api: client.ApiClient) -> Lister:
        return client.CoreV1Api(api).list_pod_for_all_namespaces

    return [
        Kind(NATIVE_GROUPS, NATIVE_API, "PodGroup", custom_lister(group, version, "podgroups"), True),
        Kind(NATIVE_PODS, "v1", "Pod", gate.gated(pods), True, kwargs={"field_selector": UNBOUND}),
    ]


def parse_pod(obj: Mapping[str, Any]) -> view.GangPod | None:
    """The native group an unbound, live pod waits for; None for any other pod."""
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
    target = view.Target(NATIVE_API, namespace, group)
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    return view.GangPod(namespace, name, uid, target, view.controller_of(obj))


class NativeView(view.View):
    """The reconciler's view with the native kinds: their pods, their PodGroups, the gate."""

    PARSERS: Mapping[str, view.Parser] = {**view.View.PARSERS, NATIVE_PODS: parse_pod}
    GROUPS: Mapping[str, str] = {**view.View.GROUPS, NATIVE_GROUPS: NATIVE_API}

    def __init__(self) -> None:
        super().__init__()
        self.gate = NativeGate()

    def pod_kinds(self, api_version: str) -> set[str]:
        return {NATIVE_PODS} if api_version == NATIVE_API else super().pod_kinds(api_version)

    def commit(self, pages: view.Listed) -> None:
        if pages.kind == NATIVE_GROUPS:
            self.gate.found(True)
        super().commit(pages)

    def mark_absent(self, kind: str) -> None:
        if kind == NATIVE_GROUPS:
            self.gate.found(False)
        super().mark_absent(kind)


def carries(obj: Any, group: Mapping[str, Any]) -> bool:
    """Whether the stored object's pods will join this group: for a native PodGroup, some pod
    template's ``schedulingGroup`` names it (a Workload is carried with its PodGroup, ``wanted``);
    for the other backends, their label or annotation (``reconcile_view.carries``)."""
    if group.get("apiVersion") != NATIVE_API:
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
        if g.get("apiVersion") == NATIVE_API and g.get("kind") == "Workload"
    }
    out: list[Mapping[str, Any]] = []
    for g in groups:
        if g.get("kind") == "Workload" or not carries(owner, g):
            continue
        ref = ((g.get("spec") or {}).get("podGroupTemplateRef") or {}).get("workload") or {}
        workload = workloads.get(str(ref.get("workloadName"))) if g.get("apiVersion") == NATIVE_API else None
        if workload is not None and workload not in out:
            out.append(workload)
        out.append(g)
    return out
