"""Live cluster state from the API server: kubernetes-asyncio list+watch, one writer, swaps.

Each kind is listed, then watched from the list's resourceVersion with a server-side timeout
and a client read timeout (a dead connection cannot hang a watch); a broken watch resumes from
the last resourceVersion applied, and only a 410 Gone re-lists and replaces the kind wholesale,
which synthesises the deletions missed meanwhile. Errors back off exponentially (`live.backoff`,
honouring ``Retry-After``), starting over once a stream opens. Kueue CRDs that are not installed
are tolerated and retried, not fatal.

The `Mirror` (``live.mirror``) is the only writer. It keeps parsed objects, and when
something placement-relevant changed it builds a new immutable `ClusterState` and publishes
it by swapping one reference in the `StateHolder`; admission requests never wait for a
rebuild. When the API server is unreachable the last state keeps serving until it is older
than the staleness bound; readiness then turns false and reviews are answered per
`--on-timeout` (see docs/live.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import checked
from webhook.live.backoff import Backoff, Retry
from webhook.live.kinds import Kind, Lister

log = logging.getLogger("tasgate.live")


class Pages(Protocol):
    """One kind's list as it arrives, page by page."""

    kind: str

    def add(self, items: Iterable[Mapping[str, Any]]) -> None: ...


class Collected:
    """Pages kept as objects until the list is complete: for sinks whose lists are small."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items: list[Mapping[str, Any]] = []

    def add(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.items.extend(items)


class Sink(Protocol):
    """What a list+watch feeds: the ``Mirror`` (cluster state), or the lifecycle ``Tracker``."""

    def listing(self, kind: str) -> Any: ...  # a `Pages` the sink's own `commit` takes back
    def commit(self, pages: Any) -> None: ...
    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None: ...
    def mark_absent(self, kind: str) -> None: ...
    def healthy(self, kind: str) -> None: ...
    def connected(self, kind: str) -> None: ...
    def disconnected(self, kind: str) -> None: ...


@dataclass
class WatchSettings:
    watch_seconds: int = 240  # server-side timeout of one watch request
    # The longest a watch may say nothing: the API server's watch cache sends every watch a
    # BOOKMARK about once a minute, so a stream silent for longer is dead (a wedged server, a
    # half-open connection behind a load balancer) and is resumed on a new connection.
    silence_seconds: float = 90.0
    list_read_seconds: float = 60.0  # one list page: a half-open connection cannot hang a list
    # A watch that cannot connect retries at least this often: an API server back from an
    # outage is seen within seconds (an unanswered connection attempt costs nothing).
    backoff_max: float = 8.0
    absent_retry: float = 30.0


WATCH_BACKOFF_INITIAL = 0.5  # a break's first retry; `WatchSettings.backoff_max` caps the doubling


@dataclass
class Cursor:
    """Where a kind's watch resumes: the last resourceVersion applied (None: list first)."""

    version: str | None = None
    opened: bool = False  # the last watch request got its stream (the connection works)


async def run_kind(api: client.ApiClient, kind: Kind, mirror: Sink, settings: WatchSettings) -> None:
    """List, then watch, forever; back off on errors.

    A watch that breaks (a dropped connection, a read timeout, an API server restart) resumes
    from the last resourceVersion it applied, as client-go's reflector does: only a 410 Gone
    re-lists. A re-list is a consistent read of the whole kind (tens of thousands of pods, a
    hundred pages) and on a loaded API server takes far longer than the break it would repair;
    the kind is unconfirmed all that time.
    """
    lister = kind.lister(api)
    retry = Retry(Backoff(WATCH_BACKOFF_INITIAL, settings.backoff_max))
    cursor = Cursor()
    while True:
        failure: Exception
        try:
            if cursor.version is None:
                cursor.version = await _list(lister, kind, mirror, settings)
                retry.reset()
            while await _watch(lister, kind, mirror, settings, cursor):
                retry.reset()
            cursor.version = None  # 410 Gone: re-list at once
            continue
        except ApiException as exc:
            forbidden = exc.status == 403 and kind.forbidden_ok
            if kind.optional and (exc.status == 404 or forbidden):
                if forbidden:
                    log.debug("%s: forbidden (RBAC); retrying", kind.name)
                mirror.mark_absent(kind.name)
                cursor.version = None
                await asyncio.sleep(settings.absent_retry)
                continue
            if exc.status == 410:
                cursor.version = None
            # A 429 "storage is (re)initializing" says Retry-After: 1, which the pause honours.
            failure, why = exc, f"API error {exc.status} {exc.reason}"
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            failure, why = exc, f"{type(exc).__name__}: {exc}"
        mirror.disconnected(kind.name)
        if cursor.opened:
            retry.reset()  # the stream had worked: this is a fresh break
            cursor.opened = False
        pause = retry.failed(failure)
        log.warning("%s: %s; retrying in %.1fs", kind.name, why, pause)
        await asyncio.sleep(pause)


