"""How current the watched kinds are: what the published state's age is measured from.

Freshness means "the watches are connected and current": a kind whose watch is open counts as
fresh however quiet the cluster is (``connected``); every list, event and BOOKMARK refreshes it
(``healthy``); only a kind whose watch is down ages, from the last moment it was known good.
The published state's freshness (``confirmed_at``, what /readyz and reviews read) is that, held
back to the first change the publisher has not yet published.

Once the heartbeat runs (``live.heartbeat``), an open watch is current only up to the API
server's last answer: a paused or partitioned server keeps every watch open and silent.
"""

from __future__ import annotations

import time
from collections.abc import Iterable


class Freshness:
    """Per watched kind: when it was last known current, and whether its watch is open."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.watched = frozenset(kinds)
        self.synced: dict[str, float] = {}  # kind -> monotonic time it was last known current
        self.open: dict[str, float] = {}  # kind -> monotonic time its watch (re)connected
        self.alive_at: float | None = None  # when the API server last answered (None: no heartbeat)
        self.pending_since: float | None = None  # the first change not yet in a published state

    def healthy(self, kind: str) -> None:
        """``kind`` is current now: a list finished, an event or a bookmark arrived."""
        self.synced[kind] = time.monotonic()

    def connected(self, kind: str) -> None:
        """The watch of ``kind`` is open (or its absence confirmed): fresh while it stays so."""
        self.open[kind] = time.monotonic()
        self.healthy(kind)

    def disconnected(self, kind: str) -> None:
        """The watch of ``kind`` ended or failed: from now on it ages from its last good moment."""
        if self.open.pop(kind, None) is not None:
            # It was current until now, or until the API server last answered (``alive``).
            self.synced[kind] = max(self.synced.get(kind, 0.0), self._current())

    def alive(self, at: float) -> None:
        """The API server answered a request sent at ``at`` (``live.heartbeat``).

        A watch connection stays open and silent when its API server is paused or cut off
        behind a proxy, so "connected" alone proves nothing: once a heartbeat runs, an open
        watch is current only up to the API server's last answer.
        """
        self.alive_at = at if self.alive_at is None else max(self.alive_at, at)

    def _current(self) -> float:
        """The latest moment an open watch is known current."""
        return time.monotonic() if self.alive_at is None else self.alive_at

    @property
    def ready(self) -> bool:
        return all(k in self.synced for k in self.watched)

    def freshness(self) -> float | None:
        """When the stalest watched kind was last known current (None before the first sync).

        A kind whose watch is connected is current as of the API server's last answer (now,
        without a heartbeat) or its last event; a disconnected one since its last list, event or
        bookmark.
        """
        if not self.ready:
            return None
        current = self._current()
        return min(max(current, self.synced[k]) if k in self.open else self.synced[k] for k in self.watched)

    def confirmed_at(self) -> float | None:
        """When the published state last matched the cluster (monotonic; None before the first sync).

        The watches' freshness, held back to the first change not yet published: computed when
        asked (by /readyz, a review, a scrape), so no loop's timing can make a current state look
        old, nor a publisher that fell behind make an old one look current.
        """
        fresh = self.freshness()
        if fresh is None or self.pending_since is None:
            return fresh
        return min(fresh, self.pending_since)
