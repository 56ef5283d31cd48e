"""Placement quality and start-up time of gangs (names are a contract; do not rename).

Every label value is from a bounded set: ``level`` a Topology level (the cluster's Topologies),
``mode`` and ``result`` fixed words, ``phase`` ``track.phases.PHASES``, ``cluster_queue`` the
ClusterQueues. Series: levels × 3 modes for the span histogram, 2 modes × 3 results × (levels + 1)
for the verdicts, 3 phases × ClusterQueues and ClusterQueues for the time histograms — never a
gang's name. Observed once per gang (``track.observe``), from the objects' timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram

from webhook.live.tracker import cluster_queue_of
from webhook.present.running import RunningGang
from webhook.state.cluster import ClusterState
from webhook.track.ledger import Tracked
from webhook.track.observe import Observation
from webhook.track.quality import Placement, topology_levels

# Domains a gang occupies at a level: one is what TAS aims for; a gang of hundreds of pods spans
# as many hosts.
SPAN_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256)
# Seconds, sub-second to hours: Kueue admits in a second, a big gang waits hours for quota.
PHASE_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200)


class GangMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.spanned = Histogram(
            "tasgate_gang_domains_spanned",
            "Domains of a Topology level that a running gang's pods occupy (bound nodes), once per "
            "gang when it reaches running, per the gang's topology request mode.",
            ["level", "mode"],
            buckets=SPAN_BUCKETS,
            registry=registry,
        )
        self.met = Counter(
            "tasgate_gang_topology_met",
            "Running gangs' topology requests judged on their pods' nodes: met (one domain of the "
            "level), spread (preferred, not in one domain; level: the lowest level that holds it, "
            "none if none), violated (required, not in one domain: Event TopologyViolated).",
            ["mode", "result", "level"],
            registry=registry,
        )
        self.phase = Histogram(
            "tasgate_gang_phase_seconds",
            "Gang start-up time per phase, from the objects' timestamps: queued (created to "
            "admitted), assembling (admitted to every pod bound), starting (bound to every pod running).",
            ["phase", "cluster_queue"],
            buckets=PHASE_BUCKETS,
            registry=registry,
        )
        self.partial = Histogram(
            "tasgate_gang_partial_start_seconds",
            "How long a gang ran with fewer pods than its minimum (PodGroup minMember, else every "
            "admitted pod): first pod running to the minimum running; 0 when it started at once.",
            ["cluster_queue"],
            buckets=PHASE_BUCKETS,
            registry=registry,
        )

    def observe(self, seen: Observation, cluster_queue: str) -> None:
        where = seen.placement
        if where is not None:
            for level, count in where.spanned.items():
                self.spanned.labels(level, where.mode).observe(count)
            if where.result is not None:
                asked = _asked(seen, where.mode)
                level = (where.fits_level or "none") if where.result == "spread" else asked
                self.met.labels(where.mode, where.result, level or "none").inc()
        for phase, seconds in seen.phases.items():
            self.phase.labels(phase, cluster_queue).observe(seconds)
        if seen.partial_start is not None:
            self.partial.labels(cluster_queue).observe(seen.partial_start)


def _asked(seen: Observation, mode: str) -> str:
    """The level the gang asked for in ``mode`` (its first PodSet that asked so)."""
    requests = seen.tracked.gang.workload.requests
    return next((level for _, (m, level) in sorted(requests.items()) if m == mode), "")


def running_rows(
    placed: Iterable[tuple[Tracked, Placement]], state: ClusterState | None
) -> list[RunningGang]:
    """The rows of the running-gangs table (/topology, ``tasgate status -o wide``)."""
    out = []
    for t, where in placed:
        wl = t.gang.workload
        out.append(
            RunningGang(
                wl.namespace,
                wl.owner.name if wl.owner else wl.name,
                cluster_queue_of(wl, state),
                where.mode,
                where.result or "",
                where.text(topology_levels(wl, state)),
            )
        )
    return out
