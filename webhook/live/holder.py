"""The current cluster state: one writer publishes by swapping a reference; readers never wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from webhook.state.cluster import ClusterState


@dataclass
class StateHolder:
    current: ClusterState | None = None
    loaded_at: float | None = None  # monotonic time of the last publish
    fresh_at: float | None = None  # monotonic time the state was last known to match the cluster
    source: str = "static"
    # Live mode: when the published state last matched the cluster, asked at each read
    # (``Mirror.confirmed_at``); None for a static state, whose freshness is its publish.
    confirmed: Callable[[], float | None] | None = None

    def publish(self, state: ClusterState) -> None:
        self.current, self.loaded_at = state, time.monotonic()
        self.fresh_at = self.loaded_at

    def age(self) -> float | None:
        at = self.fresh_at if self.confirmed is None else self.confirmed()
        return None if at is None else time.monotonic() - at
