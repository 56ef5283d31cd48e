"""The API server's webhook series as Datadog's kube_apiserver_metrics check sends them.

That check is datadog-checks-base's ``OpenMetricsBaseCheck`` (v1) with a ``METRICS`` mapping
(DataDog/integrations-core, kube_apiserver_metrics.py) passed as its default instance's ``metrics``
under the namespace ``kube_apiserver``, nothing else of the scraper's settings changed. Run here
with that mapping and the instance docs/datadog.md gives, on an API server's exposition:

- the latency histogram (``apiserver_admission_webhook_admission_duration_seconds``, renamed
  ``admission_webhook_admission_latencies_seconds``): the buckets arrive as ``.count`` tagged
  ``upper_bound`` (the total as ``upper_bound:none``), as monotonic counts only with the
  instance's ``send_distribution_counts_as_monotonic: true``; the TasgateWebhookLatencyNearTimeout
  monitor, evaluated on what the check sent, pages exactly when PromQL's p99 is above 5 s;
- the rejection counter (``apiserver_admission_webhook_rejection_count``), which ``METRICS``
  leaves out: the scraper adds the instance's own ``metrics`` to the default instance's, so the
  instance's entry sends it (a counter: a monotonic count, the scraper's ``send_monotonic_counter``
  default), and the TasgateWebhookCallsFailing monitor pages for the webhooks and errors the
  PromQL alert does.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from datadog_checks.base import OpenMetricsBaseCheck
from datadog_checks.base.stubs import aggregator as aggregator_stub

from .fixtures.datadog.apiserver import HISTOGRAM, KUBE_APISERVER_TAGS, documented_instance
from .fixtures.datadog.queries import catalogue, parse_metrics
from .fixtures.datadog.translate import APISERVER_WEBHOOK_BUCKETS, evaluate, histogram_quantile
from .test_datadog_monitors import KUBE_APISERVER, MONITOR, alerts, depth0_comparisons, monitors

Check: Any = OpenMetricsBaseCheck  # the Agent's package leaves these unannotated
aggregator: Any = aggregator_stub
SENT = f"{KUBE_APISERVER[HISTOGRAM]}.count"
COUNTER = "apiserver_admission_webhook_rejection_count"
REJECTIONS = KUBE_APISERVER[COUNTER]  # a KeyError: docs/datadog.md's instance lost its entry
# kube_apiserver_metrics.py's METRICS entries for this histogram (before and after Kubernetes 1.14);
# it has none for the rejection counter (only transformers for other counters, none for it either)
METRICS = dict.fromkeys(
    ("apiserver_admission_webhook_admission_latencies_seconds", HISTOGRAM),
    "admission_webhook_admission_latencies_seconds",
)
LABELS = 'name="validate.tasgate.io",operation="CREATE",rejected="false",type="validating"'
# The webhooks calling a rejection's series apart: (name, type) and (error_type, rejection_code) as
# the API server's dispatchers record them (k8s.io/apiserver v0.36.5 pkg/admission/plugin/webhook).
WEBHOOKS = (
    ("validate.tasgate.io", "validating"),
    ("mutate.tasgate.io", "admit"),
    ("other.example.com", "validating"),
)
ERRORS = {"calling_webhook_error": 500, "apiserver_internal_error": 0, "no_error": 403}


def histogram(per_bucket: list[int]) -> list[str]:
    """The API server's histogram with ``per_bucket`` calls in each bucket (the last: over 25 s)."""
    lines = [f"# TYPE {HISTOGRAM} histogram"]
    total = 0
    for bound, count in zip([*map(str, APISERVER_WEBHOOK_BUCKETS), "+Inf"], per_bucket, strict=True):
        total += count
        lines.append(f'{HISTOGRAM}_bucket{{{LABELS},le="{bound}"}} {total}')
    return [*lines, f"{HISTOGRAM}_sum{{{LABELS}}} {total * 3.0}", f"{HISTOGRAM}_count{{{LABELS}}} {total}"]


