"""The current cluster state: one writer publishes by swapping a reference; readers never wait."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.live import heap
from webhook.state.cluster import ClusterState, same_structure

# How long a replaced state is kept for /validate: the API server calls /mutate and /validate of
# one request within its webhook timeouts (at most 30 s each), so the mutation may have been
# decided on a state that old. A mutation depends on structure (nodes, Kueue objects, namespaces)
# and, through the flavor Kueue picks now, on usage too: the last few states of any change are
# kept (usage changes come every 50 ms or so under churn), and those replaced by a change of
# structure for longer.
EARLIER_SECONDS = 60.0
EARLIER_KEPT = 4  # states replaced by a change of structure: a burst keeps the newest few
RECENT_KEPT = 8  # states replaced by any change


@dataclass
class StateHolder:
    current: ClusterState | None = None
    loaded_at: float | None = None  # monotonic time of the last publish
    fresh_at: float | None = None  # monotonic time the state was last known to match the cluster
    source: str = "static"
    # Live mode: when the published state last matched the cluster, asked at each read
    # (``Mirror.confirmed_at``); None for a static state, whose freshness is its publish.
    confirmed: Callable[[], float | None] | None = None
    # What every published state is given before it is held: the MultiKueue workers' states
    # (``live.multikueue``); None: held as published.
    attach: Callable[[ClusterState], ClusterState] | None = None
    # Called after each publish (a MultiKueue worker's holder tells the manager's to republish).
    listeners: list[Callable[[], None]] = field(default_factory=list)
    # States replaced by a change of structure, newest last, with when they were replaced.
    _earlier: deque[tuple[float, ClusterState]] = field(default_factory=lambda: deque(maxlen=EARLIER_KEPT))
    _recent: deque[tuple[float, ClusterState]] = field(default_factory=lambda: deque(maxlen=RECENT_KEPT))

    def publish(self, state: ClusterState) -> None:
        self._hold(state if self.attach is None else self.attach(state))

    def republish(self) -> None:
        """Hold the current state again with what `attach` gives now (a worker's state changed)."""
        if self.current is not None and self.attach is not None:
            attached = self.attach(self.current)
            if attached is not self.current:
                self._hold(attached)

    def _hold(self, state: ClusterState) -> None:
        now = time.monotonic()
        if self.current is not None and self.current is not state:
            _keep(self._recent, now, self.current)
            if not same_structure(self.current, state):
                _keep(self._earlier, now, self.current)
        self.current, self.loaded_at = state, now
        self.fresh_at = self.loaded_at
        for listener in self.listeners:
            listener()

    def earlier(self) -> tuple[ClusterState, ...]:
        """The states a mutation of a request still being admitted may have been decided on,
        newest first (see ``decide.review.judge``)."""
        since = time.monotonic() - EARLIER_SECONDS
        kept = sorted((*self._recent, *self._earlier), key=lambda pair: pair[0], reverse=True)
        seen: set[int] = set()
        states = []
        for at, state in kept:
            if at >= since and id(state) not in seen:
                seen.add(id(state))
                states.append(state)
        return tuple(states)

    def age(self) -> float | None:
        at = self.fresh_at if self.confirmed is None else self.confirmed()
        return None if at is None else time.monotonic() - at


def _keep(kept: deque[tuple[float, ClusterState]], now: float, state: ClusterState) -> None:
    """Append ``state``; the one it pushes out is freed off the caller's thread (the event loop
    in live mode): `heap.release`. The holder owns what it kept, so it knows when it lets go;
    it hands the reference over, keeping none (a reader still deciding on it keeps its own)."""
    if len(kept) == kept.maxlen:
        heap.release(kept.popleft())
    kept.append((now, state))
