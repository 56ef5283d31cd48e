"""An in-process Kubernetes API server, faked at the HTTP level only (aiohttp.web).

What the writers' tests need of the real one: objects by path (GET, POST, PUT with
resourceVersion conflicts, DELETE), lists with label selectors (``k``, ``k=v``) and field
selectors (``path!=v``, ``path=v``), watches from a resourceVersion (an object that stops
matching a selector is DELETED to that watch, as the real watch cache does), 404/409 ``Status``
bodies, and scripted faults (``fail``: a status, headers and body for the next N matching
requests). Every request is kept in ``requests``, with when it came (``times``) and its
``User-Agent`` (``agents``: a test names each client by it to tell their requests apart). The
clients under test are the real kubernetes-asyncio ``ApiClient``s, pointed at ``url``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client


@dataclass
class Fault:
    method: str
    fragment: str
    status: int
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # a raw (non-Status) answer
    when: Callable[[Any], bool] | None = None  # of the request's JSON body


@dataclass(frozen=True)
class Change:
    version: int
    collection: str
    type: str
    obj: dict[str, Any]
    before: dict[str, Any] | None


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")


def _parse(path: str) -> tuple[str, str | None, str | None]:
    """(collection, namespace, name) of an API path."""
    parts = path.strip("/").split("/")
    cut = 2 if parts[0] == "api" else 3
    prefix, rest = parts[:cut], parts[cut:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return "/".join([*prefix, rest[0]]), namespace, (rest[1] if len(rest) > 1 else None)


def _field(obj: Mapping[str, Any], dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def matches(obj: Mapping[str, Any], labels: str, fields: str) -> bool:
    found = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, labels.split(",")):
        key, _, value = term.partition("=")
        if (key not in found) if not value else found.get(key) != value:
            return False
    for term in filter(None, fields.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field(obj, key) == value:
                return False
        else:
            key, _, value = term.partition("=")
            if _field(obj, key) != value:
                return False
    return True


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.history: list[Change] = []
        self.version = 0
        self.uids = itertools.count(1)
        self.requests: list[tuple[str, str]] = []
        self.times: list[float] = []  # monotonic, one per request
        self.agents: list[str] = []  # the User-Agent, one per request
        self.faults: list[Fault] = []
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.server: TestServer | None = None

    # -- the test's side --

    async def start(self) -> FakeApi:
        self.server = TestServer(self.app, shutdown_timeout=0.2)
        await self.server.start_server()
        return self

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    def client(self) -> client.ApiClient:
        assert self.server is not None
        configuration = client.Configuration(host=str(self.server.make_url("")).rstrip("/"))
        return client.ApiClient(configuration)

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object under its collection path (``/api/v1/namespaces/ns/pods``)."""
        collection, namespace, _ = _parse(path + "/x")
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", namespace)
        meta.setdefault("uid", f"uid-{next(self.uids)}")
        return self._store(collection, obj)

    def delete(self, path: str) -> None:
        collection, namespace, name = _parse(path)
        gone = self.objects.get(collection, {}).pop((namespace or "", name or ""), None)
        if gone is not None:
            self._change(collection, "DELETED", gone, None)

    def get(self, path: str) -> dict[str, Any] | None:
        collection, namespace, name = _parse(path)
        return self.objects.get(collection, {}).get((namespace or "", name or ""))

    def fail(
        self,
        method: str,
        fragment: str,
        status: int,
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        when: Callable[[Any], bool] | None = None,
    ) -> Fault:
        fault = Fault(method, fragment, status, times, headers or {}, body, when)
        self.faults.append(fault)
        return fault

    def posts(self, fragment: str) -> list[str]:
        return [p for m, p in self.requests if m == "POST" and fragment in p]

    def when(self, method: str, fragment: str, agent: str | None = None) -> list[float]:
        """When each matching request came (monotonic seconds); ``agent``: only those it sent."""
        return [
            t
            for (m, p), t, a in zip(self.requests, self.times, self.agents, strict=True)
            if m == method and fragment in p and (agent is None or a == agent)
        ]

    # -- the API server's side --

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        self.times.append(time.monotonic())
        self.agents.append(request.headers.get("User-Agent", ""))
        sent = orjson.loads(await request.read() or b"null")
        for fault in self.faults:
            if (
                fault.times > 0
                and fault.method == request.method
                and fault.fragment in request.path
                and (fault.when is None or fault.when(sent))
            ):
                fault.times -= 1
                if fault.body is not None:
                    return web.Response(status=fault.status, body=fault.body, headers=fault.headers)
                response = _status(fault.status, "Injected", f"injected {fault.status}")
                response.headers.update(fault.headers)
                return response
        collection, namespace, name = _parse(request.path)
        if request.method == "GET" and name is None:
            if request.query.get("watch", "").lower() in ("true", "1"):
                return await self._watch(request, collection, namespace)
            return self._list(request, collection, namespace)
        key = (namespace or "", name or "")
        stored = self.objects.setdefault(collection, {})
        if request.method == "GET":
            return self._json(stored[key]) if key in stored else _status(404, "NotFound", f"{name} not found")
        if request.method == "DELETE":
            self.delete(request.path)
            return self._json({"kind": "Status", "status": "Success"})
        body = sent
        body.setdefault("metadata", {})["namespace"] = namespace
        if request.method == "POST":
            key = (namespace or "", body["metadata"].get("name") or "")
            if key in stored:
                return _status(409, "AlreadyExists", f"{key[1]} already exists")
            body["metadata"]["uid"] = f"uid-{next(self.uids)}"
            return self._json(self._store(collection, body), 201)
        if key not in stored:
            return _status(404, "NotFound", f"{name} not found")
        version = body["metadata"].get("resourceVersion")
        if version and version != stored[key]["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified")
        return self._json(self._store(collection, body))

    def _store(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        before = self.objects.setdefault(collection, {}).get(key)
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        self.objects[collection][key] = obj
        self._change(collection, "MODIFIED" if before else "ADDED", obj, before)
        return obj

    def _change(self, collection: str, kind: str, obj: dict[str, Any], before: dict[str, Any] | None) -> None:
        if kind == "DELETED":
            self.version += 1
        self.history.append(Change(self.version, collection, kind, copy.deepcopy(obj), before))

    def _list(self, request: web.Request, collection: str, namespace: str | None) -> web.Response:
        labels, fields = request.query.get("labelSelector", ""), request.query.get("fieldSelector", "")
        items = [
            o for (ns, _), o in sorted(self.objects.get(collection, {}).items())
            if (namespace is None or ns == namespace) and matches(o, labels, fields)
        ]  # fmt: skip
        return self._json(
            {"kind": "List", "items": items, "metadata": {"resourceVersion": str(self.version)}}
        )

    async def _watch(
        self, request: web.Request, collection: str, namespace: str | None
    ) -> web.StreamResponse:
        labels, fields = request.query.get("labelSelector", ""), request.query.get("fieldSelector", "")
        since = int(request.query.get("resourceVersion") or self.version)
        deadline = asyncio.get_running_loop().time() + float(request.query.get("timeoutSeconds") or 30)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        while asyncio.get_running_loop().time() < deadline and not _gone(request):
            for change in [c for c in self.history if c.version > since and c.collection == collection]:
                since = change.version
                event = _seen(change, labels, fields)
                if event and (namespace is None or change.obj["metadata"].get("namespace") == namespace):
                    await response.write(orjson.dumps({"type": event, "object": change.obj}) + b"\n")
            await asyncio.sleep(0.01)
        return response

    @staticmethod
    def _json(body: Any, status: int = 200) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def _seen(change: Change, labels: str, fields: str) -> str | None:
    """What a selecting watch sees of a change: the event, DELETED when the object left it, or none."""
    now = change.type != "DELETED" and matches(change.obj, labels, fields)
    was = change.before is not None and matches(change.before, labels, fields)
    if change.type == "DELETED":
        return "DELETED" if matches(change.obj, labels, fields) else None
    if now:
        return "ADDED" if change.type == "ADDED" or not was else "MODIFIED"
    return "DELETED" if was else None