def rejections(counts: dict[tuple[str, str], int]) -> list[str]:
    """The rejection counter, ``counts`` per (webhook name, error type), labels as the API server
    writes them (sorted)."""
    lines = [f"# HELP {COUNTER} [ALPHA] Admission webhook rejection count", f"# TYPE {COUNTER} counter"]
    for (name, error), count in counts.items():
        kind = dict(WEBHOOKS)[name]
        labels = f'error_type="{error}",name="{name}",operation="CREATE",rejection_code="{ERRORS[error]}"'
        lines.append(f'{COUNTER}{{{labels},type="{kind}"}} {count}')
    return lines


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


def scrape(
    served: tuple[str, list[bytes]], rounds: list[list[str]], **changes: Any
) -> list[dict[str, list[Any]]]:
    """The check run once per exposition of ``rounds``, as the Agent runs it, with docs/datadog.md's
    instance on this /metrics (plain HTTP, no token) changed by ``changes`` (None drops a setting);
    each run's series by name."""
    url, bodies = served
    instance = {**documented_instance(), "prometheus_url": url, "bearer_token_auth": False, **changes}
    instance = {key: value for key, value in instance.items() if value is not None}
    defaults = {"kube_apiserver": {"namespace": "kube_apiserver", "metrics": [METRICS]}}
    check = Check("kube_apiserver_metrics", {}, [instance], default_instances=defaults,
                  default_namespace="kube_apiserver")  # fmt: skip
    runs = []
    for lines in rounds:
        bodies.append(("\n".join(lines) + "\n").encode())
        aggregator.reset()
        assert check.run() == ""
        runs.append({name: list(aggregator.metrics(name)) for name in aggregator.metric_names})
    return runs


def types(sent: list[Any]) -> set[str]:
    return {aggregator.METRIC_ENUM_MAP_REV[s.type] for s in sent}


def test_the_buckets_arrive_as_counts_tagged_upper_bound(served: tuple[str, list[bytes]]) -> None:
    (sent,) = scrape(served, [histogram([1] * 9)])
    assert types(sent[SENT]) == {"monotonic_count"}
    tags = {t for s in sent[SENT] for t in s.tags}
    assert {"upper_bound:2.5", "upper_bound:10.0", "upper_bound:none", "name:validate.tasgate.io"} <= tags
    assert {t.split(":")[0] for t in tags} == KUBE_APISERVER_TAGS[SENT]
    assert KUBE_APISERVER_TAGS[SENT] <= catalogue()[SENT]  # the metadata.csv declares the metric


def test_without_the_option_the_counts_are_cumulative_gauges(served: tuple[str, list[bytes]]) -> None:
    """The integration's default: a rollup(sum) of these would add totals, not calls."""
    (sent,) = scrape(served, [histogram([1] * 9)], send_distribution_counts_as_monotonic=None)
    assert types(sent[SENT]) == {"gauge"}


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
    base = [7] * 9
    first, second = scrape(
        served, [histogram(base), histogram([a + b for a, b in zip(base, calls, strict=True)])]
    )
    totals = [{next(t[12:] for t in s.tags if t.startswith("upper_bound:")): s.value for s in run[SENT]}
              for run in (first, second)]  # fmt: skip
    per_bound = {bound: totals[1][bound] - totals[0][bound] for bound in totals[1]}
    monitor = monitors("alert")["TasgateWebhookLatencyNearTimeout"]
    matched = MONITOR.fullmatch(monitor["query"])
    assert matched is not None
    value = evaluate(matched.group(4), lambda _metric, bound: per_bound[bound])
    cumulative = [float(sum(calls[: i + 1])) for i in range(len(calls))]
    p99 = histogram_quantile(0.99, APISERVER_WEBHOOK_BUCKETS, cumulative)
    assert (value < monitor["options"]["thresholds"]["critical"]) == (p99 > 5.0), (value, p99)


ALL = {(name, error): 2 for name, _ in WEBHOOKS for error in ERRORS}