LIST_PAGE = 500  # client-go's reflector pages lists the same way


async def _list(lister: Lister, kind: Kind, sink: Sink, settings: WatchSettings) -> str:
    """List in pages of `LIST_PAGE`, each handed to the sink's listing before the next is read
    (the Mirror parses and slims a page at once, so its peak memory is a page of objects, not the
    cluster's); the kind is swapped in when the list is complete."""
    listing = sink.listing(kind.name)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=settings.list_read_seconds)
    token: str | None = None
    while True:
        more = {"_continue": token} if token else {}
        response = await checked(
            await lister(
                _preload_content=False, limit=LIST_PAGE, _request_timeout=timeout, **more, **kind.kwargs
            )
        )
        body = orjson.loads(await response.read())
        listing.add(
            {"apiVersion": kind.api_version, "kind": kind.kind, **item} for item in body.get("items") or []
        )
        meta = body.get("metadata") or {}
        token = meta.get("continue") or None
        if token is None:
            sink.commit(listing)
            return str(meta.get("resourceVersion", ""))


async def _watch(lister: Lister, kind: Kind, mirror: Sink, settings: WatchSettings, cursor: Cursor) -> bool:
    """One watch request from ``cursor.version``, advancing it per event; False on 410 Gone
    (re-list), True when the server ended the watch (resume).

    While the stream is open the kind counts as current (``Mirror.connected``); every event,
    BOOKMARK included, refreshes it. A BOOKMARK only carries a resourceVersion to resume from:
    it is never applied as an object.
    """
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=settings.silence_seconds)
    response = await checked(
        await lister(
            watch=True,
            resource_version=cursor.version,
            timeout_seconds=settings.watch_seconds,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=timeout,
            **kind.kwargs,
        )
    )
    mirror.connected(kind.name)
    cursor.opened = True
    try:
        async with response:
            async for line in _lines(response):
                event = orjson.loads(line)
                obj = event.get("object") or {}
                kind_of_event = event.get("type")
                if kind_of_event == "ERROR":
                    if obj.get("code") == 410:
                        log.info(
                            "%s: resourceVersion %s expired (410 Gone); re-listing", kind.name, cursor.version
                        )
                        return False
                    raise ApiException(status=obj.get("code", 500), reason=str(obj.get("message")))
                if kind_of_event in ("ADDED", "MODIFIED", "DELETED"):
                    mirror.apply(
                        kind.name,
                        str(kind_of_event),
                        {"apiVersion": kind.api_version, "kind": kind.kind, **obj},
                    )
                cursor.version = str((obj.get("metadata") or {}).get("resourceVersion", cursor.version))
                mirror.healthy(kind.name)  # an event or a BOOKMARK: the stream is current
    except aiohttp.SocketTimeoutError:  # silent for `silence_seconds`: routine for a quiet kind
        log.debug(
            "%s: watch silent for %.0fs; resuming on a new connection", kind.name, settings.silence_seconds
        )
    finally:
        mirror.disconnected(kind.name)
    return True


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    while True:
        line = await response.content.readline()
        if not line:
            return
        if line.strip():
            yield line
