"""The Datadog monitors (manifests/monitoring/datadog/monitors.json) are the Prometheus alerts.

A monitor is only worth shipping if it pages when the alert it stands for would: so each alert of
the PrometheusRule has exactly one monitor (tag ``tasgate-alert:<alert>``), with the alert's
threshold, window, grouping, severity and runbook link, read off both files here, and every query
reads what exists (the dashboard test's parser and catalogue). An alert Datadog cannot express with
the sources in scope is in UNMAPPED with its reason, and the reason is checked against the rule, so
neither list can drift. Each Event reason tasgate posts has an event monitor. The chart renders
the same objects as DatadogMonitor / DatadogDashboard, valid against the Operator's CRDs.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from datadog_api_client.v1.model.monitor import Monitor

from webhook.live.events import REPORTING_CONTROLLER

from .fixtures.datadog.apiserver import kube_apiserver
from .fixtures.datadog.queries import (
    CHART_FILES,
    DATADOG,
    ROOT,
    as_model,
    health_check,
    load,
    parse_metrics,
    renamed,
    strict,
    unknown_reads,
)  # fmt: skip
from .fixtures.datadog.translate import quantile_agrees, time_conditions

RULE = ROOT / "manifests" / "overlays" / "monitoring" / "prometheusrule.yaml"
CHECK_SECONDS = 15  # the Agent runs a check every 15 s: a service check monitor counts runs
REMAINING = "tasgate_certificate_expiry_seconds_remaining"  # what an alert on ... - time() reads
# The API server's series Datadog's kube_apiserver_metrics check sends: by its METRICS mapping (the
# name whose .count its metadata.csv declares) or by the instance docs/datadog.md gives (its own
# ``metrics`` entry: the rejection counter), fixtures/datadog/apiserver.py.
KUBE_APISERVER = kube_apiserver()
UNMAPPED = {
    "TasgateGangStraggler": "joins dcgm-exporter's series to tasgate_pod_info per gang: no gang tag reaches "
    "dcgm.* (pod labels as tags tag the scraped dcgm-exporter pod, not the pod a GPU series names), and "
    "outliers() flags by distance from peers, not below half the gang's mean",
}
# The API server's count of calls per webhook stands in as tasgate's own per endpoint: tasgate's
# denials are the calls it answers "deny" (mutate.tasgate.io is /mutate).
SUBSTITUTED = {"TasgateWebhookDenyingMost": {"name": "endpoint"}}
RENAME = {"level": "topology_level", "pod": "pod_name"}
EVENT_REASONS = tuple(
    [
        "PartialStart",
        "CapacityLost",
        "NeverFits",
        "PredictionMismatch",
        "TopologyViolated",
        "PodGroupCreateFailed",
    ]
)
# The Cluster Agent's tags on a Kubernetes Event (pkg/collector/corechecks/cluster/kubernetesapiserver).
EVENT_TAGS = {
    "event_reason",
    "reporting_controller",
    "kube_kind",
    "kube_name",
    "kube_namespace",
    "kube_cluster_name",
}
MONITOR = re.compile(r"(min|max|sum)\(last_(\d+)([mh])\):(.+?) (>=|<=|>|<) ([\d.]+)")
DURATION = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text: str) -> int:
    return int(text[:-1]) * DURATION[text[-1]]


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULE.read_text())["spec"]["groups"] for r in g["rules"]]


def alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in rules() if "alert" in r}


def monitors(kind: str) -> dict[str, dict[str, Any]]:
    """The monitors by their ``tasgate-<kind>:`` tag's value (alert name or Event reason)."""
    out: dict[str, dict[str, Any]] = {}
    for monitor in load("monitors.json"):
        for tag in monitor["tags"]:
            if tag.startswith(f"tasgate-{kind}:"):
                assert tag.split(":", 1)[1] not in out, tag
                out[tag.split(":", 1)[1]] = monitor
    return out


