"""Events as they are posted: named alike on every replica, one kept, nothing stops the poster.

The recorders are the real ones, posting through real kubernetes-asyncio clients to an
in-process fake API server (``fakeapi``); a recorder whose ``_call`` raises stands in for a
connection that breaks mid-request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.events import EventRecorder, GangEvent, ObjectRef, event_name

from .fakeapi import FakeApi

EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"
REF = ObjectRef("batch/v1", "Job", "ns", "j", "u")


def occurrence(note: str = "2 of 4 pods running, pending 31s", since: str = "100.0") -> GangEvent:
    return GangEvent(REF, None, "PartialStart", "Track", note, episode=f"partial_start:{since}")


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


async def test_two_replicas_post_one_occurrence_under_one_name_and_one_is_kept(fake: FakeApi) -> None:
    results: list[str] = []
    apis = [fake.client(), fake.client()]
    first, second = (EventRecorder(api, results.append) for api in apis)
    await first.post(occurrence())
    await second.post(occurrence(note="2 of 4 pods running, pending 32s"))  # the same episode, seen later
    await asyncio.gather(*(api.close() for api in apis))
    assert results == ["posted", "exists"]
    (stored,) = fake.objects["apis/events.k8s.io/v1/events"].values()
    assert (
        stored["metadata"]["name"] == event_name(occurrence()) == first.body(occurrence())["metadata"]["name"]
    )
    assert stored["metadata"]["name"].startswith("j.") and stored["regarding"]["uid"] == "u"
    assert event_name(occurrence(since="900.0")) != event_name(occurrence()), "a new episode, a new Event"


class Breaking(EventRecorder):
    """The real poster with a request that fails as connections and bugs do, then succeeds."""

    def __init__(self, failures: list[BaseException], results: list[str]) -> None:
        super().__init__(None, results.append)  # type: ignore[arg-type]
        self.failures = failures
        self.sent: list[dict[str, Any]] = []

    async def _call(self, path: str, body: Any) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(body)


async def _until_results(results: list[str], count: int, timeout: float = 10.0) -> None:
    """Until ``count`` results are in, polled (a generous bound: the assertion after says what
    came if they never do)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(results) < count and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)


async def test_the_poster_survives_whatever_a_post_raises(caplog: pytest.LogCaptureFixture) -> None:
    results: list[str] = []
    recorder = Breaking([aiohttp.ServerDisconnectedError(), RuntimeError("a bug")], results)
    for note in ("one", "two", "three"):
        recorder.emit(occurrence(note=note, since=note))
    task = asyncio.create_task(recorder.run())
    with caplog.at_level(logging.WARNING, "tasgate.events"):
        await _until_results(results, 4)
    task.cancel()
    # A lost connection is retried; the bug on the retry is logged with its traceback and the
    # poster goes on with the next Event.
    assert results == ["retried", "failed", "posted", "posted"]
    assert [body["note"] for body in recorder.sent] == ["two", "three"]
    (bug,) = (r for r in caplog.records if r.name == "tasgate.events")
    assert bug.exc_info is not None and isinstance(bug.exc_info[1], RuntimeError), "logged with its traceback"


async def test_a_throttled_post_is_retried_after_retry_after_and_lands_once(fake: FakeApi) -> None:
    """A 429 from priority and fairness (with Retry-After) or a 503 is retried; a retry that
    finds its Event already there is a 409, so there is never a second one."""
    throttled = ApiException(status=429, reason="Too many requests")
    throttled.headers = {"Retry-After": "1"}
    results: list[str] = []
    recorder = Breaking([throttled, ApiException(status=503, reason="unavailable")], results)
    started = asyncio.get_running_loop().time()
    await recorder.post(occurrence())
    assert results == ["retried", "retried", "posted"] and len(recorder.sent) == 1
    assert asyncio.get_running_loop().time() - started >= 1.0, "Retry-After honoured"
    refused: list[str] = []
    await Breaking([ApiException(status=422, reason="invalid")], refused).post(occurrence())
    assert refused == ["failed"], "the request's own fault is not retried"


async def test_a_follower_holds_what_it_emits_and_posts_it_once_elected() -> None:
    results: list[str] = []
    recorder = Breaking([], results)
    recorder.lead(False)
    recorder.emit(occurrence())
    assert recorder.queue.empty() and len(recorder.held) == 1, "a follower posts nothing"
    recorder.lead(True)
    task = asyncio.create_task(recorder.run())
    await _until_results(results, 1)
    task.cancel()
    assert results == ["posted"] and not recorder.held
    assert recorder.sent[0]["metadata"]["name"] == event_name(occurrence())


async def test_held_events_expire() -> None:
    recorder = EventRecorder(None, hold_seconds=0.0, leading=False)  # type: ignore[arg-type]
    recorder.emit(occurrence())
    recorder.lead(True)
    assert recorder.queue.empty()
