"""The current cluster state: one writer publishes by swapping a reference; readers never wait."""

from __future__ import annotations

import time
from dataclasses import dataclass

from webhook.state.cluster import ClusterState


@dataclass
class StateHolder:
    current: ClusterState | None = None
    loaded_at: float | None = None  # monotonic time of the last publish
    fresh_at: float | None = None  # monotonic time the state was last known to match the cluster
    source: str = "static"

    def publish(self, state: ClusterState) -> None:
        self.current, self.loaded_at = state, time.monotonic()
        self.fresh_at = self.loaded_at

    def touch(self, at: float) -> None:
        """The watches were healthy at ``at``: the state is current even if nothing changed."""
        self.fresh_at = at

    def age(self) -> float | None:
        return None if self.fresh_at is None else time.monotonic() - self.fresh_at