def depth0_comparisons(expr: str) -> list[tuple[str, float]]:
    """The comparisons outside every parenthesis of a PromQL expression, in order."""
    depth, flat = 0, ""
    for char in expr:
        depth += char == "("
        flat += char if depth == 0 else " "
        depth -= char == ")"
    return [
        (op, float(value)) for op, value in re.findall(r"(==|>=|<=|>|<)\s*([\d.]+(?:\s*\*\s*[\d.]+)?)", flat)
    ]


def needs(expr: str, record: dict[str, str]) -> set[str]:
    """What of an alert's expression Datadog cannot read: a current time (unless the annotation
    sends the seconds left), an API server series the kube_apiserver_metrics check does not send
    (with the documented instance), or tasgate_pod_info (the annotation leaves it out), also through
    the recording rules it reads."""
    found = {"time()"} if "time()" in expr and REMAINING not in renamed() else set()
    names = re.findall(r"\bapiserver_\w+", re.sub(r'"[^"]*"', "", expr))  # not a label's value
    served = {n if n in KUBE_APISERVER else re.sub(r"_(bucket|count|sum)$", "", n) for n in names}
    found |= {"apiserver"} if served - set(KUBE_APISERVER) else set()
    found |= (
        {"tasgate_pod_info"} if "tasgate_pod_info" in expr and "tasgate_pod_info" not in renamed() else set()
    )
    for name in set(re.findall(r"\btasgate:[a-z_:]+", expr)) & set(record):
        found |= needs(record.pop(name), record)
    return found


def expected_groups(alert: str, expr: str) -> set[str]:
    labels = {x.strip() for group in re.findall(r"\bby \(([^)]*)\)", expr) for x in group.split(",")} - {
        "le",
        "job",
    }
    rename = {**RENAME, **SUBSTITUTED.get(alert, {})}
    # no aggregation (a metric name first, then its selector or an operator): one alert per target
    per_target = re.match(r"\(*[a-z_]+(\{|\s+[-+*/<>=!])", expr) is not None
    return {rename.get(label, label) for label in labels} | ({"pod_name"} if per_target else set())


def monitor_groups(monitor: dict[str, Any]) -> set[str]:
    if monitor["type"] == "service check":
        found = set(re.findall(r'"([a-z_]+)"', monitor["query"].split(".by(")[1].split(")")[0]))
    else:
        found = {tag for m in parse_metrics(MONITOR.fullmatch(monitor["query"]).group(4)) for tag in m.by}  # type: ignore[union-attr]
    return found - {"kube_cluster_name"}


def test_every_alert_has_one_monitor_or_a_reason_that_holds() -> None:
    record = {r["record"]: r["expr"] for r in rules() if "record" in r}
    assert set(monitors("alert")) == set(alerts()) - set(UNMAPPED) and set(UNMAPPED) <= set(alerts())
    for name, rule in alerts().items():
        needed = needs(rule["expr"], dict(record))
        assert needed == {"apiserver"} if name in SUBSTITUTED else bool(needed) == (name in UNMAPPED), name
        if name in UNMAPPED:  # the reason names what is missing
            assert all(n.replace("apiserver", "kube_apiserver_metrics") in UNMAPPED[name] for n in needed), (
                name
            )