def test_the_instance_entry_sends_the_rejection_counter_beside_the_mapping(
    served: tuple[str, list[bytes]],
) -> None:
    (sent,) = scrape(served, [histogram([1] * 9) + rejections(ALL)])
    assert types(sent[REJECTIONS]) == {"monotonic_count"} and len(sent[REJECTIONS]) == len(ALL)
    tags = {t for s in sent[REJECTIONS] for t in s.tags}
    assert {"error_type:calling_webhook_error", "rejection_code:500", "type:admit"} <= tags
    assert {t.split(":")[0] for t in tags} == KUBE_APISERVER_TAGS[REJECTIONS]
    assert KUBE_APISERVER_TAGS[REJECTIONS] <= catalogue()[REJECTIONS]  # from the instance, not the CSV
    assert types(sent[SENT]) == {"monotonic_count"}  # the check's own METRICS still apply


def test_without_the_entry_the_check_sends_no_rejections(served: tuple[str, list[bytes]]) -> None:
    (sent,) = scrape(served, [histogram([1] * 9) + rejections(ALL)], metrics=None)
    assert not any(name.startswith(REJECTIONS) for name in sent) and sent[SENT]


@pytest.mark.parametrize(
    "failed",
    [{("validate.tasgate.io", "no_error"): 40}, {("validate.tasgate.io", "calling_webhook_error"): 1},
     {("mutate.tasgate.io", "apiserver_internal_error"): 3, ("validate.tasgate.io", "no_error"): 9},
     {("other.example.com", "calling_webhook_error"): 50}, {key: 1 for key in ALL}, {}],
)  # fmt: skip
def test_the_calls_failing_monitor_on_what_the_check_sent_flags_what_promql_flags(
    served: tuple[str, list[bytes]], failed: dict[tuple[str, str], int]
) -> None:
    """One interval's increase per series (what the Agent sends of a monotonic count), summed as
    the monitor's filters and grouping say, against the rule's matchers and ``sum by``: the same
    groups above the same threshold, with the same values."""
    first, second = scrape(
        served, [rejections(ALL), rejections({k: v + failed.get(k, 0) for k, v in ALL.items()})]
    )
    before = {frozenset(s.tags): s.value for s in first[REJECTIONS]}
    increase = {tags: s.value - before[tags] for s in second[REJECTIONS] for tags in [frozenset(s.tags)]}
    monitor = monitors("alert")["TasgateWebhookCallsFailing"]
    matched = MONITOR.fullmatch(monitor["query"])
    assert matched is not None and matched.group(5) == ">"
    (query,) = parse_metrics(matched.group(4))
    assert query.metric == REJECTIONS
    by = sorted(set(query.by) - {"kube_cluster_name"})
    keys = {key for key, _ in query.filters}
    datadog: Counter[tuple[str, ...]] = Counter()
    for tags, value in increase.items():  # filters on one tag: any of its values; on several: all
        if all(any(f"{k}:{v}" in tags for key, v in query.filters if key == k) for k in keys):
            labels = dict(t.split(":", 1) for t in tags)
            datadog[tuple(labels[k] for k in by)] += value
    rule = " ".join(alerts()["TasgateWebhookCallsFailing"]["expr"].split())
    matchers = re.findall(r'(\w+)=~"([^"]+)"', rule)
    grouping = sorted(x.strip() for x in re.search(r"sum by \(([^)]*)\)", rule).group(1).split(","))  # type: ignore[union-attr]
    assert grouping == by and {k for k, _ in matchers} == keys
    promql: Counter[tuple[str, ...]] = Counter()
    for name, error in ALL:
        labels = {"name": name, "error_type": error}
        if all(re.fullmatch(rx, labels[k]) for k, rx in matchers):
            promql[tuple(labels[k] for k in by)] += failed.get((name, error), 0)
    ((op, threshold),) = depth0_comparisons(rule)
    critical = monitor["options"]["thresholds"]["critical"]
    assert op == ">" and dict(datadog) == dict(promql)
    assert {g for g, v in datadog.items() if v > critical} == {g for g, v in promql.items() if v > threshold}
