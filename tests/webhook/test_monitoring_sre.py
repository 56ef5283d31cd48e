"""What makes the monitoring overlay actionable: every alert links a runbook that exists, has a
promtool case that fires and one that stays quiet, every panel has one unit and one resource, and
the series of other components are read by their real names and labels, filtered to tasgate's
webhooks. (test_monitoring.py runs promtool; this file reads the overlay's files only.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook import promql
from tests.webhook.monitoring import external_metrics as ext
from tests.webhook.overlay import OVERLAY, ROOT, dashboard, dashboard_queries, rule_queries, rule_spec

RUNBOOKS = ROOT / "docs" / "runbooks.md"
ALERT_TESTS = Path(__file__).parent / "monitoring" / "alerts.test.yaml"
WEBHOOKS = ROOT / "manifests" / "webhooks" / "webhooks.yaml"
SECTIONS = ("What it means", "Causes", "Check", "Mitigate")


def alerts() -> list[dict[str, Any]]:
    return [r for g in rule_spec()["groups"] for r in g["rules"] if "alert" in r]


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """Anchor of every ``## `` heading of docs/runbooks.md to the text under it."""
    parts = re.split(r"^## (.+)$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    return {github_anchor(title): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_github_anchor() -> None:
    assert github_anchor("TasgateDown") == "tasgatedown"
    assert github_anchor("Emergency removal: the webhooks") == "emergency-removal-the-webhooks"


def test_every_alert_links_a_runbook_that_says_what_to_check_and_do() -> None:
    sections = runbook_sections()
    assert len(alerts()) >= 16
    for rule in alerts():
        url = rule["annotations"].get("runbook_url", "")
        path, _, anchor = url.partition("#")
        assert path == "docs/runbooks.md", f"{rule['alert']}: runbook_url {url!r}"
        assert anchor == rule["alert"].lower(), f"{rule['alert']}: the anchor is the alert's heading"
        assert anchor in sections, f"{rule['alert']}: no '## {rule['alert']}' in {RUNBOOKS.name}"
        body = sections[anchor]
        for title in SECTIONS:
            assert f"**{title}.**" in body, f"{RUNBOOKS.name} {rule['alert']}: no **{title}.**"
        assert "kubectl" in body or "tasgate status" in body, f"{rule['alert']}: no command to run"
    assert "kubectl delete mutatingwebhookconfiguration tasgate" in RUNBOOKS.read_text()
    assert "kubectl delete validatingwebhookconfiguration tasgate" in RUNBOOKS.read_text()


def test_the_runbook_url_component_rewrites_every_alerts_link() -> None:
    """Its replacement keeps the anchor (index 0 of '#') and targets every rule's runbook_url; the
    example ConfigMap is never applied and says the default. That kustomize applies it from an
    overlay of a user's: tests/e2e/test_monitoring_overlay.py."""
    component = yaml.safe_load((OVERLAY / "runbook-url" / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    (replacement,) = component["replacements"]
    source = {"kind": "ConfigMap", "name": "tasgate-runbook-url", "fieldPath": "data.url"}
    assert replacement["source"] == source
    (target,) = replacement["targets"]
    assert target["select"] == {"kind": "PrometheusRule", "name": "tasgate"}
    assert target["fieldPaths"] == ["spec.groups.*.rules.*.annotations.runbook_url"]
    assert target["options"] == {"delimiter": "#", "index": 0}
    example = yaml.safe_load((OVERLAY / "runbook-url" / "configmap.example.yaml").read_text())
    assert (example["kind"], example["metadata"]["name"]) == ("ConfigMap", "tasgate-runbook-url")
    assert example["data"]["url"] == "docs/runbooks.md"
    assert example["metadata"]["annotations"]["config.kubernetes.io/local-config"] == "true"
    overlay = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert "components" not in overlay, "a second tasgate-runbook-url would clash with the user's"


def test_every_alert_has_a_promtool_case_that_fires_and_one_that_stays_quiet() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]:
        for case in test["alert_rule_test"]:
            (fires if case["exp_alerts"] else quiet).add(case["alertname"])
            for alert in case["exp_alerts"]:
                if "exp_annotations" in alert:
                    url = alert["exp_annotations"].get("runbook_url")
                    assert url == f"docs/runbooks.md#{case['alertname'].lower()}", case["alertname"]
    names = {r["alert"] for r in alerts()}
    assert not names - fires, f"alerts no promtool case sees firing: {sorted(names - fires)}"
    assert not names - quiet, f"alerts no promtool case sees quiet: {sorted(names - quiet)}"


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_every_panel_has_one_unit() -> None:
    for p in panels():
        unit = p["fieldConfig"]["defaults"].get("unit")
        assert isinstance(unit, str) and unit, f"panel {p['title']!r} has no fieldConfig.defaults.unit"
        overridden = [
            o for o in p["fieldConfig"]["overrides"] for prop in o["properties"] if prop["id"] == "unit"
        ]
        assert not overridden, f"panel {p['title']!r} overrides the unit per series"


def single_valued_variables() -> set[str]:
    return {
        v["name"]
        for v in dashboard()["templating"]["list"]
        if v["type"] == "query" and not v.get("multi") and not v.get("includeAll")
    }


RESOURCE = re.compile(r'tasgate_largest_free_domain\s*\{[^}]*\bresource\s*(=~|!~|!=|=)\s*"([^"]*)"')


def test_no_panel_mixes_resources() -> None:
    """tasgate_largest_free_domain holds cores, bytes, pods and accelerators: each panel reading it
    names exactly one resource, or a variable that can hold only one."""
    singles = single_valued_variables()
    readers = [p for p in panels() if any("tasgate_largest_free_domain" in t["expr"] for t in p["targets"])]
    assert len(readers) >= 4
    for p in readers:
        chosen = set()
        for t in p["targets"]:
            m = RESOURCE.search(t["expr"])
            assert m and m.group(1) == "=", f"panel {p['title']!r} does not fix one resource: {t['expr']}"
            value = m.group(2)
            assert not value.startswith("$") or value[1:] in singles, f"{value} may hold several resources"
            chosen.add(value)
        assert len(chosen) == 1, f"panel {p['title']!r} plots {sorted(chosen)}"
    assert {"cpu", "memory", "pods"} <= {RESOURCE.search(p["targets"][0]["expr"]).group(2) for p in readers}  # type: ignore[union-attr]


def selectors(expr: str, metric: str) -> list[str]:
    return re.findall(rf"\b{re.escape(metric)}(?:_bucket|_count|_sum)?\s*\{{([^}}]*)\}}", expr)


def every_query() -> list[tuple[str, str]]:
    return [*dashboard_queries(), *rule_queries()]


def test_webhook_names_are_the_shipped_ones() -> None:
    docs = [d for d in yaml.safe_load_all(WEBHOOKS.read_text()) if d]
    assert sorted(w["name"] for d in docs for w in d["webhooks"]) == sorted(ext.WEBHOOK_NAMES)


OTHER_WEBHOOKS = ("mutate.kueue.x-k8s.io", "vmutate.tasgate.io", "mutate.tasgate.io.evil.example")


def test_api_server_series_are_filtered_to_tasgates_webhooks() -> None:
    seen = 0
    for where, expr in every_query():
        for metric in ext.APISERVER:
            for matchers in selectors(expr, metric.name):
                seen += 1
                m = re.search(r'\bname\s*(=~|=)\s*"([^"]*)"', matchers)
                assert m, f"{where}: {metric.name} not filtered by webhook name"
                pattern = re.compile(m.group(2) if m.group(1) == "=~" else re.escape(m.group(2)))
                assert all(pattern.fullmatch(n) for n in ext.WEBHOOK_NAMES), f"{where}: misses a webhook"
                # other valid webhook names (DNS names of at least three labels): an unescaped '.'
                # in the pattern can match only a '.' in one of those
                for other in (
                    "mutate.kueue.x-k8s.io",
                    "vmutate.tasgate.io",
                    "mutate.tasgate.io.evil.example",
                ):
                    assert not pattern.fullmatch(other), f"{where}: {m.group(2)!r} also selects {other}"
            assert not re.search(rf"\b{metric.name}\b(?!\w*\s*\{{)", expr), (
                f"{where}: unfiltered {metric.name}"
            )
    assert seen >= 9, "alerts and panels read the API server's webhook series"


LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")


@pytest.mark.parametrize("metric", ext.ALL, ids=lambda m: m.name)
def test_external_metrics_are_read_by_their_declared_labels(metric: ext.External) -> None:
    """A label its source does not declare would match nothing: every matcher names a declared
    label, and so does every by/on clause of a query reading only this source's metrics."""
    readers = [(w, e) for w, e in every_query() if metric.sample_names() & promql.metric_names(e)]
    assert readers, f"{metric.name} is allow-listed but no query reads it"
    allowed = set(metric.labels) | ext.TARGET_LABELS
    external = ext.by_sample_name()
    for where, expr in readers:
        for matchers in selectors(expr, metric.name):
            used = set(MATCHER.findall(re.sub(r'"(?:\\.|[^"\\])*"', '""', matchers)))
            assert used <= allowed, f"{where}: {metric.name} has no label {sorted(used - allowed)}"
        names = promql.metric_names(expr)
        if names <= set(external) and {external[n].source for n in names} == {metric.source}:
            grouped = {label.strip() for group in LABEL_LISTS.findall(expr) for label in group.split(",")}
            grouped.discard("")
            assert grouped <= allowed, f"{where}: grouped by undeclared {sorted(grouped - allowed)}"


def test_the_allow_list_never_covers_a_tasgate_metric() -> None:
    assert not [m.name for m in ext.ALL if m.name.startswith("tasgate_")]
    assert len(ext.by_sample_name()) == sum(len(m.sample_names()) for m in ext.ALL), "no name twice"
