"""The chart's Datadog Operator resources, rendered by the real helm (built for the e2e suites:
``make test`` has none): a DatadogDashboard and DatadogMonitors only when their value is on and
the Operator's API is served, each valid against the Operator's published CRD schema and
carrying manifests/monitoring/datadog/*.json unchanged (docs/datadog.md). Missing helm FAILS."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.webhook.fixtures.datadog.queries import crd_validator, load, render

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return render(tmp_path_factory.mktemp("helm"), "DatadogDashboard", "datadog.dashboard.enabled")


def test_the_chart_renders_a_valid_dashboard_only_when_asked_and_served(
    boards: dict[str, Any],
) -> None:
    assert boards["no-crd"] == [] and boards["off"] == []
    (board,) = boards["on"]
    assert [e.message for e in crd_validator("DatadogDashboard").iter_errors(board)] == []


def test_the_dashboard_cr_carries_the_json_unchanged(boards: dict[str, Any]) -> None:
    (board,), dashboard = boards["on"], load("dashboard.json")
    spec = board["spec"]
    assert json.loads(spec["widgets"]) == dashboard["widgets"] and spec["title"] == dashboard["title"]
    assert spec["templateVariables"] == dashboard["template_variables"]
    assert (spec["layoutType"], spec["reflowType"]) == (dashboard["layout_type"], dashboard["reflow_type"])


@pytest.mark.parametrize(
    "spec", [{"title": "t"}, {"title": "", "layoutType": "ordered"}, {"layoutType": "grid"}]
)
def test_the_crd_schema_refuses_a_broken_dashboard(boards: dict[str, Any], spec: dict[str, str]) -> None:
    (board,) = boards["on"]
    assert list(crd_validator("DatadogDashboard").iter_errors({**board, "spec": spec})) != []


@pytest.fixture(scope="module")
def monitors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return render(tmp_path_factory.mktemp("helm"), "DatadogMonitor", "datadog.monitors.enabled")


def test_the_chart_renders_valid_monitors_only_when_asked_and_served(monitors: dict[str, Any]) -> None:
    assert monitors["no-crd"] == [] and monitors["off"] == []
    assert len(monitors["on"]) == len(load("monitors.json"))
    assert [e.message for cr in monitors["on"] for e in crd_validator("DatadogMonitor").iter_errors(cr)] == []


def test_the_monitors_carry_the_json_unchanged(monitors: dict[str, Any]) -> None:
    keys = ("name", "type", "query", "message", "tags", "priority")
    for cr, monitor in zip(monitors["on"], load("monitors.json"), strict=True):
        spec = cr["spec"]
        assert {k: spec[k] for k in keys} == {k: monitor[k] for k in keys}
        thresholds = {k: float(v) for k, v in spec["options"].pop("thresholds").items()}
        assert thresholds == monitor["options"]["thresholds"]
        camel = {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in monitor["options"].items()}
        assert spec["options"] == {k: v for k, v in camel.items() if k != "thresholds"}


@pytest.mark.parametrize(("key", "value"), [("type", "query alerts"), ("query", ""), ("priority", "high")])
def test_the_crd_schema_refuses_a_broken_monitor(monitors: dict[str, Any], key: str, value: str) -> None:
    cr = monitors["on"][0]
    assert list(crd_validator("DatadogMonitor").iter_errors({**cr, "spec": {**cr["spec"], key: value}})) != []
