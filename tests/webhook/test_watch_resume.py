"""A broken watch resumes from the last resourceVersion it applied; only 410 Gone re-lists."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import orjson
import pytest

from webhook.live.kinds import Kind
from webhook.live.watch import Collected, WatchSettings, run_kind

from .test_live import FakeResponse, event, node


class BrokenStream:
    """A watch stream that delivers ``lines`` and then drops the connection."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = list(lines)

    async def readline(self) -> bytes:
        if self.lines:
            return self.lines.pop(0)
        raise aiohttp.ClientPayloadError("connection reset by peer")


class Recorder:
    """A watch Sink that remembers what reached it."""

    def __init__(self) -> None:
        self.lists = 0
        self.applied: list[str] = []

    def listing(self, kind: str) -> Collected:
        return Collected(kind)

    def commit(self, pages: Any) -> None:
        self.lists += 1

    def apply(self, kind: str, event: str, obj: Any) -> None:
        self.applied.append(obj["metadata"]["name"])

    def mark_absent(self, kind: str) -> None: ...
    def healthy(self, kind: str) -> None: ...
    def connected(self, kind: str) -> None: ...
    def disconnected(self, kind: str) -> None: ...


class ListResponse:
    status = 200

    def __init__(self, version: str) -> None:
        self.body = orjson.dumps({"items": [], "metadata": {"resourceVersion": version}})

    async def read(self) -> bytes:
        return self.body


async def run_scripted(script: list[Any]) -> tuple[Recorder, list[dict[str, Any]]]:
    """run_kind against a lister answering from ``script`` (one entry per call); the calls made."""
    calls: list[dict[str, Any]] = []
    done = asyncio.Event()

    async def lister(**kw: Any) -> Any:
        calls.append(kw)
        if not script:
            done.set()
            await asyncio.Event().wait()
        return script.pop(0)

    recorder = Recorder()
    kind = Kind("nodes", "v1", "Node", lambda api: lister)
    settings = WatchSettings(backoff_max=0.01)
    task = asyncio.create_task(run_kind(None, kind, recorder, settings))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(asyncio.shield(done.wait()), 5)
    finally:
        task.cancel()
    assert not task.done() or task.cancelled(), task.exception()
    return recorder, calls


async def test_a_dropped_watch_resumes_from_the_last_applied_version_without_a_relist() -> None:
    broken = FakeResponse([])
    broken.content = BrokenStream(
        [event("ADDED", node("a", version="11")), event("ADDED", node("b", version="12"))]
    )  # type: ignore[assignment]
    recorder, calls = await run_scripted([ListResponse("10"), broken, FakeResponse([])])
    assert recorder.lists == 1, "a dropped connection is no reason to re-list"
    assert recorder.applied == ["a", "b"]
    watches = [c for c in calls if c.get("watch")]
    assert [c["resource_version"] for c in watches] == ["10", "12", "12"]


async def test_410_gone_relists() -> None:
    gone = FakeResponse(
        [orjson.dumps({"type": "ERROR", "object": {"code": 410, "message": "too old"}}) + b"\n"]
    )
    recorder, calls = await run_scripted([ListResponse("10"), gone, ListResponse("20"), FakeResponse([])])
    assert recorder.lists == 2
    assert [c.get("resource_version") for c in calls if c.get("watch")] == ["10", "20", "20"]


class SilentStream:
    """A watch stream that delivers ``lines`` and then says nothing until the client's read timeout."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = list(lines)

    async def readline(self) -> bytes:
        if self.lines:
            return self.lines.pop(0)
        raise aiohttp.SocketTimeoutError("Timeout on reading data from socket")


async def test_a_silent_watch_is_resumed_at_once_and_quietly(caplog: pytest.LogCaptureFixture) -> None:
    silent = FakeResponse([])
    silent.content = SilentStream([event("ADDED", node("a", version="11"))])  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, "tasgate.live"):
        recorder, calls = await run_scripted([ListResponse("10"), silent, FakeResponse([])])
    assert recorder.lists == 1 and recorder.applied == ["a"]
    assert [c["resource_version"] for c in calls if c.get("watch")] == ["10", "11", "11"]
    assert not [r for r in caplog.records if r.levelno >= logging.INFO], "routine: no log line"
