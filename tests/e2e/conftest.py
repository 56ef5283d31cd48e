"""End-to-end tests against a real kube-apiserver + etcd (see e2e/README.md).

The ``e2e`` marker is registered here rather than in pyproject.toml so the suite's own directory
owns it; ``--strict-markers`` (pyproject addopts) then still catches typos. Select with ``-m e2e``.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: runs real kube-apiserver/etcd/kubectl built by e2e/build-binaries.sh; fails (never skips) "
        "when they are missing",
    )


# The fault suite (test_faults.py) leaves its table here; printed after the run, whatever -s says.
FAULT_TABLE = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    table = config.stash.get(FAULT_TABLE, None)
    if table:
        terminalreporter.write_sep("=", "fault suite")
        terminalreporter.write_line(table)
