"""MultiKueue worker clusters watched live (``tasgate serve --multikueue-workers``).

Kueue's manager reaches each worker through a ``MultiKueueCluster``: a kubeconfig in a Secret of
Kueue's own namespace (key ``kubeconfig``), or a file path on the Kueue pod. tasgate reads the
same objects and Secrets, and keeps one live state per worker, built by the same watches and
`Mirror` as its own. The manager's published state carries them (``ClusterState.workers``), so
a MultiKueue gang is judged where Kueue dispatches it (`decide.kueue.multikueue`).

A worker tasgate cannot judge on now is *unreached* (``ClusterState.unreached``, with why): no
state loaded yet, a state older than the staleness bound, a kubeconfig it cannot read (a path on
Kueue's pod, a ClusterProfile, a Secret missing or malformed), or a MultiKueueCluster Kueue
itself reports inactive. An unreached worker could hold the gang, so it never adds to a denial.

Level-triggered: the watch of MultiKueueClusters marks the set dirty; one loop reads each
cluster's Secret, starts the workers that are new or whose kubeconfig changed, stops the others,
and republishes the manager's state. It also runs every `RESYNC_SECONDS`, which is how a Secret
rotated in place and a worker whose state went stale are seen.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import get_object, transient
from webhook.live.holder import StateHolder
from webhook.live.kinds import KUEUE, Kind, custom_lister
from webhook.live.watch import Collected
from webhook.state.cluster import ClusterState

log = logging.getLogger("tasgate.live")

KIND = "multikueueclusters"
SECRET_KEY = "kubeconfig"  # where Kueue reads a worker's kubeconfig in its Secret
RESYNC_SECONDS = 10.0


class Worker(Protocol):
    """One worker cluster's live state, as the serving layer starts it."""

    holder: StateHolder

    async def stop(self) -> None: ...


StartWorker = Callable[[str, Mapping[str, Any]], Awaitable[Worker]]


@dataclass
class WorkerState:
    """A `Worker` the serving layer runs: its holder, fed by watches in ``task`` over ``api``."""

    holder: StateHolder
    api: Any
    task: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.api.close()


def multikueue_clusters() -> Kind:
    """The manager's MultiKueueCluster objects (cluster-scoped; absent without MultiKueue)."""
    return Kind(KIND, f"{KUEUE}/v1beta2", "MultiKueueCluster", custom_lister(KUEUE, "v1beta2", KIND), True)


@dataclass(frozen=True)
class Wanted:
    """A MultiKueueCluster as tasgate reads it: where its kubeconfig is, or why it cannot be read."""

    secret: str | None
    problem: str | None = None
    inactive: str | None = None  # Kueue's own Active=False message


@dataclass
class Running:
    digest: str
    worker: Worker


