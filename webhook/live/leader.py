"""Leader election on a ``coordination.k8s.io`` Lease: one replica writes, every replica serves.

Every replica answers reviews and watches (so a new leader starts warm); only the holder of the
Lease runs the writers (PodGroups, Events), so two replicas never write the same thing twice.
``lead`` campaigns forever with kubernetes-asyncio's ``LeaderElection``: while leading it runs
``work()`` (restarted with backoff if it raises) and says so through ``on_change(True)``; when
the Lease is lost it cancels ``work`` *before* ``on_change(False)``, then campaigns again (the
library's ``run`` returns on a lost Lease: this loops around it).

What the library does not, this does:

- An API error while reading the Lease is not always handled there: a connection error
  (``aiohttp.ClientError``), or a non-404 answer whose body is not JSON, propagates out of
  ``run``, and the task it started for the leader is then *not* cancelled. Here ``work`` runs
  in a task this module owns and cancels; the exception is logged and the campaign retried
  with capped exponential backoff.
- Its ``Config`` needs whole ``lease_seconds`` (it writes ``int(str(x))``) and periods of at
  least a second; ``Campaign`` is checked at the start, a bad one raises ``ValueError`` (not
  retried: it would never work).
- It checks its renew deadline only between attempts that each sleep ``retry_seconds`` (and
  its requests have no timeout), so a leader cut off from the API server would write on for a
  retry period or more after a follower may take over. Here every Lease request is bounded
  (``renew_seconds / 2``) and a watchdog steps down (cancels the election and the work) as soon
  as the last successful write of the Lease is ``renew_seconds`` old.
- It logs each failed attempt, a failed create as an ERROR with a traceback every retry period,
  without the cause's fix. The lock here (``live.lease``) says each cause once (a missing
  ``--lease-namespace``, missing RBAC), and its recovery once; ``Standing`` holds it for
  ``/readyz`` and says whether this replica leads.
- It never gives the Lease back. A leader that stops cleanly (``lead`` cancelled) releases it
  as client-go does (empty holder, 1 s duration), so a follower takes over at its next try
  instead of after ``lease_seconds``.

A follower takes over ``lease_seconds`` after it last saw the Lease change; a leader that cannot
renew steps down ``renew_seconds`` after its last successful write was *sent* (< ``lease_seconds``),
so the two never write at once while clocks tick alike.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection

from webhook.live.lease import LeaseError, Lock, Standing, quiet_the_library

log = logging.getLogger("tasgate.leader")
BACKOFF_MAX = 30.0
RELEASE_SECONDS = 5.0
JITTER = 1.2  # the library's: renew_seconds must exceed retry_seconds by this factor
WATCHDOG_SECONDS = 0.1


@dataclass(frozen=True)
class Campaign:
    """The Lease and its timing (``serve.keys.Election`` holds one, with whether to elect at all)."""

    lease_name: str = "tasgate"
    lease_namespace: str = "tasgate-system"
    identity: str = ""  # empty: $POD_NAME, else the host name
    lease_seconds: float = 15.0
    renew_seconds: float = 10.0
    retry_seconds: float = 2.0

    def check(self) -> None:
        """What the library would refuse, said up front and in the flags' words."""
        if self.retry_seconds < 1:
            raise ValueError("the election's retry period must be at least 1s")
        if self.renew_seconds <= JITTER * self.retry_seconds:
            raise ValueError(f"the renew deadline must exceed {JITTER} x the retry period")
        if math.ceil(self.lease_seconds) <= self.renew_seconds:
            raise ValueError("the lease duration must exceed the renew deadline")


def identity_of(configured: str) -> str:
    """Who campaigns: the configured identity, else $POD_NAME, else the host name."""
    return configured or os.environ.get("POD_NAME") or socket.gethostname()


class _Term:
    """One campaign's leadership: the work task this module owns, and whether it was announced."""

    def __init__(
        self, work: Callable[[], Awaitable[None]], on_change: Callable[[bool], None], standing: Standing
    ) -> None:
        self.work, self.on_change, self.standing = work, on_change, standing
        self.task: asyncio.Task[None] | None = None
        self.held = False  # announced and not yet ended
        self.led = False  # held the Lease at some point of this term

    async def started(self) -> None:
        """The library's ``onstarted_leading``: start the work in a task of ours, and wait on it."""
        self.held = self.led = self.standing.leading = True
        log.info("elected leader of the Lease %s: writing PodGroups and Events", self.standing.where)
        _announce(self.on_change, True)
        self.task = asyncio.create_task(_supervised(self.work), name="leader-work")
        await asyncio.shield(self.task)  # the library cancelling this must not be the only stop

    async def stopped(self) -> None:
        """The library's ``onstopped_leading``; ``end`` does the work (it runs on every exit)."""

    async def end(self) -> None:
        """Cancel the work, wait for it to stop, then say so: no write outlives the leadership."""
        if self.task is not None:
            self.task.cancel()
            # Waits for the work without taking its cancellation for ours: a cancel aimed at
            # `lead` itself (shutdown) while it waits here still ends `lead`.
            await asyncio.wait({self.task})
            if not self.task.cancelled() and self.task.exception() is not None:
                log.error("the leader's work failed", exc_info=self.task.exception())
        if self.held:
            self.held = self.standing.leading = False
            log.info("no longer the leader of the Lease %s: writers stopped", self.standing.where)
            _announce(self.on_change, False)


