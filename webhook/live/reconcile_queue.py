"""A deduplicating work queue with delayed retries, as client-go's workqueue.

A key is at most once in the queue, and never handed to two workers at once: added while it is
being handled, it is queued again when that finishes. A key waiting out a backoff
(``add_after``) ignores ``add`` until its timer fires, so a busy watch cannot cut short a
``Retry-After``. The queue holds keys, never the work itself: what a key means is read afresh
from the watches when it is handled, so losing the queue (a restart) loses nothing.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

K = TypeVar("K")


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        if key in self._timers:
            return  # backing off: the timer adds it
        if key in self._active:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add once ``delay`` seconds have passed (a later call replaces the earlier timer)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._again.discard(key)
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._fire, key)

    def waiting(self, key: K) -> bool:
        """Whether the key is queued, being handled, or backing off."""
        return key in self._queued or key in self._active or key in self._timers

    async def get(self) -> K:
        key = await self._ready.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def close(self) -> None:
        """Cancel every pending retry (the queue is dropped with its writer)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._queued) + len(self._active) + len(self._timers)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)
