"""The leader's work is supervised once: by the app's `Supervisor` (``run_all``, each writer by its
own name), never restarted again by the election; a work that ends anyway ends the term.

Against the in-process fake Lease API (``fakeapi``), with the library's shortest periods (a second).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from webhook.live.leader import Campaign, lead
from webhook.serve.supervise import Supervisor

from .fakeapi import FakeApi

QUICK = Campaign(lease_name="tasgate", lease_namespace="tasgate-system", lease_seconds=2, renew_seconds=1.5,
                 retry_seconds=1.0, identity="a")  # fmt: skip


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_failing_writer_is_restarted_by_the_supervisor_alone_and_the_term_goes_on(
    fake: FakeApi,
) -> None:
    runs: list[float] = []
    restarts: list[str] = []
    changes: list[bool] = []

    async def podgroups() -> None:
        runs.append(time.monotonic())
        if len(runs) <= 2:
            raise RuntimeError("writer bug")
        await asyncio.Event().wait()

    async def events() -> None:
        await asyncio.Event().wait()

    supervisor = Supervisor(restarts.append, backoff_initial=0.01, backoff_max=0.02)
    work = lambda: supervisor.run_all({"podgroups": podgroups, "events": events})  # noqa: E731
    api = fake.client()
    task = asyncio.create_task(lead(api, QUICK, work, changes.append))
    try:
        await until(lambda: len(runs) == 3)
        await asyncio.sleep(0.3)  # long enough for a step-down to show in on_change
        assert restarts == ["podgroups", "podgroups"], "one restart per failure, by the writer's name"
        assert changes == [True], "the term never ended"
        assert supervisor.health["podgroups"].restarts == 2 and supervisor.health["events"].restarts == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    assert changes == [True, False]


async def test_a_work_that_returns_ends_the_term_and_the_campaign_goes_on(fake: FakeApi) -> None:
    runs: list[float] = []
    changes: list[bool] = []

    async def work() -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            return
        await asyncio.Event().wait()

    api = fake.client()
    task = asyncio.create_task(lead(api, QUICK, work, changes.append))
    try:
        await until(lambda: len(runs) == 2)
        assert changes == [True, False, True], "stepped down, elected again"
        assert runs[1] - runs[0] >= QUICK.retry_seconds, "after the campaign's backoff"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
