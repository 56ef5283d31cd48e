"""The monitoring overlay's queries, read from its files: the PrometheusRule's spec and the
dashboard's panel targets and query variables (tests/webhook/test_monitoring.py and the e2e
suite's real-Prometheus check read them here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.webhook import promql

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "manifests" / "overlays" / "monitoring"
RULE = OVERLAY / "prometheusrule.yaml"
DASHBOARD = OVERLAY / "dashboards" / "tasgate.json"


def rule_spec() -> dict[str, Any]:
    """The PrometheusRule's spec: a Prometheus rule file (``groups``) as promtool and Prometheus read it."""
    doc = yaml.safe_load(RULE.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    spec: dict[str, Any] = doc["spec"]
    return spec


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_queries() -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable of the dashboard."""

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    board = dashboard()
    for p in panels(board["panels"]):
        for target in p.get("targets", []):
            yield f"panel {p['title']!r}", target["expr"]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = promql.grafana_query(query)
            if inner is not None:
                yield f"variable {var['name']!r}", inner


def rule_queries() -> Iterator[tuple[str, str]]:
    for group in rule_spec()["groups"]:
        for rule in group["rules"]:
            yield f"alert {rule.get('alert') or rule.get('record')!r}", rule["expr"]


def recorded() -> set[str]:
    """The names the rule file's recording rules write (Prometheus stores them, no exporter does)."""
    return {r["record"] for g in rule_spec()["groups"] for r in g["rules"] if "record" in r}


def queried_metrics() -> dict[str, list[str]]:
    """Every metric name a panel, variable or rule reads, with where it is read; a recording
    rule's output is not one (its own expression is, and promtool's cases test its value)."""
    used: dict[str, list[str]] = {}
    for where, expr in [*dashboard_queries(), *rule_queries()]:
        for name in promql.metric_names(expr) - recorded():
            used.setdefault(name, []).append(where)
    return used


def missing_report(used: dict[str, list[str]], exported: set[str]) -> str:
    """'' when every used name is exported, else one line per missing name and where it is read."""
    return "\n".join(
        f"  {name}: {', '.join(sorted(set(where)))}"
        for name, where in sorted(used.items())
        if name not in exported
    )


# Sample names a family of each type is scraped as (a family declared without series yet still
# names what Prometheus will store once it has one).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
    "unknown": ("",),
}


def scraped_names(text: str) -> tuple[set[str], set[str]]:
    """(declared, with samples): the sample names a /metrics text declares (every family, with the
    names its type is stored under) and those it has samples of now."""
    declared: set[str] = set()
    sampled: set[str] = set()
    for family in text_string_to_metric_families(text):
        sampled |= {s.name for s in family.samples}
        declared |= {family.name + suffix for suffix in SUFFIXES[family.type]}
    return declared | sampled, sampled
