"""Live cluster state from the API server: kubernetes-asyncio list+watch, one writer, swaps.

Each kind is listed, then watched from the list's resourceVersion with a server-side timeout
and a client read timeout (a dead connection cannot hang a watch); a 410 Gone re-lists and
replaces the kind wholesale, which synthesises the deletions missed meanwhile. Errors back off
exponentially. Kueue CRDs that are not installed are tolerated and retried, not fatal.

The `Mirror` is the only writer. It keeps parsed objects, and when something placement-relevant
changed it builds a new immutable `ClusterState` and publishes it by swapping one reference in
the `StateHolder`; admission requests never wait for a rebuild. When the API server is
unreachable the last state keeps serving until it is older than the staleness bound; readiness
then turns false and reviews are answered per `--on-timeout` (see the README).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from scorer.model import Node
from webhook.cluster import ClusterState, build_state, parse_node, pod_usage
from webhook.errors import InvalidObject
from webhook.server import API, STATE, StateHolder

log = logging.getLogger("tasgate.live")

LIVE_POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
KUEUE = "kueue.x-k8s.io"

Lister = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Kind:
    """One watched resource: how to list it and whether its absence is tolerated."""

    name: str
    api_version: str
    kind: str
    lister: Callable[[client.ApiClient], Lister]
    optional: bool = False
    kwargs: Mapping[str, str] = field(default_factory=dict)


def kinds(kueue_version: str = "v1beta2") -> list[Kind]:
    def custom(group: str, version: str, plural: str) -> Callable[[client.ApiClient], Lister]:
        def make(api: client.ApiClient) -> Lister:
            objects = client.CustomObjectsApi(api)

            async def call(**kw: Any) -> Any:
                return await objects.list_cluster_custom_object(group, version, plural, **kw)

            return call

        return make

    def core(method: str) -> Callable[[client.ApiClient], Lister]:
        return lambda api: getattr(client.CoreV1Api(api), method)

    kueue = f"{KUEUE}/{kueue_version}"
    return [
        Kind("nodes", "v1", "Node", core("list_node")),
        Kind(
            "pods",
            "v1",
            "Pod",
            core("list_pod_for_all_namespaces"),
            kwargs={"field_selector": LIVE_POD_SELECTOR},
        ),
        Kind("namespaces", "v1", "Namespace", core("list_namespace")),
        Kind("topologies", kueue, "Topology", custom(KUEUE, kueue_version, "topologies"), True),
        Kind(
            "resourceflavors", kueue, "ResourceFlavor", custom(KUEUE, kueue_version, "resourceflavors"), True
        ),
        Kind("clusterqueues", kueue, "ClusterQueue", custom(KUEUE, kueue_version, "clusterqueues"), True),
        Kind("localqueues", kueue, "LocalQueue", custom(KUEUE, kueue_version, "localqueues"), True),
    ]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class Mirror:
    """Parsed objects per kind; the single writer of the published state."""

    def __init__(self, holder: StateHolder, watched: list[Kind], debounce: float = 0.2) -> None:
        self.holder = holder
        self.watched = {k.name: k for k in watched}
        self.debounce = debounce
        self.raw: dict[str, dict[str, Mapping[str, Any]]] = {k.name: {} for k in watched}
        self.nodes: dict[str, tuple[str, Node]] = {}  # name -> (resourceVersion, node without usage)
        self.usage: dict[str, tuple[str, dict[str, int]]] = {}  # pod key -> (node, requests)
        self.synced: dict[str, float] = {}  # kind -> monotonic time of the last healthy list/watch end
        self.absent: set[str] = set()
        self.dirty = asyncio.Event()
        self.generation = 0

    def replace(self, kind: str, items: Sequence[Mapping[str, Any]]) -> None:
        """A fresh list: everything not in it is gone (synthesised deletions)."""
        self.raw[kind] = {_key(o): o for o in items}
        if kind == "nodes":
            self.nodes = {}
            for o in items:
                self._node(o)
        elif kind == "pods":
            self.usage = {}
            for o in items:
                self._pod(o)
        self.absent.discard(kind)
        self.healthy(kind)
        self.dirty.set()

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        if event == "DELETED":
            self.raw[kind].pop(key, None)
            if kind == "nodes":
                self.nodes.pop(str((obj.get("metadata") or {}).get("name")), None)
            elif kind == "pods":
                self.usage.pop(key, None)
        else:
            self.raw[kind][key] = obj
            if kind == "nodes":
                self._node(obj)
            elif kind == "pods":
                self._pod(obj)
        self.dirty.set()

    def mark_absent(self, kind: str) -> None:
        if kind not in self.absent:
            log.warning("%s are not served by the API server (CRD not installed?); retrying", kind)
        self.absent.add(kind)
        self.raw[kind] = {}
        self.healthy(kind)
        self.dirty.set()

    def healthy(self, kind: str) -> None:
        self.synced[kind] = time.monotonic()

    @property
    def ready(self) -> bool:
        return all(k in self.synced for k in self.watched)

    def freshness(self) -> float | None:
        """When the stalest watched kind was last known good (None before the first sync)."""
        return min(self.synced.values()) if self.ready else None

    def build(self) -> ClusterState:
        totals: dict[str, dict[str, int]] = {}
        for node, requests in self.usage.values():
            into = totals.setdefault(node, {})
            for resource, amount in requests.items():
                into[resource] = into.get(resource, 0) + amount
        others = [
            o for kind, objs in self.raw.items() if kind not in ("nodes", "pods") for o in objs.values()
        ]
        self.generation += 1
        state = build_state(others, self.generation)
        state.nodes = tuple(
            replace(node, usage=totals.get(name, {})) for name, (_, node) in sorted(self.nodes.items())
        )
        return state

    async def publish_forever(self) -> None:
        """Rebuild after changes (debounced) and keep the holder's freshness current."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dirty.wait(), 1.0)
            fresh = self.freshness()
            if self.dirty.is_set() and self.ready:
                await asyncio.sleep(self.debounce)
                self.dirty.clear()
                try:
                    self.holder.publish(self.build())
                except InvalidObject as exc:
                    log.error("cluster state not rebuilt: %s", exc)
            if fresh is not None:
                self.holder.touch(fresh)

    def _node(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name, version = str(meta.get("name")), str(meta.get("resourceVersion", ""))
        cached = self.nodes.get(name)
        if cached is not None and cached[0] == version and version:
            return
        try:
            self.nodes[name] = (version, parse_node(obj, {}))
        except InvalidObject as exc:
            log.error("node %s ignored: %s", name, exc)
            self.nodes.pop(name, None)

    def _pod(self, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        try:
            found = pod_usage(obj)
        except InvalidObject as exc:
            log.error("pod %s ignored: %s", key, exc)
            found = None
        if found is None:
            self.usage.pop(key, None)
        else:
            self.usage[key] = found


@dataclass
class WatchSettings:
    watch_seconds: int = 240  # server-side timeout of one watch request
    read_slack: float = 30.0  # client read timeout beyond it: a dead connection cannot hang
    backoff_max: float = 30.0
    absent_retry: float = 30.0


async def run_kind(api: client.ApiClient, kind: Kind, mirror: Mirror, settings: WatchSettings) -> None:
    """List, then watch, forever; re-list on 410 Gone; back off on errors."""
    lister = kind.lister(api)
    backoff = 0.5
    while True:
        try:
            version: str | None = await _list(lister, kind, mirror)
            backoff = 0.5
            while version is not None:
                version = await _watch(lister, kind, mirror, settings, version)
        except ApiException as exc:
            if exc.status == 404 and kind.optional:
                mirror.mark_absent(kind.name)
                await asyncio.sleep(settings.absent_retry)
                continue
            log.warning("%s: API error %s %s; retrying in %.1fs", kind.name, exc.status, exc.reason, backoff)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            log.warning("%s: %s: %s; retrying in %.1fs", kind.name, type(exc).__name__, exc, backoff)
        await asyncio.sleep(backoff * (0.8 + 0.4 * random.random()))
        backoff = min(backoff * 2, settings.backoff_max)


async def checked(response: aiohttp.ClientResponse) -> aiohttp.ClientResponse:
    """Raw (unpreloaded) responses do not raise on errors: do it here, with the server's words."""
    if not 200 <= response.status <= 299:
        text = (await response.read()).decode(errors="replace")[:500]
        response.release()
        raise ApiException(status=response.status, reason=text)
    return response


async def _list(lister: Lister, kind: Kind, mirror: Mirror) -> str:
    response = await checked(await lister(_preload_content=False, **kind.kwargs))
    body = orjson.loads(await response.read())
    items = [{"apiVersion": kind.api_version, "kind": kind.kind, **item} for item in body.get("items") or []]
    mirror.replace(kind.name, items)
    return str((body.get("metadata") or {}).get("resourceVersion", ""))


async def _watch(
    lister: Lister, kind: Kind, mirror: Mirror, settings: WatchSettings, version: str
) -> str | None:
    """One watch request; the next resourceVersion, or None to re-list (410 Gone)."""
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=10, sock_read=settings.watch_seconds + settings.read_slack
    )
    response = await checked(
        await lister(
            watch=True,
            resource_version=version,
            timeout_seconds=settings.watch_seconds,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=timeout,
            **kind.kwargs,
        )
    )
    async with response:
        async for line in _lines(response):
            event = orjson.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == 410:
                    log.info("%s: resourceVersion %s expired (410 Gone); re-listing", kind.name, version)
                    return None
                raise ApiException(status=obj.get("code", 500), reason=str(obj.get("message")))
            version = str((obj.get("metadata") or {}).get("resourceVersion", version))
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                mirror.apply(
                    kind.name, str(event["type"]), {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
                )
    mirror.healthy(kind.name)
    return version


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    while True:
        line = await response.content.readline()
        if not line:
            return
        if line.strip():
            yield line


def start(api: client.ApiClient, mirror: Mirror, settings: WatchSettings) -> list[asyncio.Task[None]]:
    tasks = [
        asyncio.create_task(run_kind(api, k, mirror, settings), name=f"watch-{k.name}")
        for k in mirror.watched.values()
    ]
    tasks.append(asyncio.create_task(mirror.publish_forever(), name="publish"))
    return tasks


async def api_client(kubeconfig: str | None) -> client.ApiClient:
    """From a kubeconfig file, or the in-cluster service account when none is given."""
    configuration = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


def watching(
    kubeconfig: str | None, settings: WatchSettings
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The cleanup_ctx that keeps the app's state current from the API server."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        api = await api_client(kubeconfig)
        app[API] = api
        app[STATE].source = "live"
        tasks = start(api, Mirror(app[STATE], kinds()), settings)
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()

    return ctx
