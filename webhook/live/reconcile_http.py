"""The PodGroup writer's requests: the owner chain it walks, the bodies it sends and the merge
patch that sizes a PodGroup to Kueue's admission (what a failed call means is ``api.transient``,
shared with the Event poster; how long to wait after it, ``live.backoff``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import call_json, checked, transient
from webhook.live.events import GangEvent, ObjectRef
from webhook.live.reconcile_view import GangPod, OwnerRef, controller_of

MANAGED_BY = "app.kubernetes.io/managed-by"
MAX_DEPTH = 6  # pod → Job → JobSet → TrainJob is three


def plural(kind: str) -> str:
    """The resource of a kind, as Kubernetes' default REST mapper guesses it (Job → jobs)."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"


def object_path(api_version: str, namespace: str, resource: str, name: str = "") -> str:
    """``/api/v1/namespaces/ns/pods[/name]`` or ``/apis/group/version/namespaces/ns/plural[/name]``."""
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    path = f"{base}/namespaces/{namespace}/{resource}"
    return f"{path}/{name}" if name else path


def owned(pod_group: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """The PodGroup to POST: owned by the workload (garbage-collected with it), labelled as ours."""
    meta = owner.get("metadata") or {}
    body = dict(pod_group)
    group_meta = dict(body.get("metadata") or {})
    group_meta["namespace"] = meta.get("namespace")
    group_meta["ownerReferences"] = [
        {
            "apiVersion": owner.get("apiVersion"),
            "kind": owner.get("kind"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
        }
    ]
    group_meta["labels"] = {**(group_meta.get("labels") or {}), MANAGED_BY: "tasgate"}
    body["metadata"] = group_meta
    return body


async def controllers(api: client.ApiClient, pod: GangPod) -> list[dict[str, Any]] | None:
    """The pod's controllers, nearest first (the pod itself when nothing owns it), each GET from
    the API server; None when one is gone, replaced (another uid) or being deleted: its
    dependents go with it. A 403 above the first stops the walk there (RBAC may not reach)."""
    ref: OwnerRef | None = pod.owner or OwnerRef("v1", "Pod", pod.name, pod.uid)
    chain: list[dict[str, Any]] = []
    while ref is not None and len(chain) < MAX_DEPTH:
        path = object_path(ref.api_version, pod.namespace, plural(ref.kind), ref.name)
        try:
            obj = await call_json(api, "GET", path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 403 and chain:
                break
            raise
        meta = obj.get("metadata") or {}
        if (ref.uid and meta.get("uid") != ref.uid) or meta.get("deletionTimestamp"):
            return None
        obj.setdefault("apiVersion", ref.api_version)
        obj.setdefault("kind", ref.kind)
        chain.append(obj)
        ref = controller_of(obj)
    return chain


async def merge_patch(api: client.ApiClient, path: str, body: Mapping[str, Any]) -> None:
    """A JSON merge patch (RFC 7386) of one object: only the fields ``body`` names change, so a
    status another controller writes meanwhile neither conflicts nor is overwritten."""
    response = await api.call_api(
        path,
        "PATCH",
        body=body,
        header_params={"Accept": "application/json", "Content-Type": "application/merge-patch+json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=10.0,
    )
    (await checked(response[0] if isinstance(response, tuple) else response)).release()


def words(exc: BaseException) -> str:
    """An error in a log line: the API server's status and words, or the exception's."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {str(exc.reason or '')[:200]}"
    return f"{type(exc).__name__}: {exc}"


def failure_event(owner: Mapping[str, Any], note: str, episode: str) -> GangEvent:
    """The Warning Event on a workload whose PodGroup the API server refused."""
    meta = owner.get("metadata") or {}
    regarding = ObjectRef(
        str(owner.get("apiVersion")), str(owner.get("kind")), str(meta.get("namespace") or ""),
        str(meta.get("name") or ""), str(meta.get("uid") or ""),
    )  # fmt: skip
    return GangEvent(regarding, None, "PodGroupCreateFailed", "Create", note, episode=episode)


__all__ = ["transient"]  # the reconciler's name for it
