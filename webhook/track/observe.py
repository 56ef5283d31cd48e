"""Each gang counted once: its placement when it reaches running, each start-up phase when it ends.

The tracker classifies every gang on every round; histograms must see a gang once, not once per
round or per watch event. ``Observer`` remembers, per admission of a Workload (its UID and the
admission's time: a gang evicted and admitted again is a new episode), what it has already
reported, and forgets Workloads that are gone. Level-triggered: a gang first seen running (after
a restart, or between two rounds) is reported as one reaching running would be. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.state.cluster import ClusterState
from webhook.track.classify import State
from webhook.track.ledger import Key, Tracked
from webhook.track.phases import phases
from webhook.track.quality import Labels, Placement, placement, topology_levels


@dataclass(frozen=True)
class Observation:
    """What is new about one gang this round."""

    tracked: Tracked
    placement: Placement | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    partial_start: float | None = None

    @property
    def empty(self) -> bool:
        return self.placement is None and not self.phases and self.partial_start is None


class Observer:
    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}  # episode -> what was reported ("placement", phases)
        self.placements: dict[Key, Placement] = {}  # the running gangs': where their pods landed

    def round(self, tracked: Sequence[Tracked], state: ClusterState | None) -> list[Observation]:
        """``observe`` with the levels and node labels of ``state``; keeps the running gangs'
        placements (for /topology and status), forgetting those no longer running."""
        due = [t for t in tracked if t.status.state is State.RUNNING and not self._placed(t)]
        levels = {t.gang.workload.uid: topology_levels(t.gang.workload, state) for t in due}
        # Every node's labels only in a round where a gang newly runs (not every second).
        labels = {n.name: n.labels for n in state.nodes} if state is not None and due else {}
        # No state yet (tasgate just started): a running gang's placement waits for one, or a gang
        # already running at start-up would never be placed (no span, no TopologyViolated).
        found = self.observe(tracked, levels, labels, place=state is not None)
        for seen in found:
            if seen.placement is not None:
                self.placements[seen.tracked.gang.workload.key] = seen.placement
        running = {t.gang.workload.key for t in tracked if t.status.state is State.RUNNING}
        self.placements = {k: v for k, v in self.placements.items() if k in running}
        return found

    def observe(
        self,
        tracked: Iterable[Tracked],
        levels: Mapping[str, Sequence[str]],
        labels: Labels,
        place: bool = True,
    ) -> list[Observation]:
        """``levels``: Workload UID -> its Topology's levels (absent: no TAS, no placement);
        ``place``: whether placements can be told this round (else they wait for the next)."""
        out, alive = [], set()
        for t in tracked:
            wl = t.gang.workload
            episode = _episode(t)
            alive.add(episode)
            if t.status.state in (State.FINISHED, State.EVICTED) or not wl.is_true("Admitted"):
                continue
            done = self.seen.setdefault(episode, set())
            found = phases(t.gang)
            new = {k: v for k, v in found.seconds.items() if k not in done}
            partial = found.partial_start if "partial_start" not in done else None
            where = None
            if place and t.status.state is State.RUNNING and "placement" not in done:
                done.add("placement")
                where = placement(wl, t.gang.pods, levels.get(wl.uid, ()), labels)
            done.update(new)
            if partial is not None:
                done.add("partial_start")
            seen = Observation(t, where, new, partial)
            if not seen.empty:
                out.append(seen)
        self.seen = {k: v for k, v in self.seen.items() if k in alive}
        return out

    def _placed(self, t: Tracked) -> bool:
        return "placement" in self.seen.get(_episode(t), ())


def _episode(t: Tracked) -> str:
    """One admission of one Workload: evicted and admitted again is a new episode."""
    wl = t.gang.workload
    admitted = wl.condition("Admitted")
    return f"{wl.uid}:{admitted.since if admitted is not None else ''}"
