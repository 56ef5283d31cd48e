"""Leader election on a Lease, against an in-process fake Lease API (``fakeapi``).

Two candidates, kubernetes-asyncio's ``LeaderElection`` under ``leader.lead``: one leads; when it
stops renewing the other takes over, never while the first still writes; a leader that stops
cleanly hands over at once; API errors the library lets out do not end the campaign. The
library's periods are at least a second, so these take seconds.

The library keeps its own wall clock (``time.time``, ``asyncio.sleep``; nothing to inject), so
how soon a candidate acts is counted in its *looks at the Lease* (its lease GETs, which the fake
API tells apart by each client's User-Agent), never in seconds: a loaded machine stretches the
seconds, not the number of looks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from webhook.live.leader import Campaign, lead

from .fakeapi import FakeApi

QUICK = Campaign(lease_name="tasgate", lease_namespace="tasgate-system", lease_seconds=2, renew_seconds=1.5,
                 retry_seconds=1.0)  # fmt: skip
LEASES = "/apis/coordination.k8s.io/v1/namespaces/tasgate-system/leases"


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


class Candidates:
    """Candidates on one fake API; a timeline of who led and whose work ran."""

    def __init__(self, fake: FakeApi) -> None:
        self.fake = fake
        self.timeline: list[tuple[float, str, str]] = []
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.clients: list[Any] = []

    def start(self, name: str, campaign: Campaign = QUICK) -> None:
        api = self.fake.client()
        api.user_agent = name  # whose request it is, for `looks`
        self.clients.append(api)

        async def work() -> None:
            self.note(name, "work")
            try:
                await asyncio.Event().wait()
            finally:
                self.note(name, "work-stopped")

        def on_change(leading: bool) -> None:
            self.note(name, "leads" if leading else "follows")

        campaign = dataclasses.replace(campaign, identity=name)
        self.tasks[name] = asyncio.create_task(lead(api, campaign, work, on_change))

    def note(self, name: str, what: str) -> None:
        self.timeline.append((time.monotonic(), name, what))

    def at(self, name: str, what: str) -> float:
        return next(t for t, n, w in self.timeline if n == name and w == what)

    def saw(self, name: str, what: str) -> bool:
        return any(n == name and w == what for _, n, w in self.timeline)

    async def stop(self, name: str) -> None:
        task = self.tasks.pop(name)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        for name in list(self.tasks):
            await self.stop(name)
        for api in self.clients:
            await api.close()


@pytest.fixture
async def candidates(fake: FakeApi) -> AsyncIterator[Candidates]:
    found = Candidates(fake)
    yield found
    await found.close()


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def looks(fake: FakeApi, name: str, after: float = -math.inf, before: float = math.inf) -> list[float]:
    """When candidate ``name`` read the Lease (one read per attempt the library makes), between
    ``after`` and ``before`` (monotonic, as the fake API stamped the requests)."""
    return [t for t in fake.when("GET", "/leases/", agent=name) if after < t < before]


def holder(fake: FakeApi) -> str | None:
    lease = fake.get(f"{LEASES}/tasgate")
    return None if lease is None else lease["spec"].get("holderIdentity")


async def test_a_second_candidate_takes_over_when_the_first_stops_renewing(
    fake: FakeApi, candidates: Candidates
) -> None:
    """b has looked at a's Lease twice (its first attempt is over when its second starts) and
    left it. Once a's renewals fail, b takes the Lease after it expired, at most 3 looks past
    the expiry: the library counts ``lease_seconds`` from when b *saw* a's last renewal, which
    is less than one look (a retry period and a request) after it was written, so at most two
    looks still find it unexpired in b's eyes, and the next takes it."""
    candidates.start("a")
    await until(lambda: candidates.saw("a", "work"))
    candidates.start("b")
    await until(lambda: len(looks(fake, "b")) >= 2)
    assert not candidates.saw("b", "leads") and holder(fake) == "a"
    # a's renewals fail from now on (a partition between it and the API server)
    partitioned = time.monotonic()
    fake.fail("PUT", "/leases/", 500, times=10_000, when=lambda body: body["spec"]["holderIdentity"] == "a")
    await until(lambda: candidates.saw("b", "work"))
    assert holder(fake) == "b"
    assert candidates.at("a", "work-stopped") < candidates.at("a", "follows") < candidates.at("b", "leads")
    renewed = max(t for t in fake.when("PUT", "/leases/", agent="a") if t < partitioned)
    taken = fake.when("PUT", "/leases/", agent="b")[0]
    expired = renewed + QUICK.lease_seconds
    assert taken > expired, "never before a's Lease ran out"
    assert len(looks(fake, "b", after=expired, before=taken)) <= 3, "taken soon after it expired"


async def test_a_leader_that_stops_releases_and_a_follower_takes_over_at_once(
    fake: FakeApi, candidates: Candidates
) -> None:
    """b has seen a's Lease held (its first look is over when its second starts); a stops and
    gives the Lease back; b takes it at its first look after the release, not ``lease_seconds``
    (five looks) later."""
    slow = dataclasses.replace(QUICK, lease_seconds=5, renew_seconds=3)
    candidates.start("a", slow)
    await until(lambda: candidates.saw("a", "work"))
    candidates.start("b", slow)
    await until(lambda: len(looks(fake, "b")) >= 2)
    assert not candidates.saw("b", "leads")
    await candidates.stop("a")
    assert candidates.saw("a", "work-stopped") and candidates.saw("a", "follows")
    released = fake.when("PUT", "/leases/", agent="a")[-1]
    await until(lambda: candidates.saw("b", "leads"))
    taken = fake.when("PUT", "/leases/", agent="b")[0]
    assert len(looks(fake, "b", after=released, before=taken)) == 1, "not after lease_seconds"
    assert holder(fake) == "b"


async def test_api_errors_do_not_end_the_campaign(fake: FakeApi, candidates: Candidates,
                                                  caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    fake.fail("GET", "/leases/", 503, times=1, body=b"<html>busy</html>")  # not JSON: the library raises
    fake.fail("GET", "/leases/", 500, times=1)
    with caplog.at_level(logging.WARNING):
        candidates.start("a")
        await until(lambda: candidates.saw("a", "work"), timeout=15)
    assert holder(fake) == "a"
    assert any(r.name == "tasgate.leader" and "campaigning again" in r.getMessage() for r in caplog.records)


async def test_work_that_raises_is_restarted_while_leading(fake: FakeApi) -> None:
    runs: list[float] = []

    async def work() -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("writer bug")
        await asyncio.Event().wait()

    api = fake.client()
    task = asyncio.create_task(lead(api, dataclasses.replace(QUICK, identity="a"), work))
    try:
        await until(lambda: len(runs) == 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


def test_a_campaign_the_library_would_refuse_is_refused_up_front() -> None:
    for bad in (
        dataclasses.replace(QUICK, retry_seconds=0.5),
        dataclasses.replace(QUICK, renew_seconds=1.1),
        dataclasses.replace(QUICK, lease_seconds=1),
    ):
        with pytest.raises(ValueError):
            bad.check()
    Campaign().check()
