"""How long to wait before trying again: one policy for every loop that retries.

The supervisor's restarts, each watch, the leader's campaign, the PodGroup writer's keys and the
Event poster all retry something that failed, and each needs the same few things: a pause that
doubles up to a cap, so a dead API server is not hammered and a live one is found again soon;
jitter, so replicas (or a hundred watches) that failed together do not retry together; the
server's own ``Retry-After`` (API Priority and Fairness, a restarting API server) taken as the
pause when it sends one; and starting over once things work again. `Backoff` is that policy
(pure: a pause per count of failures in a row, for work kept per key, as the PodGroup writer's
queue), `Retry` one loop's failures under it.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from webhook.live.api import retry_after

# Past this many doublings the step is the cap whatever the numbers: no float overflow.
_MAX_DOUBLINGS = 64


@dataclass(frozen=True)
class Backoff:
    """``initial`` seconds after the first failure, doubling after each further one up to ``cap``;
    each pause drawn from ``1 ± jitter`` times its step (0: exact). A ``Retry-After`` on the
    failure replaces the pause, up to ``retry_after_cap`` (``cap`` when None), unjittered: the
    server knows when it can answer, and jitter would retry before it asked."""

    initial: float
    cap: float
    jitter: float = 0.2
    retry_after_cap: float | None = None

    def step(self, failures: int) -> float:
        """The pause, before jitter, after ``failures`` failures in a row (1: ``initial``)."""
        doublings = min(max(failures, 1) - 1, _MAX_DOUBLINGS)
        return min(self.cap, self.initial * 2.0**doublings)

    def pause(self, failures: int, failure: BaseException | None = None) -> float:
        """Seconds to wait after ``failures`` failures in a row, the last being ``failure``."""
        return self.asked(failure) or self.jittered(self.step(failures))

    def asked(self, failure: BaseException | None) -> float | None:
        """The pause ``failure``'s ``Retry-After`` asks for, capped; None without one. ``0`` is
        taken for none: a retry at once would be a hot loop."""
        cap = self.cap if self.retry_after_cap is None else self.retry_after_cap
        return (retry_after(failure, cap) or None) if failure is not None else None

    def jittered(self, step: float) -> float:
        """``step`` spread by ``jitter``: loops that failed together retry apart."""
        return step * (1.0 - self.jitter + 2.0 * self.jitter * random.random())


class Retry:
    """One loop's failures in a row under ``policy``: each pause doubles the last one's step.

    Started over by `reset` (the call that failed now works: a watch got its stream), or by an
    attempt that ran ``stable_after`` seconds before it failed (a supervised task that ran a
    minute failed afresh, not for the fourth time). A ``Retry-After`` is the pause and the step
    the doubling goes on from: an API server answering "storage is initializing, retry after
    1 s" is nearly up, whatever the step its outage had grown to."""

    def __init__(self, policy: Backoff, stable_after: float = math.inf) -> None:
        self.policy, self.stable_after = policy, stable_after
        self.failures = 0
        self._step = policy.initial  # the next pause's, before jitter
        self._since: float | None = None  # when the current attempt began (`attempt`)

    def attempt(self) -> None:
        """An attempt begins now: how long it runs decides whether its failure starts over."""
        self._since = time.monotonic()

    def reset(self) -> None:
        self.failures, self._step = 0, self.policy.initial

    def failed(self, failure: BaseException | None = None) -> float:
        """Count a failure; the seconds to wait before the next attempt."""
        if self._since is not None and time.monotonic() - self._since >= self.stable_after:
            self.reset()
        self._since = None
        self.failures += 1
        asked = self.policy.asked(failure)
        step = asked or self._step
        self._step = min(self.policy.cap, step * 2.0)
        return asked or self.policy.jittered(step)
