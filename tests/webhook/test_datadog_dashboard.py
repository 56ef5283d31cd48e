"""The Datadog dashboard (manifests/monitoring/datadog/dashboard.json) reads only what exists.

Datadog accepts a dashboard whose queries name metrics or tags nobody sends and draws empty graphs,
so every query is parsed here and every metric it names must be one the Deployment's Autodiscovery
annotation produces (derived as tests/webhook/test_datadog.py derives it, from the registry) or one
the Kueue or DCGM integration declares (their metadata.csv, tests/webhook/fixtures/datadog/), and
every tag it filters or groups by must be on that metric. The parser and the catalogue:
tests/webhook/fixtures/datadog/queries.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from datadog_api_client.v1.model.dashboard import Dashboard

from webhook.live.events import REPORTING_CONTROLLER

from .fixtures.datadog.queries import (
    CHART_FILES,
    DATADOG,
    DOC,
    NODE_LABELS_AS_TAGS,
    QueryError,
    annotation,
    as_model,
    dashboard_queries,
    health_check,
    load,
    parse_metrics,
    strict,
    template_prefixes,
    unknown_reads,
    widgets,
)  # fmt: skip


def test_the_dashboard_is_an_api_dashboard_with_nothing_undeclared() -> None:
    model = as_model(load("dashboard.json"), Dashboard)
    assert strict(model) == []
    assert model.layout_type.value == "ordered"


@pytest.mark.parametrize(
    "broken", [{"widgets": [{"definition": {"type": "timeserie"}}]}, {"layot_type": "free"}]
)
def test_the_model_check_refuses_a_broken_dashboard(broken: dict[str, Any]) -> None:
    assert strict(as_model({**load("dashboard.json"), **broken}, Dashboard)) != []


def test_every_dashboard_query_reads_existing_metrics_and_tags() -> None:
    dashboard = load("dashboard.json")
    problems = [
        p
        for q in dashboard_queries()
        for m in parse_metrics(q)
        for p in unknown_reads(m, template_prefixes(dashboard))
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("avg:tasgate.gangz{*}", "tasgate.gangz"),
        ("max:tasgate.gangs{$cluster} by {gang}", "tasgate.gangs: gang"),
        ("sum:kueue.pending_workloads{cluster_queue:a}", "kueue.pending_workloads: cluster_queue"),
        ("avg:dcgm.gpu_utilization{$region}", "dcgm.gpu_utilization: $region"),
        ("sum:tasgate.admission_decisions{*}", "tasgate.admission_decisions"),
    ],
)
def test_a_query_naming_what_does_not_exist_is_caught(query: str, why: str) -> None:
    prefixes = template_prefixes(load("dashboard.json"))
    assert why in [p for m in parse_metrics(query) for p in unknown_reads(m, prefixes)]


@pytest.mark.parametrize(
    "query",
    ["avg:tasgate.gangs{*", "tasgate.gangs{*}", "avg:tasgate.gangs{*} by {state", "avg:tasgate.gangs{a=b}",
     "sum:tasgate.gangs{*}.rollup(sum)", "avg:tasgate.gangs{*} +", "median:tasgate.gangs{*}"],
)  # fmt: skip
def test_the_parser_refuses_what_is_not_a_metric_query(query: str) -> None:
    with pytest.raises(QueryError):
        parse_metrics(query)


def test_the_dashboard_covers_the_gang_signals_and_both_integrations() -> None:
    """Issue 40's list: verdicts, waits by cause, free capacity, fragmentation, topology, phases,
    partial starts, capacity lost; Kueue's pending, admitted, quota; DCGM's utilisation and links."""
    read = {m.metric for q in dashboard_queries() for m in parse_metrics(q)}
    assert {
        "tasgate.admission_decisions.count", "tasgate.gangs", "tasgate.domain_free_accelerators",
        "tasgate.domain_unavailable_accelerators", "tasgate.gang_shape_fits",
        "tasgate.gang_topology_met.count", "tasgate.gang_phase_seconds.sum",
        "tasgate.gang_partial_start_seconds.count", "kueue.pending_workloads",
        "kueue.admitted.workloads.count", "kueue.cluster_queue.resource_usage.gpu", "dcgm.gpu_utilization",
        "dcgm.nvlink_bandwidth.count", "dcgm.pcie_replay.count",
    } <= read  # fmt: skip
    assert {f"${n}" for n in ("cluster", "cluster_queue", "level")} <= set(
        template_prefixes(load("dashboard.json"))
    )
    text = json.dumps(load("dashboard.json"))
    for state in ("waiting_topology", "waiting_quota", "waiting_provisioning"):
        assert state in text


def test_the_event_widgets_read_tasgates_events_and_the_service_check_is_the_annotations() -> None:
    """The Events as the Cluster Agent tags them (reporting_controller, from webhook/live/events.py);
    the service check the annotation makes of tasgate_ready (``<namespace>.<name>``:
    ``tasgate.readyz``), not the scrape's own ``openmetrics.health``."""
    found = widgets(load("dashboard.json")["widgets"])
    events = [w for w in found if w["type"] in {"event_stream", "event_timeline"}]
    assert events and all(f"reporting_controller:{REPORTING_CONTROLLER}" in w["query"] for w in events)
    instance = annotation()["metrics"]
    (named,) = [
        f"{instance['namespace']}.{v['name']}"
        for entry in instance["metrics"]
        for v in entry.values()
        if isinstance(v, dict) and v["type"] == "service_check"
    ]
    assert named == "tasgate.readyz" and named != health_check("metrics")
    assert [w["check"] for w in found if w["type"] == "check_status"] == [named]


def test_the_docs_give_the_node_label_tags_the_gpu_widgets_group_by() -> None:
    assert json.dumps(NODE_LABELS_AS_TAGS, separators=(",", ":")) in DOC.read_text()


def test_the_charts_copy_of_the_dashboard_is_the_manifest() -> None:
    """helm reads files inside the chart only: its copy must never drift (hack/sync-chart.py)."""
    assert (CHART_FILES / "dashboard.json").read_bytes() == (DATADOG / "dashboard.json").read_bytes()
