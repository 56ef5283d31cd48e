"""The Datadog Agent's Autodiscovery annotation against what tasgate serves and what the docs say.

The annotation's ``metrics`` list is a copy of the registry's metric names (the Agent drops what
the list does not name), so a metric added to the code and not to the annotation would silently
never reach Datadog: this keeps the two equal, the chart's copy equal to the manifests', and the
docs' Datadog section naming only metrics and tags the annotation produces. Without a server:
``test_datadog_check.py`` runs the same instances with the Agent's check code on a live tasgate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from webhook.serve.lifecycle_metrics import LifecycleMetrics
from webhook.serve.metrics import Metrics
from webhook.serve.probe_metrics import ProbeMetrics
from webhook.state.cluster import build_state

from .conftest import HOST, kueue_objects, node

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = ROOT / "manifests" / "base" / "deployment.yaml"
CHART = ROOT / "charts" / "tasgate" / "templates" / "deployment.yaml"
KEY = "ad.datadoghq.com/tasgate.checks"
# Served, deliberately not in the annotation (docs/monitoring.md#datadog says so and why): one
# series per running pod is a custom metric per pod, and it is a join key for PromQL's group_left.
NOT_FOR_DATADOG = frozenset({"tasgate_pod_info"})
EVENT_REASONS = (
    "PartialStart", "CapacityLost", "NeverFits", "PredictionMismatch", "TopologyViolated",
    "PodGroupCreateFailed",
)  # fmt: skip


def pod_template() -> dict[str, Any]:
    return dict(yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"])


def instances() -> dict[str, dict[str, Any]]:
    """The annotation's openmetrics instances by the path they scrape: ``metrics`` alone."""
    checks = json.loads(pod_template()["metadata"]["annotations"][KEY])
    assert checks["openmetrics"]["init_config"] == {}
    found = {i["openmetrics_endpoint"].rsplit("/", 1)[1]: dict(i) for i in checks["openmetrics"]["instances"]}
    assert len(found) == len(checks["openmetrics"]["instances"]) == 1, found
    return found


def _instance() -> dict[str, Any]:
    return instances()["metrics"]


def _served() -> set[str]:
    """Every metric family the metrics port serves, with a TAS cluster state loaded."""
    labels = {"pool": "gpu", "block": "b0", "rack": "r0", HOST: "n0"}
    state = build_state([node("n0", labels), *kueue_objects(("block", "rack", HOST))], generation=1)
    metrics = Metrics(lambda: (state, 0.0))
    LifecycleMetrics(metrics.registry, pod_info=True)
    ProbeMetrics(metrics.registry, lambda: None, lambda: True)
    return {family.name for family in metrics.registry.collect()}


def renamed() -> dict[str, str]:
    """The metrics the annotation sends as metrics: Prometheus name -> Datadog short name."""
    out: dict[str, str] = {}
    for entry in _instance()["metrics"]:
        assert isinstance(entry, dict) and len(entry) == 1, entry
        out.update({k: v for k, v in entry.items() if isinstance(v, str)})
    return out


def service_checks() -> dict[str, dict[str, Any]]:
    """The metrics the annotation turns into service checks (the check's ``service_check`` type):
    Prometheus name -> its ``name``, ``type`` and ``status_map``."""
    return {k: v for entry in _instance()["metrics"] for k, v in entry.items() if isinstance(v, dict)}


def test_the_annotation_lists_exactly_the_metrics_tasgate_serves() -> None:
    served = _served()
    assert {"tasgate_gang_domains_spanned", "tasgate_gang_phase_seconds", "tasgate_gangs"} <= served
    assert served >= NOT_FOR_DATADOG
    assert set(renamed()) | set(service_checks()) == served - NOT_FOR_DATADOG
    assert not set(renamed()) & set(service_checks())
    assert all(name == f"tasgate_{short}" for name, short in renamed().items())


def test_the_check_scrapes_the_metrics_port_over_plain_http() -> None:
    instance = _instance()
    (container,) = pod_template()["spec"]["containers"]
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
    assert f"--metrics-port={port}" in container["args"]
    assert instance["openmetrics_endpoint"] == f"http://%%host%%:{port}/metrics"
    assert instance["namespace"] == "tasgate" and "service:tasgate" in instance["tags"]
    assert instance["rename_labels"] == {"level": "topology_level", "domain": "topology_domain"}
    # The check's own endpoint:<URL> tag would sit beside tasgate's endpoint label (mutate, validate).
    assert instance["tag_by_endpoint"] is False
    assert (
        container["name"] == KEY.split("/")[1].split(".", maxsplit=1)[0]
    )  # the annotation names the container


def test_readiness_is_the_ready_gauge_sent_as_the_service_check_tasgate_readyz() -> None:
    """tasgate_ready (1 while /readyz answers 200, probe_metrics.py) is the one service check
    entry: the check sends ``<namespace>.<name>``, OK on 1 and CRITICAL on 0; no second instance
    on /readyz, whose own openmetrics.health said the same at the cost of a failed run."""
    assert service_checks() == {
        "tasgate_ready": {
            "name": "readyz",
            "type": "service_check",
            "status_map": {"1": "OK", "0": "CRITICAL"},
        }
    }
    assert set(instances()) == {"metrics"}


def test_the_chart_carries_the_same_annotation() -> None:
    def block(text: str) -> str:
        start = text.index("      annotations:\n")
        return text[start : text.index("      labels:\n", start)]

    assert block(CHART.read_text()) == block(DEPLOYMENT.read_text())
    assert "{{" not in block(CHART.read_text())  # Helm must pass the JSON through untouched


def test_the_docs_datadog_section_names_only_what_the_annotation_produces() -> None:
    text = (ROOT / "docs" / "monitoring.md").read_text()
    section = text[text.index("## Datadog\n") :]
    section = section[: section.index("\n## ", 1)]
    suffixes = ("", ".count", ".bucket", ".sum")
    produced = {f"tasgate.{short}{suffix}" for short in renamed().values() for suffix in suffixes}
    produced |= {f"{i['namespace']}.openmetrics.health" for i in instances().values()}
    produced |= {f"{_instance()['namespace']}.{spec['name']}" for spec in service_checks().values()}
    named = set(re.findall(r"(?<![/\w])tasgate(?:\.[a-z_]+)+(?![/\w])", section))  # not tasgate.io/…
    assert named and named <= produced, named - produced
    for tag in _instance()["rename_labels"].values():
        assert f"{tag}:" in section
    for name in NOT_FOR_DATADOG:
        assert f"`{name}` is left out" in " ".join(section.split()), name
    assert KEY in section and "http://%%host%%:9090/metrics" in section
    code = "\n".join(p.read_text() for p in (ROOT / "webhook").rglob("*.py"))
    for reason in EVENT_REASONS:
        assert f"`{reason}`" in section and f'"{reason}"' in code, reason


def test_the_readme_points_at_the_datadog_section_the_annotation_is_described_in() -> None:
    """The README's one Datadog sentence: the Deployment's annotation, an OpenMetrics check, and a
    link to the docs' section, which names the annotation's key (test above)."""
    readme = (ROOT / "README.md").read_text()
    sentence = next(line for line in readme.splitlines() if "Datadog" in line)
    checks = json.loads(pod_template()["metadata"]["annotations"][KEY])
    assert set(checks) == {"openmetrics"} and "OpenMetrics check" in readme
    assert "Autodiscovery annotation" in readme and "(docs/monitoring.md#datadog)" in readme, sentence
    assert "\n## Datadog\n" in (ROOT / "docs" / "monitoring.md").read_text()
