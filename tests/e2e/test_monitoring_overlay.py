"""The monitoring overlay as the real kubectl builds it: its ServiceMonitor scrapes the Service's
metrics port, its PrometheusRule is the rule file promtool checks, its ConfigMap the raw dashboard,
its runbook-url component rebases every alert's runbook_url; and the other components' metrics it
reads are declared, with those labels, in the pinned sources it cites.

Here and not with the overlay's file checks (tests/webhook/test_monitoring.py) because it runs the
e2e build's kubectl (``kubectl kustomize``): ``make test`` needs nothing but the project itself.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import dcgm_fake
from e2e.binaries import TOOLS_DIR, required_version
from e2e.controlplane import find_binaries
from e2e.kueue_source import downloaded_module, module_source_dir, pinned_kueue_version
from tests.webhook.monitoring import external_metrics as ext
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


def test_an_overlay_of_yours_points_every_runbook_url_elsewhere(tmp_path: Path) -> None:
    """The runbook-url component, used as docs/monitoring.md says: the part before '#' of every
    alert's runbook_url becomes the ConfigMap's url, the anchors stay, the ConfigMap is not emitted."""
    base = Path(os.path.relpath(OVERLAY, tmp_path))
    example = yaml.safe_load((OVERLAY / "runbook-url" / "configmap.example.yaml").read_text())
    example["data"]["url"] = "https://wiki.example/tasgate/runbooks.md"
    (tmp_path / "runbook-url.yaml").write_text(yaml.safe_dump(example))
    kustomization = {"resources": [str(base), "runbook-url.yaml"], "components": [str(base / "runbook-url")]}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = kustomize(tmp_path)
    assert sorted(d["kind"] for d in built) == ["ConfigMap", "PrometheusRule", "ServiceMonitor"]
    assert [d["metadata"]["name"] for d in built if d["kind"] == "ConfigMap"] == ["tasgate-dashboard"]
    (rule,) = [d for d in built if d["kind"] == "PrometheusRule"]
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    urls = {r["alert"]: r["annotations"]["runbook_url"] for r in alerts}
    assert len(urls) == sum(1 for g in rule_spec()["groups"] for r in g["rules"] if "alert" in r)
    records = [r for g in rule["spec"]["groups"] for r in g["rules"] if "record" in r]
    assert records and not [r for r in records if "annotations" in r], "a recording rule was given a link"
    assert urls == {a: f"https://wiki.example/tasgate/runbooks.md#{a.lower()}" for a in urls}
    (shipped,) = [d for d in kustomize(OVERLAY) if d["kind"] == "PrometheusRule"]
    assert {
        r["annotations"]["runbook_url"] for g in shipped["spec"]["groups"] for r in g["rules"] if "alert" in r
    } == {f"docs/runbooks.md#{a.lower()}" for a in urls}


def declared_in_go(source: str, metric: ext.External) -> tuple[str, list[str], str]:
    """(type, label names, the opts block) of the metric whose ``Name:`` is ``metric.short`` in a
    Go file declaring it with ``New<Type>Vec(&...Opts{... Name: "..." ...}, []string{...})``."""
    name = re.search(rf'\bName:\s*"{re.escape(metric.short)}"', source)
    assert name, f"{metric.short} is not declared in {metric.source}"
    constructors = list(re.finditer(r"New(Counter|Gauge|Histogram)Vec\(", source[: name.start()]))
    assert constructors, f"{metric.short}: no New...Vec before it"
    opened = constructors[-1]
    labels = re.search(r"\[\]string\{([^}]*)\}", source[name.end() :])
    assert labels, f"{metric.short}: no label list"
    return (
        opened.group(1).lower(),
        re.findall(r'"(\w+)"', labels.group(1)),
        source[opened.start() : name.end()],
    )


def test_the_allow_listed_metrics_are_declared_so_in_their_pinned_sources() -> None:
    """Each entry of tests/webhook/monitoring/external_metrics.py against the Go file it cites, in
    the module the e2e binaries are built from (kube-apiserver's k8s.io/apiserver, Kueue)."""
    apiserver_version = required_version(TOOLS_DIR / "kube" / "go.mod", "k8s.io/apiserver")
    assert ext.APISERVER_SOURCE.startswith(f"k8s.io/apiserver@{apiserver_version} ")
    assert ext.KUEUE_SOURCE.startswith(f"sigs.k8s.io/kueue@{pinned_kueue_version()} ")
    apiserver_dir = downloaded_module("k8s.io/apiserver", apiserver_version, TOOLS_DIR / "kube")
    files = {
        ext.APISERVER_SOURCE: apiserver_dir / "pkg" / "admission" / "metrics" / "metrics.go",
        ext.KUEUE_SOURCE: module_source_dir() / "pkg" / "metrics" / "metrics.go",
    }
    texts = {k: v.read_text() for k, v in files.items()}
    assert 'namespace = "apiserver"' in texts[ext.APISERVER_SOURCE]
    assert 'subsystem = "admission"' in texts[ext.APISERVER_SOURCE]
    for metric in (*ext.APISERVER, *ext.KUEUE):
        kind, labels, block = declared_in_go(texts[metric.source], metric)
        assert kind == metric.type, f"{metric.name}: {kind} in {metric.source}"
        assert tuple(labels) == metric.labels, f"{metric.name}: labels {labels} in {metric.source}"
        if metric.source == ext.KUEUE_SOURCE:
            assert re.search(r"Subsystem:\s*constants.KueueName,", block), f"{metric.name}: not kueue_"
            assert metric.name == f"kueue_{metric.short}"
        else:
            assert re.search(r"Subsystem:\s*subsystem,", block), f"{metric.name}: not apiserver_admission_"
            assert metric.name == f"apiserver_admission_{metric.short}"


def test_the_allow_listed_dcgm_series_are_dcgm_exporters_default_counters() -> None:
    """dcgm-exporter is no Go module the e2e build pins (the module proxy does not serve it): its
    entries are checked against e2e/dcgm/default-counters.csv, the file at the pinned tag by git
    blob id, and the labels e2e/dcgm_fake.py renders as that tag's render_metrics.go does."""
    assert dcgm_fake.blob_id(dcgm_fake.CSV.read_bytes()) == dcgm_fake.CSV_BLOB
    assert f"NVIDIA/dcgm-exporter@{dcgm_fake.DCGM_TAG} etc/default-counters.csv" == ext.DCGM_SOURCE
    counters = dcgm_fake.default_counters()
    label_fields = tuple(sorted(name for name, (kind, _) in counters.items() if kind == "label"))
    assert label_fields == ("DCGM_FI_DRIVER_VERSION",)
    labels = (*dcgm_fake.GPU_LABELS, *label_fields, *dcgm_fake.POD_ATTRIBUTES)
    for metric in ext.DCGM:
        assert counters[metric.name][0] == metric.type, metric.name
        assert metric.labels == labels, metric.name
        assert metric.sample_names() == {metric.name}, "dcgm-exporter adds no _total"