def check_alert_monitor(name: str, monitor: dict[str, Any]) -> None:
    """Threshold, window, comparison, grouping, severity, runbook link; the translation rules are
    docs/datadog.md's: a ``for`` is the window (``min`` of values above, ``max`` of values below),
    a range without ``for`` is summed over the window, a range with one is a ``rollup``."""
    rule = alerts()[name]
    expr, hold = " ".join(rule["expr"].split()), seconds(rule.get("for", "0s"))
    ranges = {seconds(r) for r in re.findall(r"\[(\d+[smhd])\]", expr)}
    assert rule["annotations"]["runbook_url"] in monitor["message"]
    assert f"severity:{rule['labels']['severity']}" in monitor["tags"]
    assert monitor["priority"] == (1 if rule["labels"]["severity"] == "critical" else 3)
    assert monitor_groups(monitor) == expected_groups(name, expr)
    critical = monitor["options"]["thresholds"]["critical"]
    if monitor["type"] == "service check":  # up == 0, per target
        assert monitor["query"].startswith(f'"{health_check("metrics")}".') and "up{" in expr
        assert critical * CHECK_SECONDS == hold and f".last({critical + 1})." in monitor["query"]
        return
    matched = MONITOR.fullmatch(monitor["query"])
    assert matched, monitor["query"]
    agg, window, query, op, threshold = (
        matched.group(1),
        seconds(matched.group(2) + matched.group(3)),
        *matched.groups()[3:],
    )
    if "time()" in expr:  # the seconds left; no for: at least once in the last minute
        (main, *guards) = time_conditions(expr)
        assert (op, critical) == main and float(threshold) == critical and (window, hold) == (60, 0)
        assert agg == ("min" if op.startswith("<") else "max") and query.count(":tasgate.") == 1
        assert f":tasgate.{renamed()[REMAINING]}{{" in query
        for guard, at in guards:  # E > time(): what is left is above 0, the rest cut off
            assert guard == ">" and "cutoff_min(" in query and f", {at:g})" in query
        return
    assert float(threshold) == critical and window == (hold or max(ranges))
    rollups = {int(s) for s in re.findall(r"\.rollup\(sum, (\d+)\)", query)}
    assert rollups == (ranges if hold and ranges else set())
    if "absent(" in expr:
        inner = re.search(r"absent\(.*==\s*([\d.]+)\)", expr)
        assert inner and (op, critical) == ("<", float(inner.group(1)))
        assert monitor["options"]["notify_no_data"] and monitor["options"]["no_data_timeframe"] * 60 == hold
        return
    (prom_op, value), *more = depth0_comparisons(expr)
    if "histogram_quantile(" in expr:  # p(q) > T  <=>  the share at or below T is under q
        quantile = float(re.search(r"histogram_quantile\(([\d.]+)", expr).group(1))  # type: ignore[union-attr]
        assert (op, critical) == ("<", quantile) and quantile_agrees(query, quantile, value)
    else:
        equal = ">=" if value >= 1 else "<="  # == on a 0/1 gauge
        assert (op, critical) == (equal if prom_op == "==" else prom_op, value)
    assert agg == ("sum" if not hold else "min" if op.startswith(">") else "max")
    for _, at_least in more:  # and ... >= n: the denominator cut below n
        assert f", {at_least:g})" in query and "cutoff_min(" in query


@pytest.mark.parametrize("name", sorted(set(alerts()) - set(UNMAPPED)))
def test_the_monitor_pages_when_the_alert_would(name: str) -> None:
    check_alert_monitor(name, monitors("alert")[name])


MUTATIONS = [
    ("TasgateGangPartialStart", ("query", "> 600", "> 300"), ("critical", 300)),
    ("TasgateGangNeverFits", ("query", "last_5m", "last_10m"), None),
    ("TasgateCannotDecide", ("query", "sum, 300", "sum, 60"), None),
    ("TasgateWebhookLatencyHigh", ("query", "upper_bound:1.0", "upper_bound:2.5"), None),
    ("TasgateClusterStateStale", ("query", "min(last_2m)", "max(last_2m)"), None),
    ("TasgatePredictionMismatch", ("query", ",reason}", "}"), None),
    ("TasgateWebhookDenyingMost", ("query", ", 10)", ", 5)"), None),
    ("TasgateNoLeader", ("message", "Runbook: docs/runbooks.md#", "Runbook: "), None),
    ("TasgatePolicyReloadFailing", ("tags", "severity:warning", "severity:critical"), None),
    ("TasgateReplicaDown", ("query", ".last(21)", ".last(5)"), ("critical", 4)),
    ("TasgateDown", ("query", "< 1", "< 2"), ("critical", 2)),
    ("TasgateCertificateExpiresSoon", ("query", ", 0)", ", 1)"), None),
    ("TasgateCertificateExpired", ("query", "<= 0", "< 0"), None),
    ("TasgateCertificateExpired", ("query", "min(last_1m)", "min(last_5m)"), None),
    ("TasgateWebhookLatencyNearTimeout", ("query", "(2 * ", "(1 * "), None),
    ("TasgateWebhookLatencyNearTimeout", ("query", "upper_bound:10.0", "upper_bound:25.0"), None),
    ("TasgateWebhookCallsFailing", ("query", ",error_type}", "}"), None),
    ("TasgateWebhookCallsFailing", ("query", "min(last_10m)", "min(last_5m)"), None),
    ("TasgateWebhookCallsFailing", ("tags", "severity:critical", "severity:warning"), None),
]


