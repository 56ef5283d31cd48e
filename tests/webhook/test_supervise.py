"""Nothing fails silently: supervised tasks, answers after an exception, an audit log that never blocks."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import handlers
from webhook.serve.app import create_app, create_metrics_app
from webhook.serve.audit import AuditLog
from webhook.serve.keys import SUPERVISOR, Settings, StateSource
from webhook.serve.supervise import Supervisor

from .test_server import manifest, review


async def _until(predicate: Any, limit: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_a_failing_task_is_logged_counted_and_restarted(caplog: pytest.LogCaptureFixture) -> None:
    restarted: list[str] = []
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise ConnectionResetError("the API server went away")
        await asyncio.Event().wait()

    supervisor = Supervisor(restarted.append, backoff_initial=0.01, backoff_max=0.02)
    with caplog.at_level(logging.ERROR, "tasgate.supervise"):
        supervisor.spawn("watch-nodes", flaky)
        await _until(lambda: runs == 3)
    await supervisor.stop()
    assert restarted == ["watch-nodes", "watch-nodes"]
    failures = [r for r in caplog.records if "watch-nodes failed" in r.getMessage()]
    assert len(failures) == 2 and all(r.exc_info for r in failures)  # once each, with its traceback
    assert supervisor.problems() == []  # two in a row is below failing_after=3


async def test_a_task_that_keeps_failing_is_named_and_one_that_returns_is_a_failure() -> None:
    async def broken() -> None:
        raise ValueError("bad page")

    async def returns() -> None:
        return None

    supervisor = Supervisor(backoff_initial=0.001, backoff_max=0.002)
    supervisor.spawn("publish", broken)
    supervisor.spawn("track", returns)
    await _until(lambda: len(supervisor.problems()) == 2)
    publish, track = supervisor.problems()
    await supervisor.stop()
    assert publish.startswith("task publish keeps failing") and "ValueError: bad page" in publish
    assert track.startswith("task track keeps failing") and "returned" in track


async def test_a_task_that_recovered_is_no_longer_named_and_a_stopped_one_never() -> None:
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs <= 3:
            raise ValueError("poison object")
        await asyncio.Event().wait()

    supervisor = Supervisor(backoff_initial=0.001, backoff_max=0.002, stable_after=0.2)
    supervisor.spawn("watch-pods", flaky)
    await _until(lambda: runs == 4)
    assert supervisor.problems(), "just recovered: not yet stable"
    await asyncio.sleep(0.25)
    assert supervisor.problems() == [], "it has run stable_after seconds since"

    async def broken() -> None:
        raise ValueError("x")

    supervisor.spawn("writers", broken)
    await _until(
        lambda: "writers" in supervisor.health and supervisor.health["writers"].failures_in_a_row >= 3
    )
    await supervisor.stop()  # a stopped task (a lost leadership, shutdown) is not failing
    assert supervisor.problems() == []


async def test_backoff_is_capped_and_grows() -> None:
    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        if seconds >= 0.5:  # the supervisor's backoff, not this test's polling
            sleeps.append(seconds)
        await real_sleep(0)

    async def broken() -> None:
        raise RuntimeError("x")

    supervisor = Supervisor(backoff_initial=1.0, backoff_max=4.0)
    asyncio_sleep, asyncio.sleep = asyncio.sleep, fake_sleep  # type: ignore[assignment]
    try:
        supervisor.spawn("t", broken)
        await _until(lambda: len(sleeps) >= 6)
    finally:
        asyncio.sleep = asyncio_sleep
    await supervisor.stop()
    assert 0.8 <= sleeps[0] <= 1.2 and 1.6 <= sleeps[1] <= 2.4
    assert all(s <= 4.0 * 1.2 for s in sleeps) and max(sleeps) >= 3.2


async def test_injected_fault_takes_the_failure_path_and_the_task_comes_back() -> None:
    started = 0

    async def watch() -> None:
        nonlocal started
        started += 1
        await asyncio.Event().wait()

    restarted: list[str] = []
    supervisor = Supervisor(restarted.append, backoff_initial=0.001, fault_hook=True)
    supervisor.spawn("watch-pods", watch)
    await _until(lambda: started == 1)
    assert supervisor.inject("watch-pods") and not supervisor.inject("no-such-task")
    await _until(lambda: started == 2)
    await supervisor.stop()
    assert restarted == ["watch-pods"]
    assert "InjectedFaultError" in supervisor.health["watch-pods"].last_error
    assert not Supervisor().inject("watch-pods")  # off unless the hook is on


async def test_fault_hook_route_and_readyz_name_the_task(aiohttp_client: Any) -> None:
    settings = Settings(policy=load_policy("default"), fault_hook=True)
    app = create_app(settings, lambda record: None, StateSource(objects=sample_objects()))
    side = await aiohttp_client(create_metrics_app(app))
    main = await aiohttp_client(app)  # starts the app's contexts (its supervisor)
    supervisor = app[SUPERVISOR]
    supervisor.backoff_initial = supervisor.backoff_max = 0.001

    async def idle() -> None:
        await asyncio.Event().wait()

    supervisor.spawn("idle", idle)
    await asyncio.sleep(0)
    for _ in range(3):
        response = await side.post("/debug/raise/idle")
        assert response.status == 200, await response.text()
        await _until(lambda: "idle" in supervisor._faults and not supervisor._faults["idle"].is_set())
    ready = await main.get("/readyz")
    assert ready.status == 503 and "task idle keeps failing" in await ready.text()
    assert (await side.post("/debug/raise/nothing")).status == 404
    metrics = await (await side.get("/metrics")).text()
    assert 'tasgate_task_restarts_total{task="idle"} 3.0' in metrics


async def test_no_fault_route_without_the_hook(aiohttp_client: Any) -> None:
    app = create_app(
        Settings(policy=load_policy("default")), lambda r: None, StateSource(objects=sample_objects())
    )
    side = await aiohttp_client(create_metrics_app(app))
    assert (await side.post("/debug/raise/publish")).status in (404, 405)


@pytest.mark.parametrize(("on_timeout", "allowed"), [("allow", True), ("deny", False)])
async def test_an_exception_after_parsing_is_an_admission_review_per_on_timeout(
    aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch, on_timeout: str, allowed: bool
) -> None:
    def broken_record(*args: Any) -> None:
        raise KeyError("metrics label")

    monkeypatch.setattr(handlers, "_record", broken_record)
    settings = Settings(policy=load_policy("default"), on_timeout=on_timeout)
    client = await aiohttp_client(create_app(settings, lambda r: None, StateSource(objects=sample_objects())))
    body = review(manifest("job-rack.yaml"), uid="uid-err")
    response = await client.post("/validate", data=orjson.dumps(body))
    assert response.status == 200
    answer = (await response.json())["response"]
    assert answer["uid"] == "uid-err" and answer["allowed"] is allowed
    if allowed:
        assert any("did not check" in w for w in answer["warnings"])
    else:
        assert answer["status"]["code"] == 503 and "tasgate could not decide" in answer["status"]["message"]


async def test_an_exception_before_parsing_is_a_json_500(
    aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_parse(raw: bytes) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(handlers, "parse_review", broken_parse)
    client = await aiohttp_client(
        create_app(
            Settings(policy=load_policy("default")), lambda r: None, StateSource(objects=sample_objects())
        )
    )
    response = await client.post("/mutate", data=b"{}")
    assert response.status == 500 and "see its log" in (await response.json())["error"]


class _BlockedStream(io.StringIO):
    """A log pipe nobody reads: every write blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def write(self, text: str) -> int:
        self.release.wait(10)
        return super().write(text)


