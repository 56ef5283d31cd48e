"""A replica that cannot take the Lease says so once, with the cause and the fix, and keeps trying.

Without a leader no replica writes PodGroups or Events, while every replica still answers reviews
(answering needs no Lease) and stays ready. Nothing else would say why gangs lose their PodGroups:
so the cause is one log line per change (no library traceback every retry), a ``/readyz`` note
(still 200) and ``tasgate_leader`` 0, and the line names the flags that fix it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest

from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.live.leader import Campaign, lead
from webhook.live.lease import Standing
from webhook.serve.app import create_app
from webhook.serve.keys import Settings, StateSource
from webhook.serve.live_tasks import STANDING

from .fakeapi import FakeApi

QUICK = Campaign(lease_name="tasgate", lease_namespace="tasgate-system", lease_seconds=2, renew_seconds=1.5,
                 retry_seconds=1.0, identity="a")  # fmt: skip
NO_NAMESPACE = orjson.dumps({
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
    "message": 'namespaces "tasgate-system" not found',
    "details": {"name": "tasgate-system", "kind": "namespaces"},
})  # fmt: skip
FORBIDDEN = orjson.dumps({
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
    "message": 'leases.coordination.k8s.io "tasgate" is forbidden: User "x" cannot get resource "leases"',
    "details": {"name": "tasgate", "group": "coordination.k8s.io", "kind": "leases"},
})  # fmt: skip
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


async def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


class Campaigning:
    """One candidate on the fake API, with what it said and what it reports."""

    def __init__(self, fake: FakeApi) -> None:
        self.api = fake.client()
        self.standing = Standing(QUICK)
        self.changes: list[bool] = []

        async def work() -> None:
            await asyncio.Event().wait()

        self.task = asyncio.create_task(lead(self.api, QUICK, work, self.changes.append, self.standing))

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.api.close()


def said(caplog: pytest.LogCaptureFixture, level: int = logging.DEBUG) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= level]


async def test_a_missing_lease_namespace_is_one_line_naming_the_flags(
    fake: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail("POST", "/leases", 404, times=10_000, body=NO_NAMESPACE, headers=JSON)
    with caplog.at_level(logging.INFO):
        candidate = Campaigning(fake)
        try:
            await until(lambda: len(fake.posts("/leases")) >= 3)  # it keeps trying, quietly
            problem = candidate.standing.problem
        finally:
            await candidate.close()
    assert problem is not None and "--lease-namespace" in problem and "--no-leader-elect" in problem
    warned = said(caplog, logging.WARNING)
    assert [r.getMessage() for r in warned] == [f"not leading: {problem}; campaigning again until it can"], (
        "one line, however many tries"
    )
    assert all(r.exc_info is None for r in caplog.records), "no traceback"
    assert candidate.changes == [] and not candidate.standing.leading
    assert candidate.standing.detail() == f"not leading: {problem}"


async def test_forbidden_leases_name_the_role_then_recovery_is_said_once(
    fake: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    refused = fake.fail("GET", "/leases/", 403, times=10_000, body=FORBIDDEN, headers=JSON)
    with caplog.at_level(logging.INFO):
        candidate = Campaigning(fake)
        try:
            await until(lambda: len(fake.when("GET", "/leases/")) >= 3)
            assert candidate.standing.problem and "tasgate-leader-election" in candidate.standing.problem
            refused.times = 0  # RBAC fixed
            await until(lambda: candidate.changes == [True])
            assert candidate.standing.problem is None and candidate.standing.detail() is None
            assert candidate.standing.leading
        finally:
            await candidate.close()
    warned = [r.getMessage() for r in said(caplog, logging.WARNING)]
    assert len(warned) == 1 and "forbidden" in warned[0], warned
    recovered = [r.getMessage() for r in caplog.records if "can be taken again" in r.getMessage()]
    assert len(recovered) == 1
    assert all(r.exc_info is None for r in caplog.records)


async def test_a_follower_behind_a_live_leader_reports_no_problem(fake: FakeApi) -> None:
    """Asserted once the follower has looked at the held Lease (its first attempt is over when
    its second read comes; told apart from the leader's reads by its User-Agent)."""
    first = Campaigning(fake)
    await until(lambda: first.changes == [True])
    second_campaign = dataclasses.replace(QUICK, identity="b")
    api = fake.client()
    api.user_agent = "b"
    standing = Standing(second_campaign)
    task = asyncio.create_task(lead(api, second_campaign, asyncio.Event().wait, lambda _: None, standing))
    try:
        await until(lambda: len(fake.when("GET", "/leases/", agent="b")) >= 2)
        assert standing.problem is None and standing.detail() is None and not standing.leading
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        await first.close()


async def test_readyz_stays_200_and_says_why_this_replica_does_not_lead(aiohttp_client: Any) -> None:
    """Answering needs no Lease: the API server must keep sending reviews, and be told nothing
    else; the operator reading /readyz is told why nobody here writes."""
    app = create_app(Settings(policy=load_policy("default")), lambda _: None, StateSource(sample_objects()))
    standing = app[STANDING] = Standing(QUICK)
    client = await aiohttp_client(app)
    assert (await client.get("/readyz")).status == 200 and await (await client.get("/readyz")).text() == "ok"
    standing.blocked("cannot create the Lease tasgate-system/tasgate: namespace … does not exist")
    answer = await client.get("/readyz")
    assert answer.status == 200
    assert await answer.text() == (
        "ok; not leading: cannot create the Lease tasgate-system/tasgate: namespace … does not exist"
    )
