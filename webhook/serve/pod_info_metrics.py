"""``tasgate_pod_info``: the opt-in join series that puts gangs and domains on GPU exporters' series.

One sample (value 1) per Running pod of a tracked gang, ``{namespace, pod, gang, <a label per
Topology level>}`` (``track.pod_info``), collected at scrape time from the tracker, so a pod that
ends or a gang that stops being tracked simply has no sample. Off by default (``serve
--pod-info-metrics`` turns it on): it is the one tasgate series with a sample per pod. Off, the
family is declared without samples, so queries and rules that read it stay valid.

Cardinality: one series per running pod of the tracked (Kueue-admitted) gangs; the label values
are a pod's own name, its gang's name and its node's level values, never a request's text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from webhook.state.cluster import ClusterState
from webhook.track.ledger import Tracked
from webhook.track.pod_info import pod_infos

NAME = "tasgate_pod_info"
HELP = (
    "1 per running pod of a tracked gang: its gang and its node's domain per Topology level, to join "
    "GPU exporters' per-pod series (dcgm-exporter's pod, namespace). Only with --pod-info-metrics."
)
Running = Callable[[], tuple[Sequence[Tracked], ClusterState | None]]


class PodInfoMetrics(Collector):
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.running: Running = lambda: ((), None)

    def collect(self) -> Iterator[Metric]:
        family = Metric(NAME, HELP, "gauge")
        if self.enabled:
            tracked, state = self.running()
            for row in pod_infos(tracked, state):
                family.add_sample(NAME, row.labels, 1.0)
        yield family
