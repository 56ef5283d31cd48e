"""The Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule), pinned in
e2e/tools/prometheus-operator/go.mod and read in place from the Go module cache, so the
monitoring overlay can be dry-run by a real API server against the real schemas.

Nothing is built: the Operator is never run. ``go mod download`` fetches the module once (about
27 MB); afterwards it is offline.
"""

from __future__ import annotations

import functools
from pathlib import Path

from e2e.controlplane import TOOLS_DIR, ControlPlaneError, required_version
from e2e.kueue_source import downloaded_module

MODULE = "github.com/prometheus-operator/prometheus-operator"
PIN_DIR = TOOLS_DIR / "prometheus-operator"
CRD_DIR = Path("example") / "prometheus-operator-crd"
CRDS = ("monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")


def pinned_version() -> str:
    return required_version(PIN_DIR / "go.mod", MODULE)


@functools.cache
def module_dir() -> Path:
    """The pinned module's directory in the module cache, as ``go mod download -json`` reports it."""
    return downloaded_module(MODULE, pinned_version(), PIN_DIR)


def crd_files() -> list[Path]:
    """The ServiceMonitor and PrometheusRule CRDs of the pinned Operator."""
    files = [module_dir() / CRD_DIR / name for name in CRDS]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ControlPlaneError(f"{MODULE}@{pinned_version()} has no {', '.join(missing)}")
    return files
