"""PodGroups reconciled from the watches: every gang that needs one has exactly one.

A pod labelled for a PodGroup that does not exist never schedules, and a PodGroup remembered
only in a process's memory is lost with it. So the desired state is level-triggered: the
``View`` (``reconcile_view``) watches Kueue's pods and both PodGroup kinds, and a PodGroup that
live pods name but the API server does not hold is *missing*. For each missing one the leader
walks the pods' controller ``ownerReferences`` up to the workload (GETting each), computes what
the stored workload needs with the injected ``compute`` (the decision path: a review body never
says what to create) and POSTs it, owned by the workload (garbage-collected with it) and
labelled ``app.kubernetes.io/managed-by=tasgate``. A PodGroup deleted under live pods is missing
again: repaired. A full resync every ``resync_seconds`` re-derives all of it from the watches,
so nothing is kept only in memory: a restarted or newly elected leader finds the same work.
Native v1.36 gangs tasgate makes (a Workload, then its PodGroup) are found the same way from
the unbound pods naming them (``reconcile_native``). A gang Kueue may admit partially gets a
PodGroup sized to Kueue's admission, patched once it is known (``reconcile_admission``).

Early triggers make the PodGroup before any pod exists: the validating review's ``hint``
(GET the object it names, waiting up to ``hint_seconds`` for it to be persisted) and the
creation of a Kueue Workload (its controller owner is the job). They only come sooner; the
pods are the proof.

Results (``record``, for ``tasgate_podgroups_total{result}``): ``created``; ``exists`` (409:
another writer, or an earlier attempt, made it); ``retried`` (429, 5xx, connection error or
timeout, or ``compute`` raising ``NotReadyError``: retried per key, backing off, ``Retry-After``
honoured: ``live.backoff``); ``failed`` (any other error: logged, with its traceback when
unexpected, a Warning Event on the workload when the API server refused; retried the same way);
``owner-missing`` (404: the workload is gone, or a hinted one never appeared: nothing to do);
``none-needed`` (the stored object implies no PodGroup); ``dropped`` (too many pending hints);
``repaired`` (a PodGroup patched to Kueue's admitted count).

Use: ``kinds()`` are fed to ``watch.run_kind`` on every replica (a new leader starts warm);
``run()`` is the writing loop, run on the leader only (cancelled when leadership is lost);
``hint(intent)`` from the validating review, on any replica (a follower keeps hints for
``hint_seconds`` in case it is elected, and otherwise leaves the work to the leader's watches).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live import reconcile_admission as admission
from webhook.live import reconcile_http as http
from webhook.live import reconcile_native as native
from webhook.live import reconcile_view as view
from webhook.live.api import call_json
from webhook.live.backoff import Backoff
from webhook.live.events import EventRecorder
from webhook.live.kinds import Kind
from webhook.live.reconcile_queue import WorkQueue
from webhook.model.workloads.registry import ADAPTERS

log = logging.getLogger("tasgate.podgroups")

PodGroups = tuple[Mapping[str, Any], ...]
Compute = Callable[[Mapping[str, Any]], Awaitable[PodGroups]]
HINT_POLL = Backoff(0.1, 2.0, jitter=0.0)  # a hinted object not there yet: being created, look soon


class NotReadyError(Exception):
    """``compute`` cannot tell yet (no cluster state loaded): retried, never taken for "none"."""


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


@dataclass(frozen=True)
class ReconcileSettings:
    resync_seconds: float = 30.0
    hint_seconds: float = 60.0  # how long a hinted object may take to appear
    settle_seconds: float = 60.0  # a target found to need nothing is looked at again after this
    backoff_base: float = 0.5
    backoff_max: float = 60.0
    workers: int = 4
    hint_limit: int = 1000


Key = view.Target | Intent | admission.Repair


class Reconciler(admission.AdmissionView):
    """The watch ``Sink`` (every replica) and the PodGroup writer (``run``: the leader only)."""

    def __init__(
        self,
        api: client.ApiClient,
        compute: Compute,
        record: Callable[[str], None] = lambda result: None,
        events: EventRecorder | None = None,
        settings: ReconcileSettings | None = None,
    ) -> None:
        super().__init__()
        self.api, self.compute, self.record, self.events = api, compute, record, events
        self.settings = settings or ReconcileSettings()
        self.hints: dict[Intent, float] = {}  # intent -> monotonic deadline
        self.failures: dict[Key, int] = {}
        self.settled: dict[view.Target, tuple[float, frozenset[str]]] = {}
        self.queue: WorkQueue[Key] | None = None  # while run() runs

    def kinds(self) -> list[Kind]:
        """What to feed this sink with (``watch.run_kind`` per kind, on every replica)."""
        return [*view.kinds(), *native.kinds(self.gate)]

    def hint(self, intent: Intent) -> None:
        """The validating review admitted this object: make its PodGroups as soon as it exists."""
        now = time.monotonic()
        if len(self.hints) >= self.settings.hint_limit:
            self.hints = {i: d for i, d in self.hints.items() if d > now}
        if len(self.hints) >= self.settings.hint_limit and intent not in self.hints:
            oldest = next(iter(self.hints))
            del self.hints[oldest]  # the oldest is the likeliest done; the watches have it anyway
            if self.queue is not None:  # a follower's hints are only a head start
                self.record("dropped")
                log.warning(
                    "too many PodGroup hints; %s/%s left to the watches", oldest.namespace, oldest.name
                )
        self.hints.pop(intent, None)
        self.hints[intent] = now + self.settings.hint_seconds
        if self.queue is not None:
            self.queue.add(intent)

    # -- the View's triggers --

    def wake(self, target: view.Target | admission.Repair) -> None:
        if self.queue is not None:
            self.queue.add(target)

    def early(self, owner: view.OwnerRef, namespace: str) -> None:
        if (owner.api_version, owner.kind) not in ADAPTERS:
            return
        group, _, version = owner.api_version.rpartition("/")
        resource = http.plural(owner.kind)
        self.hint(Intent(group, version, resource, owner.kind, owner.api_version, namespace, owner.name))

    # -- the writing loop --

    async def run(self) -> None:
        """Resync now and every ``resync_seconds``, with ``workers`` handling the queue."""
        queue: WorkQueue[Key] = WorkQueue()
        self.queue = queue
        workers = [asyncio.create_task(self._worker(queue)) for _ in range(self.settings.workers)]
        try:
            while True:
                self.resync()
                await asyncio.sleep(self.settings.resync_seconds)
        finally:
            self.queue = None
            queue.close()
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def resync(self) -> None:
        """Queue every missing target and every pending hint, from what the watches hold now."""
        now = time.monotonic()
        self.hints = {i: d for i, d in self.hints.items() if d > now}
        self.settled = {t: s for t, s in self.settled.items() if s[0] > now}
        if self.queue is None:
            return
        for intent in self.hints:
            self.queue.add(intent)
        for target in self.all_missing():
            self.queue.add(target)
        for repair in self.due():
            self.queue.add(repair)

    async def _worker(self, queue: WorkQueue[Key]) -> None:
        while True:
            key = await queue.get()
            try:
                await self._handle(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad key must not stop the writer
                self._failed(queue, key, exc)
            finally:
                queue.done(key)

    async def _handle(self, key: Key) -> None:
        if isinstance(key, Intent):
            await self._hinted(key)
        elif isinstance(key, admission.Repair):
            await self.repair(self.api, key, self._warn)
            self.failures.pop(key, None)
        else:
            await self._target(key)

    def _failed(self, queue: WorkQueue[Key], key: Key, exc: Exception) -> None:
        """Log it (with a traceback when unexpected), count it, and retry with backoff."""
        if isinstance(key, Intent) and self.hints.get(key, 0.0) <= time.monotonic():
            self._forget(key)
            log.warning(
                "PodGroups of %s/%s: %s; left to the watches", key.namespace, key.name, http.words(exc)
            )
            return
        attempt = self.failures[key] = self.failures.get(key, 0) + 1
        delay = Backoff(self.settings.backoff_base, self.settings.backoff_max).pause(attempt, exc)
        expected = http.transient(exc) or isinstance(exc, NotReadyError)
        self.record("retried" if expected else "failed")
        if expected or isinstance(exc, ApiException):
            if attempt == 1 or attempt % 10 == 0:  # a streak is logged, not every retry of it
                why = http.words(exc)
                log.warning("PodGroups for %s: %s; retry %d in %.1fs", _name(key), why, attempt, delay)
        else:
            log.exception("PodGroups for %s failed; retry %d in %.1fs", _name(key), attempt, delay)
        queue.add_after(key, delay)

    async def _hinted(self, intent: Intent) -> None:
        deadline = self.hints.get(intent)
        if deadline is None:
            return  # done, or expired: the watches have it
        path = http.object_path(intent.api_version, intent.namespace, intent.resource, intent.name)
        try:
            owner = await call_json(self.api, "GET", path)
        except ApiException as exc:
            if exc.status != 404:
                raise
            if time.monotonic() < deadline and self.queue is not None:
                self.failures[intent] = self.failures.get(intent, 0) + 1
                self.queue.add_after(intent, HINT_POLL.pause(self.failures[intent]))
                return
            self._forget(intent)
            self.record("owner-missing")
            log.warning("%s %s/%s never appeared: no PodGroup", intent.kind, intent.namespace, intent.name)
            return
        owner.setdefault("apiVersion", intent.api_version)
        owner.setdefault("kind", intent.kind)
        groups = await self.compute(owner)
        if not any(native.carries(owner, g) for g in groups):
            self.record("none-needed")
        await self._create_all(owner, groups)
        self._forget(intent)

    async def _target(self, target: view.Target) -> None:
        pods = self.members_of(target) if self.missing(target) else []
        if not pods:
            self.failures.pop(target, None)
            return
        owners = frozenset(p.owner.uid if p.owner else p.uid for p in pods)
        settled = self.settled.get(target)
        if settled is not None and settled[0] > time.monotonic() and settled[1] == owners:
            return
        chain = await http.controllers(self.api, pods[0])
        for obj in reversed(chain or []):
            if (obj.get("apiVersion"), obj.get("kind")) not in ADAPTERS:
                continue
            groups = await self.compute(obj)
            if any(view.names(g, target) and native.carries(obj, g) for g in groups):
                await self._create_all(obj, groups)
                self.failures.pop(target, None)
                return
        self.settled[target] = (time.monotonic() + self.settings.settle_seconds, owners)
        self.failures.pop(target, None)
        self.record("none-needed" if chain else "owner-missing")
        log.info(
            "PodGroup %s/%s: %s", target.namespace, target.name, "none needed" if chain else "owner gone"
        )

    async def _create_all(self, owner: Mapping[str, Any], groups: PodGroups) -> None:
        namespace = str((owner.get("metadata") or {}).get("namespace") or "")
        for group in native.wanted(owner, groups):  # a native Workload before its PodGroup
            api_version, name = str(group.get("apiVersion")), str((group.get("metadata") or {}).get("name"))
            if group.get("kind") != "PodGroup" or not self.exists(api_version, namespace, name):
                await self._create(owner, self.sized(owner, group), api_version, name)

    async def _create(
        self, owner: Mapping[str, Any], group: Mapping[str, Any], api_version: str, name: str
    ) -> None:
        meta = owner.get("metadata") or {}
        namespace, kind = str(meta.get("namespace") or ""), str(group.get("kind") or "PodGroup")
        path = http.object_path(api_version, namespace, http.plural(kind))
        try:
            await call_json(self.api, "POST", path, http.owned(group, owner))
        except ApiException as exc:
            if exc.status == 409:
                self.record("exists")
                self._made(kind, api_version, namespace, name)
                return
            if not http.transient(exc):
                why = f"{api_version} not served" if exc.status == 404 else f"{exc.status} {exc.reason}"
                self._warn(owner, name, f"cannot create {kind} {name}: {why}", str(exc.status))
            raise
        self._made(kind, api_version, namespace, name)
        self.record("created")
        log.info("created %s %s/%s for %s %s", kind, namespace, name, owner.get("kind"), meta.get("name"))

    def _made(self, kind: str, api_version: str, namespace: str, name: str) -> None:
        if kind == "PodGroup":  # a native Workload is not watched: POSTed again, 409 then
            self.created(api_version, namespace, name)

    def _warn(self, owner: Mapping[str, Any], name: str, note: str, status: str) -> None:
        if self.events is not None:
            self.events.emit(http.failure_event(owner, note, episode=f"{name}:{status}"))

    def _forget(self, intent: Intent) -> None:
        self.hints.pop(intent, None)
        self.failures.pop(intent, None)


def _name(key: Key) -> str:
    return f"{key.namespace}/{key.name}"
