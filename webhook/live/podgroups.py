"""Create the PodGroups gang-scheduled workloads need, after the workload is persisted.

A pod labelled for a PodGroup that does not exist never schedules. The validating endpoint
(the last word before persistence) hands an admitted, non-dry-run workload to this worker; it
waits for the workload to exist, then creates each PodGroup owned by it (so it is
garbage-collected with it). Several replicas may do the same: AlreadyExists is success.
Failures become a Warning Event on the workload and a metric.

The review only says *which* workload to look at, never what to create: anyone who reaches the
webhook port can POST a review. The PodGroups are computed by ``compute`` (the decision path,
passed in by the server, which sits above this layer) from the object the API server stored;
if that object implies none, none are created.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import call_json

log = logging.getLogger("tasgate.podgroups")
WAIT_FOR_OWNER_SECONDS = 30.0
QUEUE_LIMIT = 1000


PodGroups = tuple[Mapping[str, Any], ...]
Compute = Callable[[Mapping[str, Any]], Awaitable[PodGroups]]


@dataclass(frozen=True)
class Intent:
    """One admitted workload whose PodGroups (if any) are to be created."""

    group: str
    version: str
    resource: str  # plural, from the admission request
    kind: str
    api_version: str
    namespace: str
    name: str


class Creator:
    """``compute(stored object)`` gives the PodGroups that object needs (none: create nothing)."""

    def __init__(self, api: client.ApiClient, record: Callable[[str], None], compute: Compute) -> None:
        self.api = api
        self.record = record
        self.compute = compute
        self.queue: asyncio.Queue[Intent] = asyncio.Queue(QUEUE_LIMIT)

    def submit(self, intent: Intent) -> None:
        try:
            self.queue.put_nowait(intent)
        except asyncio.QueueFull:
            self.record("dropped")
            log.error("PodGroup queue full; %s/%s not handled", intent.namespace, intent.name)

    async def run(self) -> None:
        while True:
            intent = await self.queue.get()
            try:
                await self.handle(intent)
            except Exception:  # one bad intent must not stop the worker
                log.exception("PodGroup creation for %s/%s failed", intent.namespace, intent.name)
                self.record("failed")

    async def handle(self, intent: Intent) -> None:
        owner = await self._owner(intent)
        if owner is None:
            self.record("owner-missing")
            log.warning(
                "%s %s/%s never appeared; no PodGroup created", intent.kind, intent.namespace, intent.name
            )
            return
        owner.setdefault("apiVersion", intent.api_version)
        owner.setdefault("kind", intent.kind)
        pod_groups = await self.compute(owner)
        if not pod_groups:
            self.record("none-needed")
            return
        for pod_group in pod_groups:
            await self._create(intent, owner, pod_group)

    async def _owner(self, intent: Intent) -> dict[str, Any] | None:
        deadline = time.monotonic() + WAIT_FOR_OWNER_SECONDS
        delay = 0.1
        while True:
            try:
                return await self._get(intent)
            except ApiException as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    return None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _get(self, intent: Intent) -> dict[str, Any]:
        path = _path(intent.group, intent.version, intent.namespace, intent.resource) + f"/{intent.name}"
        return await self._call("GET", path)

    async def _create(self, intent: Intent, owner: Mapping[str, Any], pod_group: Mapping[str, Any]) -> None:
        api_version = str(pod_group["apiVersion"])
        group, version = api_version.split("/")
        body = dict(pod_group)
        meta = dict(body.get("metadata") or {})
        meta["ownerReferences"] = [
            {
                "apiVersion": intent.api_version,
                "kind": intent.kind,
                "name": intent.name,
                "uid": (owner.get("metadata") or {}).get("uid"),
            }
        ]
        meta.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "tasgate"
        body["metadata"] = meta
        try:
            await self._call("POST", _path(group, version, intent.namespace, "podgroups"), body)
            self.record("created")
            log.info(
                "created PodGroup %s/%s for %s %s",
                intent.namespace,
                meta.get("name"),
                intent.kind,
                intent.name,
            )
        except ApiException as exc:
            if exc.status == 409:
                self.record("exists")
                return
            self.record("failed")
            reason = "PodGroup CRD not installed" if exc.status == 404 else f"{exc.status} {exc.reason}"
            await self._event(intent, owner, f"cannot create PodGroup {meta.get('name')}: {reason}")

    async def _event(self, intent: Intent, owner: Mapping[str, Any], message: str) -> None:
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{intent.name}.", "namespace": intent.namespace},
            "involvedObject": {
                "apiVersion": intent.api_version,
                "kind": intent.kind,
                "name": intent.name,
                "namespace": intent.namespace,
                "uid": (owner.get("metadata") or {}).get("uid"),
            },
            "reason": "PodGroupCreateFailed",
            "message": message,
            "type": "Warning",
            "source": {"component": "tasgate"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        with contextlib.suppress(ApiException):
            await self._call("POST", f"/api/v1/namespaces/{intent.namespace}/events", body)
        log.warning("%s %s/%s: %s", intent.kind, intent.namespace, intent.name, message)

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return await call_json(self.api, method, path, body)


def _path(group: str, version: str, namespace: str, resource: str) -> str:
    base = f"/api/{version}" if group in ("", "core") else f"/apis/{group}/{version}"
    return f"{base}/namespaces/{namespace}/{resource}"
