"""`live.backoff`: the one retry policy of the supervisor, the watches, the leader's campaign, the
PodGroup writer and the Event poster."""

from __future__ import annotations

import time

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.backoff import Backoff, Retry


def _throttled(retry_after: str) -> ApiException:
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.headers = {"Retry-After": retry_after}
    return exc


def test_steps_double_from_initial_to_the_cap() -> None:
    policy = Backoff(0.5, 8.0)
    assert [policy.step(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.step(0) == 0.5 and policy.step(10_000) == 8.0  # no overflow, however long it fails


def test_each_pause_is_jittered_around_its_step_and_exact_without_jitter() -> None:
    policy = Backoff(1.0, 30.0)
    pauses = [policy.pause(2) for _ in range(200)]
    assert all(1.6 <= p <= 2.4 for p in pauses) and len(set(pauses)) > 100
    assert {Backoff(1.0, 30.0, jitter=0.0).pause(3) for _ in range(20)} == {4.0}


def test_retry_after_is_the_pause_capped_and_zero_is_ignored() -> None:
    policy = Backoff(0.5, 8.0, jitter=0.0)
    assert policy.pause(1, _throttled("3")) == 3.0  # exact: no jitter below what the server asked
    assert policy.pause(1, _throttled("120")) == 8.0  # capped at the policy's cap
    assert Backoff(0.5, 8.0, retry_after_cap=30.0).pause(1, _throttled("120")) == 30.0
    assert policy.pause(4, _throttled("0")) == 4.0  # "now" would be a hot loop: the step instead
    assert policy.pause(2, ConnectionResetError()) == 1.0  # no headers: the step


def test_a_loop_counts_failures_in_a_row_and_starts_over_on_reset() -> None:
    retry = Retry(Backoff(1.0, 10.0, jitter=0.0))
    assert [retry.failed() for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert retry.failures == 5
    retry.reset()
    assert retry.failed() == 1.0


def test_a_loops_retry_after_is_its_pause_and_the_step_it_doubles_from() -> None:
    """An API server back from an outage says "storage is initializing, retry after 1 s": the
    step the outage grew to is over, the next failure without one waits 2 s."""
    retry = Retry(Backoff(0.5, 8.0, jitter=0.0))
    assert [retry.failed(ConnectionRefusedError()) for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert retry.failed(_throttled("1")) == 1.0
    assert retry.failed(ConnectionResetError()) == 2.0
    assert retry.failures == 7


def test_an_attempt_that_ran_stable_after_seconds_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    retry = Retry(Backoff(1.0, 30.0, jitter=0.0), stable_after=60.0)
    for _ in range(3):
        retry.attempt()
        now[0] += 1
        retry.failed()
    assert retry.failures == 3
    retry.attempt()
    now[0] += 59
    assert retry.failed() == 8.0  # 59 s is not stable: the fourth failure in a row
    retry.attempt()
    now[0] += 60
    assert retry.failed() == 1.0 and retry.failures == 1  # ran a minute: a fresh failure
    assert retry.failed() == 2.0  # no attempt recorded since: counted on