def test_audit_log_never_blocks_and_counts_what_it_drops() -> None:
    stream = _BlockedStream()
    dropped: list[int] = []
    audit = AuditLog(stream, limit=10, on_drop=lambda: dropped.append(1))
    for i in range(100):  # the writer is stuck on the first batch: the queue fills, the rest drop
        audit({"n": i})
    assert audit.dropped == len(dropped) >= 80
    stream.release.set()
    audit.close()
    lines = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 100 - audit.dropped and lines[0] == {"n": 0}
    assert [line["n"] for line in lines] == sorted(line["n"] for line in lines)


def test_audit_log_writes_every_line_when_the_stream_keeps_up() -> None:
    stream = io.StringIO()
    audit = AuditLog(stream)
    for i in range(2000):
        audit({"n": i})
    audit.close()
    assert [orjson.loads(line)["n"] for line in stream.getvalue().splitlines()] == list(range(2000))
    assert audit.dropped == 0


async def test_a_blocked_audit_stream_does_not_stall_reviews() -> None:
    stream = _BlockedStream()
    audit = AuditLog(stream, limit=5)
    app = create_app(Settings(policy=load_policy("default")), audit, StateSource(objects=sample_objects()))
    async with TestClient(TestServer(app)) as client:
        for i in range(20):
            body = review(manifest("job-rack.yaml"), uid=f"u{i}")
            response = await asyncio.wait_for(client.post("/validate", data=orjson.dumps(body)), 5)
            assert response.status == 200
        metrics_app = create_metrics_app(app)
        async with TestClient(TestServer(metrics_app)) as side:
            text = await (await side.get("/metrics")).text()
        assert "tasgate_audit_lines_dropped_total" in text and audit.dropped >= 10
        stream.release.set()
    assert isinstance(app, web.Application)


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_audit_log_writes_a_lone_record_at_once_and_batches_under_load() -> None:
    """After a quiet spell a line is written as its record arrives (a reader looking for it as
    the answer arrives finds it); under a flood the writer starts a batch at most once per
    ``spacing``, not once per record."""
    stream = _CountingStream()
    audit = AuditLog(stream, spacing=1.0)
    audit({"n": "alone"})
    deadline = time.monotonic() + 0.5  # well inside the spacing: only an immediate write lands
    while '"alone"' not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert '"alone"' in stream.getvalue()
    started = time.monotonic()
    for i in range(200):  # a flood over 0.2 s or more: a batch or two, never one per record
        audit({"n": i})
        time.sleep(0.001)
    audit.close()
    batches_allowed = 2 + (time.monotonic() - started) / 1.0  # the lone one, the last at close
    assert 1 < stream.writes <= batches_allowed + 1
    assert [orjson.loads(line)["n"] for line in stream.getvalue().splitlines()[1:]] == list(range(200))
