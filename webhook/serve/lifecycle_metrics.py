"""The lifecycle metrics (a contract dashboards and alerts are built on; do not rename).

- ``tasgate_gangs{state, cluster_queue, namespace}``: tracked gangs per state; every state is
  exported (0 when none) for each (cluster_queue, namespace) that has a gang, so an alert on
  ``state="partial_start"`` sees a 0, not an absent series.
- ``tasgate_gang_state_seconds{namespace, name, uid, workload, cluster_queue, state}``: seconds the
  gang has been in its current state, one series per current (not finished) gang. Collected at
  scrape time from the tracker, so a gang that finishes or goes away simply has no series.
- ``tasgate_predictions_total{result, reason}``: Kueue's admissions compared with tasgate's
  placement; ``result`` agree|disagree, ``reason`` one of ``track.compare.REASONS``.
- ``tasgate_events_total{result}``: lifecycle Events posted, failed, dropped, deduplicated.
- ``tasgate_pod_info{namespace, pod, gang, <levels>}``: opt-in, one per running pod
  (``serve.pod_info_metrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webhook.live.tracker import Row
from webhook.serve.gang_metrics import GangMetrics
from webhook.serve.pod_info_metrics import PodInfoMetrics, Running
from webhook.track.classify import State
from webhook.track.compare import REASONS, Comparison
from webhook.track.ledger import Tracked
from webhook.track.quality import Placement

Counts = dict[tuple[str, str, str], int]
Placed = Callable[[], Sequence[tuple[Tracked, Placement]]]


class LifecycleMetrics:
    def __init__(self, registry: CollectorRegistry, pod_info: bool = False) -> None:
        self.rows: Callable[[], Sequence[Row]] = list
        self.counts: Callable[[], Counts] = dict
        self.placed: Placed = list  # running gangs and their placements (the /topology table)
        self.predictions = Counter(
            "tasgate_predictions",
            "Kueue admissions compared with tasgate's predicted placement, by result and reason.",
            ["result", "reason"],
            registry=registry,
        )
        self.predictions.labels("agree", "none")
        for reason in REASONS[1:]:
            self.predictions.labels("disagree", reason)
        self.events = Counter("tasgate_events", "Lifecycle Events by result.", ["result"], registry=registry)
        registry.register(_Gangs(self))
        self.gangs = GangMetrics(registry)  # placement quality and start-up phases
        self.pod_info = PodInfoMetrics(pod_info)  # the per-pod join series, when asked for
        registry.register(self.pod_info)

    def follow(
        self,
        rows: Callable[[], Sequence[Row]],
        counts: Callable[[], Counts],
        placed: Placed = list,
        running: Running | None = None,
    ) -> None:
        """Read the gangs from a running tracker from now on (``running``: its gangs and the state
        their nodes are in, for ``tasgate_pod_info``)."""
        self.rows, self.counts, self.placed = rows, counts, placed
        if running is not None:
            self.pod_info.running = running

    def predicted(self, comparison: Comparison) -> None:
        self.predictions.labels(comparison.result, comparison.reason).inc()

    def event(self, result: str) -> None:
        self.events.labels(result).inc()


class _Gangs(Collector):
    def __init__(self, source: LifecycleMetrics) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        gangs = GaugeMetricFamily(
            "tasgate_gangs",
            "Tracked gangs per lifecycle state.",
            labels=["state", "cluster_queue", "namespace"],
        )
        counts = self.source.counts()
        for cluster_queue, namespace in sorted({(cq, ns) for _, cq, ns in counts}):
            for state in State:
                gangs.add_metric(
                    [state.value, cluster_queue, namespace],
                    counts.get((state.value, cluster_queue, namespace), 0),
                )
        seconds = GaugeMetricFamily(
            "tasgate_gang_state_seconds",
            "Seconds each current gang has been in its lifecycle state.",
            labels=["namespace", "name", "uid", "workload", "cluster_queue", "state"],
        )
        for row in self.source.rows():
            labels = [row.namespace, row.name, row.uid, row.workload, row.cluster_queue, row.state]
            seconds.add_metric(labels, row.seconds)
        yield gangs
        yield seconds


LIFECYCLE = web.AppKey("lifecycle", LifecycleMetrics)
