"""A connected watch is only as current as the API server's last answer (a paused server keeps
every connection open and silent).

The freshness figures are read on a stopped clock (``Clock``, in place of the monotonic clock
``live.freshness`` reads): exact, where the wall clock would give them give or take however
long a loaded machine took between two lines."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live import freshness, heartbeat
from webhook.live.holder import StateHolder
from webhook.live.mirror import Mirror

from .test_live import NAMES


class Clock:
    """A monotonic clock that moves only when told (``now``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    stopped = Clock()
    monkeypatch.setattr(freshness, "time", stopped)
    return stopped


def connected_mirror() -> Mirror:
    mirror = Mirror(StateHolder(), NAMES)
    for kind in mirror.watched:
        mirror.replace(kind, [])
        mirror.connected(kind)
    return mirror


def test_without_a_heartbeat_a_connected_watch_is_current_now(clock: Clock) -> None:
    mirror = connected_mirror()
    clock.now += 100.0  # nothing happened for 100 s
    assert mirror.freshness() == clock.now


def test_with_a_heartbeat_a_connected_watch_is_current_as_of_the_last_answer(clock: Clock) -> None:
    mirror = connected_mirror()
    clock.now += 100.0  # nothing happened for 100 s
    mirror.alive(clock.now - 40.0)  # and the API server last answered 40 s ago
    assert mirror.freshness() == clock.now - 40.0
    mirror.healthy("nodes")  # an event proves its own watch current, not the others
    assert mirror.freshness() == clock.now - 40.0
    mirror.alive(clock.now)
    assert mirror.freshness() == clock.now
    mirror.alive(clock.now - 30.0)  # an older answer never moves it back
    assert mirror.freshness() == clock.now


def test_a_watch_that_breaks_later_was_current_only_until_the_last_answer(clock: Clock) -> None:
    mirror = connected_mirror()
    clock.now += 100.0
    mirror.alive(clock.now - 20.0)
    mirror.disconnected("pods")  # after minutes of a paused server, the read timeout fires
    assert mirror.synced["pods"] == clock.now - 20.0


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
