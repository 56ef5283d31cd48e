"""Kubernetes Events (events.k8s.io/v1) for the gang state changes an operator must see.

``emit`` never blocks and never raises: an Event is queued and posted by ``run``, at most
``rate`` per second (a burst of ``burst``), and one with the same object, reason and note as one
posted within ``dedupe_seconds`` is dropped — the tracker emits once per state change, this keeps
a flapping gang from flooding the namespace. A full queue drops the Event (counted, logged).

Replicas converge on one Event per occurrence: its name is ``event_name`` (the object, and a hash
of its uid, the reason and the episode), so the API server keeps the first and answers the
others 409 AlreadyExists (counted ``exists``). Only the leader posts (``lead``, from the
election; without one every recorder posts): a follower's recorder holds what its tracker emits
for ``hold_seconds`` (bounded) and queues it when elected, so an occurrence the old leader never
posted is posted by the new one, and one it did post comes back ``exists``. ``run`` survives
whatever a post raises: logged (with a traceback when unexpected), counted ``failed``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import call_json, transient
from webhook.live.backoff import Backoff

log = logging.getLogger("tasgate.events")
REPORTING_CONTROLLER = "tasgate.io/lifecycle"
NOTE_LIMIT = 1024
POST_ATTEMPTS = 5  # one Event's posts, the first included
RETRY_AFTER_CAP = 30.0  # events.k8s.io/v1 rejects longer notes
# Between one Event's posts: 0.5 s doubling to 8 s, or the server's Retry-After; unjittered, as
# `POST_ATTEMPTS` bounds them and one poster runs per replica.
POST_BACKOFF = Backoff(0.5, 8.0, jitter=0.0, retry_after_cap=RETRY_AFTER_CAP)


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
        hold_seconds: float = 300.0,
        leading: bool = True,  # False where an election decides (``lead`` then says)
    ) -> None:
        self.api = api
        self.record = record  # result: posted, exists, failed, dropped, deduplicated
        self.rate, self.burst, self.dedupe_seconds = rate, burst, dedupe_seconds
        self.queue: asyncio.Queue[GangEvent] = asyncio.Queue(queue_limit)
        self.recent: dict[tuple[str, str, str], float] = {}
        self.instance = os.environ.get("POD_NAME") or socket.gethostname()
        self.leading = leading
        self.hold_seconds = hold_seconds
        self.held: deque[tuple[float, GangEvent]] = deque(maxlen=queue_limit)

    def lead(self, leading: bool) -> None:
        """The election's word (its ``on_change``). Elected: what was held, if recent, is queued."""
        self.leading = leading
        if not leading:
            return
        now = time.monotonic()
        held, self.held = self.held, deque(maxlen=self.held.maxlen)
        for since, event in held:
            if now - since < self.hold_seconds:
                self._queue(event)

    def emit(self, event: GangEvent) -> None:
        key = (event.regarding.uid or event.regarding.name, event.reason, event.note)
        now = time.monotonic()
        if now - self.recent.get(key, -self.dedupe_seconds) < self.dedupe_seconds:
            self.record("deduplicated")
            return
        self.recent[key] = now
        if len(self.recent) > 10 * self.queue.maxsize:
            self.recent = {k: t for k, t in self.recent.items() if now - t < self.dedupe_seconds}
        if self.leading:
            self._queue(event)
        else:
            self.held.append((now, event))

    def _queue(self, event: GangEvent) -> None:
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
            if not self.leading:  # the lease was lost while it waited: the new leader's to post
                self.held.append((time.monotonic(), event))
                continue
            try:
                await self.post(event)
            except Exception:  # post handles what it expects; nothing may stop the poster
                self.record("failed")
                log.exception("event %s on %s not posted", event.reason, event.regarding.name)

    async def post(self, event: GangEvent) -> None:
        """POST one Event; 409 means another replica (or an earlier try) posted this occurrence.

        A 429 (priority and fairness), a 5xx or a lost connection is retried, after the server's
        ``Retry-After`` or a doubling pause, up to `POST_ATTEMPTS` times: the name is the
        occurrence's, so a retry of a post that did land is a 409, never a second Event.
        """
        ns, name = event.regarding.namespace, event.regarding.name
        why = ""
        failure: Exception
        for attempt in range(1, POST_ATTEMPTS + 1):
            try:
                await self._call(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", self.body(event))
                self.record("posted")
                return
            except ApiException as exc:
                if exc.status == 409:
                    self.record("exists")
                    return
                failure, why = exc, f"{exc.status} {exc.reason}"
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                failure, why = exc, f"{type(exc).__name__}: {exc}"
            if not transient(failure) or attempt == POST_ATTEMPTS or not self.leading:
                break
            self.record("retried")
            await asyncio.sleep(POST_BACKOFF.pause(attempt, failure))
        self.record("failed")
        log.warning("event %s on %s/%s not posted: %s", event.reason, ns, name, why)

    def body(self, event: GangEvent) -> dict[str, Any]:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # One name per occurrence, the same on every replica: the API server keeps one.
            "metadata": {"name": event_name(event), "namespace": event.regarding.namespace},
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