@pytest.mark.parametrize(
    ("name", "edit", "critical"), MUTATIONS, ids=[f"{m[0]}-{m[1][2]}" for m in MUTATIONS]
)
def test_a_monitor_that_would_page_otherwise_is_caught(
    name: str, edit: tuple[str, str, str], critical: tuple[str, float] | None
) -> None:
    monitor = json.loads(json.dumps(monitors("alert")[name]))
    key, old, new = edit
    value = json.dumps(monitor[key])
    assert old in value
    monitor[key] = json.loads(value.replace(old, new))
    if critical:
        monitor["options"]["thresholds"]["critical"] = critical[1]
    with pytest.raises(AssertionError):
        check_alert_monitor(name, monitor)


def test_every_monitor_query_reads_existing_metrics_and_tags() -> None:
    queries = [MONITOR.fullmatch(m["query"]) for m in load("monitors.json") if m["type"] == "query alert"]
    assert all(queries)
    assert [p for q in queries for m in parse_metrics(q.group(4)) for p in unknown_reads(m, {})] == []  # type: ignore[union-attr]


def check_event_monitor(reason: str, monitor: dict[str, Any]) -> None:
    """On the Event as the Cluster Agent forwards it, with a runbook (or tracking) link."""
    matched = re.fullmatch(
        r'events\("([^"]+)"\)\.rollup\("count"\)\.by\("([^"]+)"\)\.last\("5m"\) > 0', monitor["query"]
    )
    assert (
        matched and monitor["type"] == "event-v2 alert" and monitor["options"]["thresholds"]["critical"] == 0
    )
    assert set(matched.group(1).split()) == {
        f"event_reason:{reason}",
        f"reporting_controller:{REPORTING_CONTROLLER}",
    }
    assert set(matched.group(2).split(",")) <= EVENT_TAGS and re.search(
        r"Runbook: docs/\S+#\S+", monitor["message"]
    )


@pytest.mark.parametrize("reason", EVENT_REASONS)
def test_each_event_reason_tasgate_posts_has_an_event_monitor(reason: str) -> None:
    code = "\n".join(p.read_text() for p in (ROOT / "webhook").rglob("*.py"))
    assert f'"{reason}"' in code and set(monitors("event")) == set(EVENT_REASONS)
    check_event_monitor(reason, monitors("event")[reason])


@pytest.mark.parametrize(
    ("old", "new"), [("PartialStart ", "PartialStarts "), ("kube_name", "gang"), ("Runbook: docs", "")]
)
def test_an_event_monitor_on_another_event_is_caught(old: str, new: str) -> None:
    monitor = json.loads(json.dumps(monitors("event")["PartialStart"]).replace(old, new))
    with pytest.raises(AssertionError):
        check_event_monitor("PartialStart", monitor)


def test_the_monitors_are_api_monitors_with_nothing_undeclared() -> None:
    assert [p for m in load("monitors.json") for p in strict(as_model(m, Monitor))] == []
    assert strict(as_model({**load("monitors.json")[0], "type": "query alerts"}, Monitor)) != []


def test_the_charts_copy_of_the_monitors_is_the_manifest() -> None:
    """helm reads files inside the chart only: its copy must never drift (hack/sync-chart.py)."""
    assert (CHART_FILES / "monitors.json").read_bytes() == (DATADOG / "monitors.json").read_bytes()
