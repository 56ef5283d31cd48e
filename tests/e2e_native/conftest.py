"""Native v1.36.5 gang + topology scheduling (``make e2e-native``): one cluster for the whole table.

Not under tests/e2e, so ``make e2e`` does not run it. The marker is registered here because the
directory owns it (pyproject's ``--strict-markers`` catches typos).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.controlplane import find_binaries
from e2e.native import NativeCluster, find_native_binaries, native_control_plane
from e2e.native_world import NativeWorld
from tests.e2e_cluster.binaries import require


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e_native: runs kube-apiserver, kube-controller-manager and the upstream kube-scheduler v1.36.5 "
        "with the native gang gates and kwok (`e2e/build-binaries.sh native`); fails, never skips, "
        "when they are missing",
    )


@pytest.fixture(scope="session")
def world() -> Iterator[NativeWorld]:
    """The control plane with the four gates, kcm, kwok and the scheduler, nodes and blockers built."""
    require(find_binaries, find_native_binaries)
    with native_control_plane() as cp, NativeCluster(cp) as cluster:
        built = NativeWorld(cp, cluster)
        built.build()
        cp.kubectl("create", "namespace", "table")
        yield built
