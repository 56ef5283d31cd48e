"""The API server's webhook latency as Datadog's kube_apiserver_metrics check sends it.

That check is datadog-checks-base's ``OpenMetricsBaseCheck`` (v1) with a ``METRICS`` mapping
(DataDog/integrations-core, kube_apiserver_metrics.py) that renames
``apiserver_admission_webhook_admission_duration_seconds`` to
``admission_webhook_admission_latencies_seconds`` under the namespace ``kube_apiserver``. Run here
with that mapping on an API server's exposition: the buckets arrive as ``.count`` tagged
``upper_bound`` (the total as ``upper_bound:none``), as monotonic counts only with the instance's
``send_distribution_counts_as_monotonic: true`` (docs/datadog.md says to set it), and the
TasgateWebhookLatencyNearTimeout monitor, evaluated on what the check sent, pages exactly when
PromQL's p99 over the same calls is above 5 s.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from datadog_checks.base import OpenMetricsBaseCheck
from datadog_checks.base.stubs import aggregator as aggregator_stub

from .fixtures.datadog.queries import KUBE_APISERVER_TAGS, catalogue
from .fixtures.datadog.translate import APISERVER_WEBHOOK_BUCKETS, evaluate, histogram_quantile
from .test_datadog_monitors import KUBE_APISERVER, MONITOR, monitors

Check: Any = OpenMetricsBaseCheck  # the Agent's package leaves these unannotated
aggregator: Any = aggregator_stub
HISTOGRAM = "apiserver_admission_webhook_admission_duration_seconds"
SENT = f"{KUBE_APISERVER[HISTOGRAM]}.count"
# kube_apiserver_metrics.py's METRICS entries for this histogram (before and after Kubernetes 1.14)
METRICS = dict.fromkeys(
    ("apiserver_admission_webhook_admission_latencies_seconds", HISTOGRAM),
    "admission_webhook_admission_latencies_seconds",
)
LABELS = 'name="validate.tasgate.io",operation="CREATE",rejected="false",type="validating"'


def exposition(per_bucket: list[int]) -> bytes:
    """The API server's histogram with ``per_bucket`` calls in each bucket (the last: over 25 s)."""
    lines = [f"# TYPE {HISTOGRAM} histogram"]
    total = 0
    for bound, count in zip([*map(str, APISERVER_WEBHOOK_BUCKETS), "+Inf"], per_bucket, strict=True):
        total += count
        lines.append(f'{HISTOGRAM}_bucket{{{LABELS},le="{bound}"}} {total}')
    lines += [f"{HISTOGRAM}_sum{{{LABELS}}} {total * 3.0}", f"{HISTOGRAM}_count{{{LABELS}}} {total}"]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def served() -> Iterator[tuple[str, list[bytes]]]:
    """A /metrics answering the last body of the list it yields."""
    bodies: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(bodies[-1])

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/metrics", bodies
    server.shutdown()
    thread.join(10)
    server.server_close()


def scrape(url: str, bodies: list[bytes], rounds: list[list[int]], **options: Any) -> list[list[Any]]:
    """The check run once per histogram of ``rounds``, as the Agent runs it; each run's series."""
    instance = {"prometheus_url": url, **options}
    defaults = {"kube_apiserver": {"namespace": "kube_apiserver", "metrics": [METRICS]}}
    check = Check("kube_apiserver_metrics", {}, [instance], default_instances=defaults,
                  default_namespace="kube_apiserver")  # fmt: skip
    runs = []
    for per_bucket in rounds:
        bodies.append(exposition(per_bucket))
        aggregator.reset()
        assert check.run() == ""
        runs.append(list(aggregator.metrics(SENT)))
    return runs


def test_the_buckets_arrive_as_counts_tagged_upper_bound(served: tuple[str, list[bytes]]) -> None:
    url, bodies = served
    (sent,) = scrape(url, bodies, [[1] * 9], send_distribution_counts_as_monotonic=True)
    assert {aggregator.METRIC_ENUM_MAP_REV[s.type] for s in sent} == {"monotonic_count"}
    tags = {t for s in sent for t in s.tags}
    assert {"upper_bound:2.5", "upper_bound:10.0", "upper_bound:none", "name:validate.tasgate.io"} <= tags
    assert {t.split(":")[0] for t in tags} == KUBE_APISERVER_TAGS[SENT]
    assert KUBE_APISERVER_TAGS[SENT] <= catalogue()[SENT]  # the metadata.csv declares the metric


def test_without_the_option_the_counts_are_cumulative_gauges(served: tuple[str, list[bytes]]) -> None:
    """The integration's default: a rollup(sum) of these would add totals, not calls."""
    url, bodies = served
    (sent,) = scrape(url, bodies, [[1] * 9])
    assert {aggregator.METRIC_ENUM_MAP_REV[s.type] for s in sent} == {"gauge"}


@pytest.mark.parametrize(
    "calls",
    [[0, 0, 0, 0, 50, 40, 9, 1, 0], [0, 0, 0, 0, 0, 900, 60, 40, 0], [0, 0, 0, 0, 0, 700, 300, 0, 0],
     [0, 0, 0, 0, 0, 0, 0, 0, 3], [500, 0, 0, 0, 0, 0, 0, 0, 0]],
)  # fmt: skip
def test_the_latency_monitor_on_what_the_check_sent_pages_when_the_p99_is_over_5s(
    served: tuple[str, list[bytes]], calls: list[int]
) -> None:
    """The Agent sends a monotonic count's increase between two runs (the stub keeps what the check
    submitted, the running totals): the calls of one interval, what ``.as_count()`` sums."""
    url, bodies = served
    base = [7] * 9
    first, second = scrape(url, bodies, [base, [a + b for a, b in zip(base, calls, strict=True)]],
                           send_distribution_counts_as_monotonic=True)  # fmt: skip
    totals = [{next(t[12:] for t in s.tags if t.startswith("upper_bound:")): s.value for s in run}
              for run in (first, second)]  # fmt: skip
    per_bound = {bound: totals[1][bound] - totals[0][bound] for bound in totals[1]}
    monitor = monitors("alert")["TasgateWebhookLatencyNearTimeout"]
    matched = MONITOR.fullmatch(monitor["query"])
    assert matched is not None
    value = evaluate(matched.group(4), lambda _metric, bound: per_bound[bound])
    cumulative = [float(sum(calls[: i + 1])) for i in range(len(calls))]
    p99 = histogram_quantile(0.99, APISERVER_WEBHOOK_BUCKETS, cumulative)
    assert (value < monitor["options"]["thresholds"]["critical"]) == (p99 > 5.0), (value, p99)
