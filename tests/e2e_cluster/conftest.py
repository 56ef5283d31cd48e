"""Cluster tests: kube-controller-manager, kwok, the Coscheduling scheduler, Kueue (``make e2e-cluster``).

Not under tests/e2e, so ``make e2e`` does not run them; ``.ci/run`` runs ``make e2e-cluster`` after it.
The marker is registered here because the
directory owns it (pyproject's ``--strict-markers`` catches typos).
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e_cluster: runs kwok, kube-controller-manager and the scheduler-plugins scheduler built by "
        "`e2e/build-binaries.sh cluster`; fails (never skips) when they are missing",
    )
