"""The Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule), pinned in
e2e/tools/prometheus-operator/go.mod and read in place from the Go module cache, so the
monitoring overlay can be dry-run by a real API server against the real schemas.

Nothing is built: the Operator is never run. ``go mod download`` fetches the module once (about
27 MB); afterwards it is offline.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

from e2e.controlplane import TOOLS_DIR, ControlPlaneError, required_version
from e2e.kueue import go_command

MODULE = "github.com/prometheus-operator/prometheus-operator"
PIN_DIR = TOOLS_DIR / "prometheus-operator"
CRD_DIR = Path("example") / "prometheus-operator-crd"
CRDS = ("monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")


def pinned_version() -> str:
    return required_version(PIN_DIR / "go.mod", MODULE)


@functools.cache
def module_dir() -> Path:
    """The pinned module's directory in the module cache, as ``go mod download -json`` reports it."""
    argv = [go_command(), "mod", "download", "-json", f"{MODULE}@{pinned_version()}"]
    env = dict(os.environ, GOTOOLCHAIN="local")
    try:
        done = subprocess.run(
            argv, cwd=PIN_DIR, capture_output=True, text=True, env=env, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ControlPlaneError(f"{' '.join(argv)} failed: {exc}") from exc
    try:
        info = json.loads(done.stdout)
    except json.JSONDecodeError:
        info = {}
    directory = info.get("Dir")
    if done.returncode != 0 or info.get("Error") or not directory:
        detail = info.get("Error") or done.stderr.strip() or done.stdout.strip()
        raise ControlPlaneError(f"{' '.join(argv)} (in {PIN_DIR}) exited {done.returncode}: {detail}")
    return Path(directory)


def crd_files() -> list[Path]:
    """The ServiceMonitor and PrometheusRule CRDs of the pinned Operator."""
    files = [module_dir() / CRD_DIR / name for name in CRDS]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ControlPlaneError(f"{MODULE}@{pinned_version()} has no {', '.join(missing)}")
    return files
