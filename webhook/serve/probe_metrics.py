"""Gauges computed when /metrics is scraped, from what the probes and the certificate reloader know.

- ``tasgate_certificate_expiry_seconds_remaining``: the serving certificate's notAfter minus now,
  so a monitor can compare it with a threshold where the query language has no current time
  (Datadog; PromQL has ``time()`` and reads ``tasgate_certificate_expiry_timestamp_seconds``).
  Negative once the certificate has expired; no sample before one is loaded, so neither "expires
  soon" nor "expired" can fire on a replica that never had one (what the rules' ``> 0`` says).
- ``tasgate_ready``: 1 while /readyz would answer 200, 0 while it would answer 503, from the same
  ``readiness_problems``; the Datadog annotation turns it into the service check ``tasgate.readyz``.

Computed at scrape time, never stored: always current, whatever clock the collector is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REMAINING = "tasgate_certificate_expiry_seconds_remaining"
READY = "tasgate_ready"


class ProbeMetrics(Collector):
    """``not_after``: the loaded certificate's expiry (Unix time), None or 0 while none is loaded;
    ``ready``: whether the replica would answer /readyz with 200."""

    def __init__(
        self,
        registry: CollectorRegistry,
        not_after: Callable[[], float | None],
        ready: Callable[[], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._not_after, self._ready, self._clock = not_after, ready, clock
        registry.register(self)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples: registering must not ask whether the replica is ready."""
        yield from _families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        remaining, ready = _families()
        expiry = self._not_after()
        if expiry:
            remaining.add_metric([], expiry - self._clock())
        ready.add_metric([], 1.0 if self._ready() else 0.0)
        yield remaining
        yield ready


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            REMAINING,
            "Seconds until the serving certificate in use expires, computed at scrape time; "
            "negative once it has expired, no sample before one is loaded.",
        ),
        GaugeMetricFamily(READY, "1 while this replica is ready (/readyz answers 200), 0 while it is not."),
    )
