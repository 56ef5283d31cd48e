"""The scale scenario (``make e2e-scale``): thousands of Nodes, tens of thousands of Pods, real API server.

Not under tests/e2e, so ``make e2e`` and CI never run it. The marker is registered here because the
directory owns it (pyproject's ``--strict-markers`` catches typos).
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e_scale: builds a cluster-sized world on kube-apiserver/etcd from e2e/build-binaries.sh and "
        "runs tasgate against it; fails (never skips) when the binaries are missing",
    )