class WorkerClusters:
    """The watch Sink of MultiKueueCluster objects, and the loop that keeps one state per worker."""

    def __init__(
        self,
        api: Any,
        namespace: str,
        start: StartWorker,
        manager: StateHolder,
        stale_after: float,
    ) -> None:
        self.api, self.namespace, self.start = api, namespace, start
        self.manager, self.stale_after = manager, stale_after
        self.wanted: dict[str, Wanted] = {}
        self.running: dict[str, Running] = {}
        self.unreadable: dict[str, str] = {}  # workers whose kubeconfig could not be read, and why
        self.dirty = asyncio.Event()
        manager.attach = self.attach

    # -- the watch Sink (``live.watch.run_kind``) --

    def listing(self, kind: str) -> Collected:
        return Collected(kind)

    def commit(self, pages: Collected) -> None:
        self.wanted = {_name(obj): wanted(obj) for obj in pages.items}
        self.dirty.set()

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        if event == "DELETED":
            self.wanted.pop(_name(obj), None)
        else:
            self.wanted[_name(obj)] = wanted(obj)
        self.dirty.set()

    def mark_absent(self, kind: str) -> None:  # MultiKueue's CRDs are not served: no workers
        self.commit(Collected(kind))

    def healthy(self, kind: str) -> None: ...
    def connected(self, kind: str) -> None: ...
    def disconnected(self, kind: str) -> None: ...

    # -- the loop --

    async def run(self) -> None:
        """Reconcile whenever the set changes, and every `RESYNC_SECONDS`; stop all on cancel."""
        try:
            while True:
                self.dirty.clear()
                await self.reconcile()
                # A resync: Secrets rotated, states gone stale. asyncio.timeout, not wait_for: on
                # 3.11 wait_for drops a cancellation that lands as the event is set.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESYNC_SECONDS):
                        await self.dirty.wait()
        finally:
            await self._stop(list(self.running))

    async def reconcile(self) -> None:
        await self._stop([name for name in self.running if name not in self.wanted])
        for name, want in sorted(self.wanted.items()):
            await self._reconcile_one(name, want)
        self.manager.republish()

    async def _reconcile_one(self, name: str, want: Wanted) -> None:
        config, problem = await self._kubeconfig(want)
        if config is None:
            if problem is not None:  # a transient read failure keeps the worker it had
                self.unreadable[name] = problem
                await self._stop([name])
            return
        self.unreadable.pop(name, None)
        digest = hashlib.sha256(yaml.safe_dump(config, sort_keys=True).encode()).hexdigest()
        found = self.running.get(name)
        if found is not None and found.digest == digest:
            return
        await self._stop([name])
        try:
            worker = await self.start(name, config)
        except Exception as exc:  # a kubeconfig the client refuses: said, never a crash of the loop
            self.unreadable[name] = f"its kubeconfig cannot be used: {type(exc).__name__}: {exc}"[:300]
            log.warning("MultiKueue worker %s: %s", name, self.unreadable[name])
            return
        worker.holder.listeners.append(self.manager.republish)
        self.running[name] = Running(digest, worker)
        log.info("MultiKueue worker %s: watching its cluster", name)

    async def _kubeconfig(self, want: Wanted) -> tuple[Mapping[str, Any] | None, str | None]:
        """The worker's kubeconfig, or (None, why); (None, None) on a transient error."""
        if want.secret is None:
            return None, want.problem
        path = f"/api/v1/namespaces/{self.namespace}/secrets/{want.secret}"
        try:
            secret = await get_object(self.api, path)
        except ApiException as exc:
            if transient(exc):
                return None, None
            return None, f'Secret "{self.namespace}/{want.secret}" cannot be read ({exc.status})'
        except Exception as exc:
            if transient(exc):
                return None, None
            raise
        return kubeconfig_of(secret, f"{self.namespace}/{want.secret}")

    async def _stop(self, names: Iterable[str]) -> None:
        for name in list(names):
            found = self.running.pop(name, None)
            if found is not None:
                await found.worker.stop()
                log.info("MultiKueue worker %s: stopped watching", name)

    # -- what the manager's state carries --

    def attach(self, state: ClusterState) -> ClusterState:
        """``state`` with the workers' current states and the workers it cannot judge on."""
        workers: dict[str, ClusterState] = {}
        unreached: dict[str, str] = {}
        for name, want in self.wanted.items():
            held = self.running[name].worker.holder if name in self.running else None
            why = self._unreached(name, want, held)
            if why is None and held is not None and held.current is not None:
                workers[name] = held.current
            else:
                unreached[name] = why or "not watched yet"
        for listed in state.multikueue_configs.values():
            for name in listed:
                if name not in self.wanted:
                    unreached[name] = "no MultiKueueCluster of that name"
        same = workers.keys() == state.workers.keys() and all(
            state.workers[name] is found for name, found in workers.items()
        )
        if same and unreached == state.unreached:
            return state
        return replace(state, workers=workers, unreached=unreached)

    def _unreached(self, name: str, want: Wanted, held: StateHolder | None) -> str | None:
        if want.inactive is not None:
            return f"Kueue reports it inactive: {want.inactive}"
        if name in self.unreadable:
            return self.unreadable[name]
        if want.problem is not None:
            return want.problem
        if held is None or held.current is None:
            return "its state is not loaded yet"
        age = held.age()
        if self.stale_after and age is not None and age > self.stale_after:
            return f"its state is stale ({age:.0f}s old)"
        return None


def wanted(obj: Mapping[str, Any]) -> Wanted:
    """Where a MultiKueueCluster's kubeconfig is (v1beta2 ``clusterSource.kubeConfig``, v1beta1
    ``kubeConfig``), and Kueue's own word on whether it is connected."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    source = spec.get("clusterSource") if isinstance(spec.get("clusterSource"), Mapping) else spec
    config = source.get("kubeConfig") if isinstance(source, Mapping) else None
    inactive = _inactive(obj)
    if not isinstance(config, Mapping):
        profile = isinstance(source, Mapping) and source.get("clusterProfileRef")
        why = "it is reached through a ClusterProfile, which tasgate does not read" if profile else None
        return Wanted(None, why or "it names no kubeconfig", inactive)
    location, kind = str(config.get("location") or ""), str(config.get("locationType") or "Secret")
    if kind != "Secret":
        return Wanted(None, f"its kubeconfig is a path on Kueue's pod ({location}), not a Secret", inactive)
    if not location:
        return Wanted(None, "its kubeConfig names no Secret", inactive)
    return Wanted(location, None, inactive)


def kubeconfig_of(secret: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """The kubeconfig in a Secret's ``kubeconfig`` key, or (None, why)."""
    data = secret.get("data")
    raw = data.get(SECRET_KEY) if isinstance(data, Mapping) else None
    if not isinstance(raw, str):
        return None, f'Secret "{where}" has no "{SECRET_KEY}" key'
    try:
        config = yaml.safe_load(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError, yaml.YAMLError):
        return None, f'Secret "{where}": "{SECRET_KEY}" is not a kubeconfig (base64 YAML)'
    if not isinstance(config, Mapping) or not isinstance(config.get("clusters"), list):
        return None, f'Secret "{where}": "{SECRET_KEY}" is not a kubeconfig (no clusters)'
    return config, None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _inactive(obj: Mapping[str, Any]) -> str | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == "Active" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "Active=False")
    return None
