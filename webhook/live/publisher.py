"""When the writer publishes: after changes, debounced, and how far behind the published state is.

The Mirror (``live.mirror``) says what changed (``_changed``) and how to publish (``_publish``);
this part runs the publisher and keeps ``pending_since``, the first change not yet in a
published state, which freshness (``live.freshness``) holds the state's age back to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from webhook.live.freshness import Freshness


class Publisher(Freshness):
    """The debounced publish loop of one writer."""

    debounce: float

    def __init__(self, kinds: Iterable[str]) -> None:
        super().__init__(kinds)
        self.dirty = asyncio.Event()
        self.publishing = False
        self.changed_while_publishing: float | None = None

    def _changed(self) -> None:
        """A change the published state lacks. One made while a publish is under way may miss
        it, so it is remembered apart too, also when nothing was pending as that publish began:
        `publish_once` leaves exactly that pending."""
        now = time.monotonic()
        if self.pending_since is None:
            self.pending_since = now
        if self.publishing and self.changed_while_publishing is None:
            self.changed_while_publishing = now
        self.dirty.set()

    async def publish_forever(self) -> None:
        """Publish after changes (debounced)."""
        while True:
            await self.dirty.wait()
            if not self.ready:
                await asyncio.sleep(0.1)  # the first full sync is not complete yet
                continue
            await asyncio.sleep(self.debounce)
            self.dirty.clear()
            await self.publish_once()

    async def publish_once(self) -> None:
        """Rebuild (off the loop) if the structure changed, else publish the current usage.

        The published state counts as behind (``pending_since``) until a publish lands with every
        change made before it began: a rebuild in flight, one that failed (retried after
        `REBUILD_RETRY_SECONDS`) or a publish that raised leaves the oldest change pending.
        """
        self.publishing, self.changed_while_publishing = True, None
        caught_up = False
        try:
            caught_up = await self._publish()
        except BaseException:
            self.dirty.set()  # whoever runs the publisher next starts with this work
            raise
        finally:
            self.publishing = False
            if caught_up:  # what changed since this publish began is still pending
                self.pending_since = self.changed_while_publishing
            self.changed_while_publishing = None

    async def _publish(self) -> bool:
        """Publish what the writer holds; whether every change before this call is now in it."""
        raise NotImplementedError
