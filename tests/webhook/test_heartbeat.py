"""A connected watch is only as current as the API server's last answer (a paused server keeps
every connection open and silent)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live import heartbeat
from webhook.live.holder import StateHolder
from webhook.live.mirror import Mirror

from .test_live import NAMES


def connected_mirror() -> Mirror:
    mirror = Mirror(StateHolder(), NAMES)
    for kind in mirror.watched:
        mirror.replace(kind, [])
        mirror.connected(kind)
    return mirror


def test_without_a_heartbeat_a_connected_watch_is_current_now() -> None:
    mirror = connected_mirror()
    fresh = mirror.freshness()
    assert fresh is not None and time.monotonic() - fresh < 0.05


def test_with_a_heartbeat_a_connected_watch_is_current_as_of_the_last_answer() -> None:
    mirror = connected_mirror()
    for kind in mirror.watched:
        mirror.synced[kind] -= 100.0  # nothing happened for 100 s
    mirror.alive(time.monotonic() - 40.0)  # and the API server last answered 40 s ago
    fresh = mirror.freshness()
    assert fresh is not None and 39.0 < time.monotonic() - fresh < 41.0
    mirror.healthy("nodes")  # an event proves its own watch current, not the others
    fresh = mirror.freshness()
    assert fresh is not None and 39.0 < time.monotonic() - fresh < 41.0
    mirror.alive(time.monotonic())
    fresh = mirror.freshness()
    assert fresh is not None and time.monotonic() - fresh < 0.05
    mirror.alive(time.monotonic() - 30.0)  # an older answer never moves it back
    fresh = mirror.freshness()
    assert fresh is not None and time.monotonic() - fresh < 0.05


def test_a_watch_that_breaks_later_was_current_only_until_the_last_answer() -> None:
    mirror = connected_mirror()
    for kind in mirror.watched:
        mirror.synced[kind] -= 100.0
    mirror.alive(time.monotonic() - 20.0)
    mirror.disconnected("pods")  # after minutes of a paused server, the read timeout fires
    assert 19.0 < time.monotonic() - mirror.synced["pods"] < 21.0


async def test_the_heartbeat_says_when_its_answered_question_was_sent(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    answers: list[Any] = [
        {},
        ApiException(status=429, reason="busy"),
        OSError("refused"),
        OSError("refused"),
        {},
    ]
    asked: list[str] = []
    done = asyncio.Event()

    async def call_json(api: Any, method: str, path: str, timeout: float = 10.0) -> Any:
        asked.append(path)
        if not answers:
            done.set()
            await asyncio.Event().wait()
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(heartbeat, "call_json", call_json)
    seen: list[float] = []

    class Sink:
        def alive(self, at: float) -> None:
            seen.append(at)

    with caplog.at_level(logging.INFO, "tasgate.live"):
        task = asyncio.create_task(heartbeat.beat_forever(None, Sink(), interval=0.01))  # type: ignore[arg-type]
        await asyncio.wait_for(done.wait(), 5)
        task.cancel()
    assert asked == [heartbeat.PROBE] * 6
    assert len(seen) == 3, "an answer and a 429 are answers; refused connections are not"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("does not answer" in m for m in messages) == 1, "logged once per outage"
    assert sum("answers again" in m for m in messages) == 1


def test_the_probe_comes_several_times_within_stale_after() -> None:
    """A quiet, healthy cluster must never read as stale: with probes every ``stale_after``
    seconds the state would be just past the limit before each answer (a CI flake at 5 s)."""
    assert heartbeat.interval_for(0.0) == heartbeat.INTERVAL  # a static state: the default
    assert heartbeat.interval_for(60.0) == heartbeat.INTERVAL
    assert heartbeat.interval_for(5.0) == 1.25
    assert heartbeat.interval_for(5.0) * 2 < 5.0  # one lost answer still leaves it fresh