async def lead(
    api: client.ApiClient,
    campaign: Campaign,
    work: Callable[[], Awaitable[None]],
    on_change: Callable[[bool], None] = lambda leading: None,
    standing: Standing | None = None,
) -> None:
    """Campaign forever; run ``work`` while leading. Cancel it to stop (the Lease is released).
    ``standing`` is told why the Lease cannot be taken (each cause logged once) and whether
    this replica leads."""
    campaign.check()
    quiet_the_library()
    standing = standing or Standing(campaign)
    identity = identity_of(campaign.identity)
    log.info("campaigning for the Lease %s as %s", standing.where, identity)
    backoff = campaign.retry_seconds
    while True:
        term, lock = _Term(work, on_change, standing), Lock(campaign, identity, api, standing)
        config = Config(
            lock,
            math.ceil(campaign.lease_seconds),
            campaign.renew_seconds,
            campaign.retry_seconds,
            term.started,
            term.stopped,
        )
        election = asyncio.create_task(LeaderElection(config).run(), name="leader-election")
        delay = campaign.retry_seconds
        try:
            await _watched(election, term, lock, campaign.renew_seconds)
        except asyncio.CancelledError:
            election.cancel()
            await asyncio.gather(election, return_exceptions=True)
            await term.end()
            if term.led:
                await _release(api, campaign, identity)
            raise
        except Exception as exc:  # the library lets some API errors out: never stop campaigning
            delay, backoff = backoff, min(backoff * 2, BACKOFF_MAX)
            _logged(exc, standing)
        if term.led:
            backoff = campaign.retry_seconds
        await term.end()
        await asyncio.sleep(delay)


async def _watched(election: asyncio.Task[None], term: _Term, lock: Lock, renew_seconds: float) -> None:
    """Wait for the library's ``run`` (it returns when a held Lease is lost, or raises); while
    leading, step down the moment the Lease has gone ``renew_seconds`` without a write."""
    while True:
        done, _ = await asyncio.wait({election}, timeout=WATCHDOG_SECONDS)
        if done:
            election.result()
            return
        unrenewed = time.monotonic() - lock.renewed
        if term.held and unrenewed > renew_seconds:
            log.warning("the Lease went %.1fs unrenewed: stepping down", unrenewed)
            election.cancel()
            await asyncio.gather(election, return_exceptions=True)
            return


async def _release(api: client.ApiClient, campaign: Campaign, identity: str) -> None:
    """Give the Lease back as client-go does, if it is still ours; best effort, bounded."""
    leases = client.CoordinationV1Api(api)
    try:
        async with asyncio.timeout(RELEASE_SECONDS):
            lease = await leases.read_namespaced_lease(campaign.lease_name, campaign.lease_namespace)
            if lease.spec is None or lease.spec.holder_identity != identity:
                return
            now = datetime.now(UTC)
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            lease.spec.acquire_time = lease.spec.renew_time = now
            await leases.replace_namespaced_lease(campaign.lease_name, campaign.lease_namespace, lease)
        log.info("released the Lease %s/%s", campaign.lease_namespace, campaign.lease_name)
    except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as exc:
        log.warning("could not release the Lease (followers wait it out): %s", _words(exc))


async def _supervised(work: Callable[[], Awaitable[None]]) -> None:
    """The leader's work, restarted with backoff when it raises; done when it returns."""
    backoff = 1.0
    while True:
        try:
            await work()
            return
        except Exception:
            log.exception("the leader's work failed; restarting it in %.0fs", backoff)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, BACKOFF_MAX)


def _announce(on_change: Callable[[bool], None], leading: bool) -> None:
    try:
        on_change(leading)
    except Exception:  # a listener's bug must not decide the leadership
        log.exception("on_change(%s) failed", leading)


def _logged(exc: Exception, standing: Standing) -> None:
    """An API failure is a cause, said once until it changes; anything else is a bug, with its traceback."""
    if isinstance(exc, LeaseError):
        standing.blocked(str(exc))
    elif isinstance(exc, ApiException | aiohttp.ClientError | OSError | TimeoutError):
        standing.blocked(f"cannot reach the Lease {standing.where}: {_words(exc)}")
    else:
        log.error("leader election failed; campaigning again", exc_info=exc)


def _words(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {str(exc.reason or '')[:200]}"
    return f"{type(exc).__name__}: {exc}"
