"""The monitoring overlay as the real kubectl builds it: its ServiceMonitor scrapes the Service's
metrics port, its PrometheusRule is the rule file promtool checks, its ConfigMap the raw dashboard.

Here and not with the overlay's file checks (tests/webhook/test_monitoring.py) because it runs the
e2e build's kubectl (``kubectl kustomize``): ``make test`` needs nothing but the project itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import find_binaries
from tests.webhook.overlay import DASHBOARD, OVERLAY, ROOT, rule_spec

pytestmark = pytest.mark.e2e


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize`` with the cached real kubectl; missing binaries fail, never skip."""
    argv = [str(find_binaries().kubectl), "kustomize", str(directory)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_overlay_builds_and_scrapes_the_metrics_port() -> None:
    built = {d["kind"]: d for d in kustomize(OVERLAY)}
    assert set(built) == {"ServiceMonitor", "PrometheusRule", "ConfigMap"}
    assert {d["metadata"]["namespace"] for d in built.values()} == {"tasgate-system"}
    assert built["PrometheusRule"]["spec"] == rule_spec()
    dashboard_map = built["ConfigMap"]
    assert dashboard_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard_map["data"]["tasgate.json"] == DASHBOARD.read_text(), "the ConfigMap is the raw file"
    service = next(d for d in kustomize(ROOT / "manifests" / "base") if d["kind"] == "Service")
    monitor = built["ServiceMonitor"]["spec"]
    labels = service["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items(), (
        "the ServiceMonitor selects the Service"
    )
    assert monitor["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]} and endpoint["port"] == "metrics"
    assert endpoint["honorLabels"] is True, "tasgate's namespace and endpoint labels must survive the scrape"
