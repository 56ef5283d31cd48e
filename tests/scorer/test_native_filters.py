"""The native mode's node filters are the kube-scheduler's, not Kueue's TAS exclusions.

Both cases were found on the real kube-scheduler v1.36.5 (the adversarial e2e run of 2026-12-02):
a PreferNoSchedule taint only scores, so tasgate denied a gang the scheduler bound (a false
denial); a cordoned node takes pods tolerating ``node.kubernetes.io/unschedulable``, so tasgate
said "waits" where the scheduler bound at once.
"""

from __future__ import annotations

import pytest

from scorer.model import Node, Taint, Toleration
from scorer.native import NativeRequest, native_engines, place_native

ENGINES = sorted(native_engines())
GPU = "nvidia.com/gpu"
ALLOC = {"cpu": 32000, "memory": 256 << 30, "pods": 110, GPU: 8}


def _rack(taints: tuple[Taint, ...] = (), unschedulable: bool = False) -> list[Node]:
    return [Node(f"h{i}", {"rack": "r"}, ALLOC, taints, unschedulable=unschedulable) for i in range(4)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("effect", "fits"), [("PreferNoSchedule", True), ("NoSchedule", False)])
def test_only_noschedule_and_noexecute_taints_keep_pods_off(engine: str, effect: str, fits: bool) -> None:
    req = NativeRequest("g", 7, 7, {GPU: 4}, "rack")
    found = place_native(
        _rack((Taint("dedicated", effect, "gpu"),)), req, None, False, native_engines()[engine]
    )
    assert found.fits is fits


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ((Toleration(operator="Exists"),), True),
        ((Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),), True),
        ((Toleration("dedicated", "Exists"),), False),
        ((), False),
    ],
)
def test_a_cordoned_node_takes_pods_that_tolerate_the_unschedulable_taint(
    engine: str, tolerations: tuple[Toleration, ...], fits: bool
) -> None:
    req = NativeRequest("g", 7, 7, {GPU: 4}, "rack", tolerations=tolerations)
    found = place_native(_rack(unschedulable=True), req, None, False, native_engines()[engine])
    assert found.fits is fits
