"""How the end-to-end suites start `tasgate serve` in live mode against the control plane."""

from __future__ import annotations

import sys
from pathlib import Path

TASGATE = Path(sys.executable).with_name("tasgate")
LEASE_NAMESPACE = "default"


def serve_argv(kubeconfig: Path, port: int, metrics_port: int, cert_dir: Path, stale_after: str) -> list[str]:
    """``tasgate serve`` watching the API server of ``kubeconfig``, with development certificates.

    Leader election is on, as in production; its Lease goes to ``default`` (the control plane has
    no tasgate-system namespace): until it holds the Lease, a replica writes no PodGroup or Event.
    ``tasgate_pod_info`` is on (``--pod-info-metrics``), as a cluster with GPU rules has it, so
    the real Prometheus of the suites joins it (tests/e2e/test_gpu_signals.py).
    """
    return [
        str(TASGATE),
        "serve",
        "--kubeconfig",
        str(kubeconfig),
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        "--dev-cert-dir",
        str(cert_dir),
        "--stale-after",
        stale_after,
        "--lease-namespace",
        LEASE_NAMESPACE,
        "--pod-info-metrics",
    ]
