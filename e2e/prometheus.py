"""A real Prometheus (Debian's `prometheus` package; `hack/ensure-promtool.sh` installs it with
promtool) scraping tasgate every second and evaluating the monitoring overlay's rules, so the
e2e suite asks the dashboard's queries of the server that answers them in production. It can
also scrape the e2e kube-apiserver's /metrics (``apiserver_job``), as a cluster's Prometheus
does, so the API server's webhook series the alerts read are proven under their names.

Missing binary: ``PrometheusError`` saying how to install it, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from e2e.controlplane import ControlPlane, ServerProcess, free_ports
from webhook.serve import certs

INSTALL = "bash hack/ensure-promtool.sh"
# The API server's bootstrap RBAC grants group system:monitoring GET /metrics (ClusterRole and
# ClusterRoleBinding system:monitoring), the least a scraper needs: no role of ours to create.
MONITORING_GROUP = "system:monitoring"
APISERVER_JOB = "apiserver"


class PrometheusError(RuntimeError):
    """Prometheus is missing, did not start, or answered with an error."""


def find_prometheus() -> str:
    found = shutil.which(os.environ.get("PROMETHEUS", "prometheus"))
    if found is None:
        raise PrometheusError(f"prometheus is not installed: run `{INSTALL}` (Debian's prometheus package)")
    return found


def apiserver_job(cp: ControlPlane, directory: Path) -> dict[str, Any]:
    """A scrape config for ``cp``'s API server over HTTPS with a client certificate of user
    ``tasgate-e2e-prometheus`` in group system:monitoring (signed by the control plane's CA)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = certs.client_cert(
        directory, cp.ca, "tasgate-e2e-prometheus", [MONITORING_GROUP], name="prometheus", days=2
    )
    return {
        "job_name": APISERVER_JOB,
        "scheme": "https",
        "metrics_path": "/metrics",
        "tls_config": {"ca_file": str(cp.ca_path), "cert_file": str(cert), "key_file": str(key)},
        "static_configs": [{"targets": [cp.server.removeprefix("https://")]}],
    }


class Prometheus:
    """``prometheus`` on a free loopback port, scraping ``targets`` (host:port) as job ``tasgate``
    with ``honor_labels`` (as the ServiceMonitor does) and any ``extra_jobs`` (scrape configs),
    ``rules`` loaded; files under ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        rules: dict[str, Any],
        extra_jobs: list[dict[str, Any]] | None = None,
    ) -> None:
        self.dir = workdir / "prometheus"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.port,) = free_ports(1)
        (self.dir / "rules.yaml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(self.dir / "rules.yaml")],
            "scrape_configs": [
                {"job_name": "tasgate", "honor_labels": True, "static_configs": [{"targets": targets}]},
                *(extra_jobs or []),
            ],
        }
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self._process = ServerProcess("prometheus", self.dir / "prometheus.log")

    def __enter__(self) -> Prometheus:
        argv = [
            find_prometheus(),
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        self._process.start(argv, dict(os.environ))
        self.wait("Prometheus to be ready", lambda: self._get("/-/ready") is not None, 30)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._process.stop()

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one row) ``expr`` evaluates to now; an error raises."""
        body = self._api("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        result = body["data"]["result"]
        return result if isinstance(result, list) else [{"value": result}]

    def metric_names(self, job: str | None = None) -> set[str]:
        """Every stored metric name, or those of one scrape job."""
        query = "" if job is None else "?" + urllib.parse.urlencode({"match[]": f'{{job="{job}"}}'})
        return set(self._api(f"/api/v1/label/__name__/values{query}")["data"])

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets, with ``health`` and ``lastError``."""
        active: list[dict[str, Any]] = self._api("/api/v1/targets?state=active")["data"]["activeTargets"]
        return active

    def rules(self) -> list[dict[str, Any]]:
        groups = self._api("/api/v1/rules")["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def wait(self, what: str, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if not self._process.running():
                raise PrometheusError(f"prometheus exited:\n{self._process.output_since_start()[-3000:]}")
            if time.monotonic() > deadline:
                raise PrometheusError(f"timed out after {timeout:g}s waiting for {what}")
            time.sleep(0.5)

    def _api(self, path: str) -> dict[str, Any]:
        raw = self._get(path)
        if raw is None:
            raise PrometheusError(f"GET {path}: no answer")
        body: dict[str, Any] = json.loads(raw)
        if body.get("status") != "success":
            raise PrometheusError(f"GET {path}: {body.get('errorType')}: {body.get('error')}")
        return body

    def _get(self, path: str) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                text: str = r.read().decode()
                return text
        except urllib.error.HTTPError as exc:
            text = exc.read().decode()
            return text if exc.code in (400, 422) else None  # the API's error bodies are JSON
        except OSError:
            return None
