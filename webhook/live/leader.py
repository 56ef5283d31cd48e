"""Leader election on a ``coordination.k8s.io`` Lease: one replica writes, every replica serves.

Every replica answers reviews and watches (so a new leader starts warm); only the holder of the
Lease runs the writers (PodGroups, Events), so two replicas never write the same thing twice.
``lead`` campaigns forever with kubernetes-asyncio's ``LeaderElection``: while leading it runs
``work()`` and says so through ``on_change(True)``; when the Lease is lost it cancels ``work``
*before* ``on_change(False)``, then campaigns again (the library's ``run`` returns on a lost
Lease: this loops around it). ``work`` supervises itself (``Supervisor.run_all``: each writer
restarted by its own name); a work that ends anyway, raising or not, ends the term: the leader
steps down and campaigns again after the campaign's backoff, so a writer is never restarted by
two supervisors at once.

What the library does not, this does:

- An API error while reading the Lease is not always handled there: a connection error
  (``aiohttp.ClientError``), or a non-404 answer whose body is not JSON, propagates out of
  ``run``, and the task it started for the leader is then *not* cancelled. Here ``work`` runs
  in a task this module owns and cancels; the exception is logged and the campaign retried
  with capped exponential backoff (`live.backoff`).
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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection

from webhook.live.backoff import Backoff, Retry
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
        self,
        work: Callable[[], Coroutine[Any, Any, None]],
        on_change: Callable[[bool], None],
        standing: Standing,
    ) -> None:
        self.work, self.on_change, self.standing = work, on_change, standing
        self.task: asyncio.Task[None] | None = None
        self.held = False  # announced and not yet ended
        self.led = False  # held the Lease at some point of this term

    async def started(self) -> None:
        """The library's ``onstarted_leading``: start the work in a task of ours, and wait on it.
        The library cancelling this is then not the only way the work stops, and a failure of
        the work is not left in the library's task, which nobody reads: `end` stops the work
        and logs how it ended."""
        self.held = self.led = self.standing.leading = True
        log.info("elected leader of the Lease %s: writing PodGroups and Events", self.standing.where)
        _announce(self.on_change, True)
        self.task = asyncio.create_task(self.work(), name="leader-work")
        await asyncio.wait({self.task})

    def work_ended(self) -> bool:
        """The work stopped by itself (raised or returned) while this term leads."""
        return self.held and self.task is not None and self.task.done()

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
    work: Callable[[], Coroutine[Any, Any, None]],
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
    # Unjittered, as the library's own retries: one Lease, a handful of candidates, and a pause
    # after a term that is exactly the retry period (a follower's takeover is timed by it).
    retry = Retry(Backoff(campaign.retry_seconds, BACKOFF_MAX, jitter=0.0))
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
        failed = False
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
            failed = True
            _logged(exc, standing)
        work_ended = term.work_ended()
        delay = retry.failed() if failed or work_ended else campaign.retry_seconds
        if term.led and not work_ended:
            retry.reset()
        await term.end()
        await asyncio.sleep(delay)


async def _watched(election: asyncio.Task[None], term: _Term, lock: Lock, renew_seconds: float) -> None:
    """Wait for the library's ``run`` (it returns when a held Lease is lost, or raises); while
    leading, step down the moment the Lease has gone ``renew_seconds`` without a write, or the
    work has ended."""
    while True:
        done, _ = await asyncio.wait({election}, timeout=WATCHDOG_SECONDS)
        if done:
            election.result()
            return
        unrenewed = time.monotonic() - lock.renewed
        if term.held and unrenewed > renew_seconds:
            log.warning("the Lease went %.1fs unrenewed: stepping down", unrenewed)
        elif term.work_ended():
            log.warning("the leader's work ended while leading: stepping down, campaigning again")
        else:
            continue
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
