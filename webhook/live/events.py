"""Kubernetes Events (events.k8s.io/v1) for the gang state changes an operator must see.

``emit`` never blocks and never raises: an Event is queued and posted by ``run``, at most
``rate`` per second (a burst of ``burst``), and one with the same object, reason and note as one
posted within ``dedupe_seconds`` is dropped — the tracker emits once per state change, this keeps
a flapping gang from flooding the namespace. A full queue drops the Event (counted, logged).
Replicas agree on each Event's name (``event_name``), so the API server keeps one of each.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import call_json

log = logging.getLogger("tasgate.events")
REPORTING_CONTROLLER = "tasgate.io/lifecycle"
NOTE_LIMIT = 1024  # events.k8s.io/v1 rejects longer notes


@dataclass(frozen=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def body(self) -> dict[str, str]:
        ref = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {**ref, "uid": self.uid} if self.uid else ref


@dataclass(frozen=True)
class GangEvent:
    regarding: ObjectRef
    related: ObjectRef | None
    reason: str  # CamelCase, e.g. PartialStart
    action: str  # what tasgate did: Track, Compare
    note: str
    type: str = "Warning"
    episode: str = ""  # what makes this occurrence one (e.g. when the state began), same on every replica


def event_name(event: GangEvent) -> str:
    """``<object>.<hash>`` as kubectl's recorder names Events; the hash is of the object, reason and
    episode, so every replica of tasgate names one occurrence alike and the API server keeps one
    (the others get AlreadyExists)."""
    key = "\0".join((event.regarding.uid or event.regarding.name, event.reason, event.episode or event.note))
    return f"{event.regarding.name[:200]}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class EventRecorder:
    def __init__(
        self,
        api: client.ApiClient,
        record: Callable[[str], None] = lambda result: None,
        rate: float = 2.0,
        burst: int = 20,
        dedupe_seconds: float = 600.0,
        queue_limit: int = 500,
    ) -> None:
        self.api = api
        self.record = record  # result: posted, failed, dropped, deduplicated
        self.rate, self.burst, self.dedupe_seconds = rate, burst, dedupe_seconds
        self.queue: asyncio.Queue[GangEvent] = asyncio.Queue(queue_limit)
        self.recent: dict[tuple[str, str, str], float] = {}
        self.instance = os.environ.get("POD_NAME") or socket.gethostname()

    def emit(self, event: GangEvent) -> None:
        key = (event.regarding.uid or event.regarding.name, event.reason, event.note)
        now = time.monotonic()
        if now - self.recent.get(key, -self.dedupe_seconds) < self.dedupe_seconds:
            self.record("deduplicated")
            return
        self.recent[key] = now
        if len(self.recent) > 10 * self.queue.maxsize:
            self.recent = {k: t for k, t in self.recent.items() if now - t < self.dedupe_seconds}
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.record("dropped")
            log.warning("event queue full; %s %s dropped", event.reason, event.regarding.name)

    async def run(self) -> None:
        tokens, last = float(self.burst), time.monotonic()
        while True:
            event = await self.queue.get()
            now = time.monotonic()
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            last = now
            if tokens < 1:
                await asyncio.sleep((1 - tokens) / self.rate)
                tokens, last = 1.0, time.monotonic()
            tokens -= 1
            await self.post(event)

    async def post(self, event: GangEvent) -> None:
        ns = event.regarding.namespace
        try:
            await self._call(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", self.body(event))
            self.record("posted")
        except ApiException as exc:
            if exc.status == 409:
                self.record("exists")  # another replica posted this very occurrence
                return
            self.record("failed")
            log.warning("event %s on %s/%s not posted: %s", event.reason, ns, event.regarding.name, exc)
        except (OSError, TimeoutError) as exc:
            self.record("failed")
            log.warning("event %s on %s/%s not posted: %s", event.reason, ns, event.regarding.name, exc)

    def body(self, event: GangEvent) -> dict[str, Any]:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # Named as kubectl's recorder names them (events.k8s.io rejects a generateName ending in ".").
            "metadata": {
                "name": f"{event.regarding.name}.{time.time_ns():x}",
                "namespace": event.regarding.namespace,
            },
            "eventTime": stamp,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": f"{REPORTING_CONTROLLER}-{self.instance}"[:128],
            "action": event.action,
            "reason": event.reason,
            "note": event.note[:NOTE_LIMIT],
            "type": event.type,
            "regarding": event.regarding.body(),
        }
        if event.related is not None:
            body["related"] = event.related.body()
        return body

    async def _call(self, path: str, body: Any) -> None:
        await call_json(self.api, "POST", path, body)
