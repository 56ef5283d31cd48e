"""Gang start-up time, split into phases, from the objects' own timestamps (not when tasgate saw them)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from webhook.live.holder import StateHolder
from webhook.live.tracked import GANG_PODS, WORKLOADS
from webhook.live.tracker import Tracker
from webhook.serve.gang_metrics import PHASE_BUCKETS
from webhook.serve.lifecycle_metrics import LifecycleMetrics
from webhook.track.classify import Gang
from webhook.track.phases import phases
from webhook.track.records import parse_pod, parse_workload

from .test_tracker import _capture_state, _policy

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def _at(seconds: float) -> str:
    return datetime.fromtimestamp(T0 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _workload(admitted: float | None = 7) -> dict[str, Any]:
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": _at(5)}]
    if admitted is not None:
        conditions.append({"type": "Admitted", "status": "True", "lastTransitionTime": _at(admitted)})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": "gangs", "name": "wl", "uid": "u1", "creationTimestamp": _at(0)},
        "spec": {"queueName": "gpu-queue", "podSets": [{"name": "main", "count": 3}]},
        "status": {
            "conditions": conditions,
            "admission": {
                "clusterQueue": "gpu-cq",
                "podSetAssignments": [{"name": "main", "count": 3, "flavors": {"cpu": "gpu-flavor"}}],
            },
        },
    }


def _pod(i: int, scheduled: float | None, ready: float | None) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _at(scheduled)})
    if ready is not None:
        conditions.append({"type": "ContainersReady", "status": "True", "lastTransitionTime": _at(ready)})
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": _at(ready + 100)})
    return {
        "metadata": {
            "namespace": "gangs",
            "name": f"p{i}",
            "creationTimestamp": _at(8),
            "labels": {"kueue.x-k8s.io/podset": "main"},
            "annotations": {"kueue.x-k8s.io/workload": "wl"},
        },
        "spec": {"nodeName": f"n{i}"} if scheduled is not None else {},
        "status": {"phase": "Running" if ready is not None else "Pending", "conditions": conditions},
    }


PODS = [_pod(0, 9, 20), _pod(1, 12, 50), _pod(2, 10, 35)]


def test_each_phase_is_read_off_the_objects_timestamps() -> None:
    gang = Gang(parse_workload(_workload()), tuple(parse_pod(p) for p in PODS))
    found = phases(gang)
    # created 0 → Admitted 7 → last PodScheduled 12 → last ContainersReady 50 (Ready is later: not used)
    assert dict(found.seconds) == {"queued": 7.0, "assembling": 5.0, "starting": 38.0}
    assert found.partial_start == 30.0  # first pod ran at 20, the third (every admitted pod) at 50


def test_a_phase_whose_end_has_not_happened_is_not_measured() -> None:
    pods = [_pod(0, 9, 20), _pod(1, 12, None), _pod(2, None, None)]
    found = phases(Gang(parse_workload(_workload()), tuple(parse_pod(p) for p in pods)))
    assert dict(found.seconds) == {"queued": 7.0} and found.partial_start is None
    # QuotaReserved stands for admission when Admitted is not there yet
    assert dict(phases(Gang(parse_workload(_workload(admitted=None)))).seconds) == {"queued": 5.0}


def _tracker(clock: float, registry: CollectorRegistry, pods: list[dict[str, Any]]) -> Tracker:
    metrics = LifecycleMetrics(registry)
    holder = StateHolder()
    holder.publish(_capture_state())
    tracker = Tracker(holder, _policy, clock=lambda: clock, observed=metrics.gangs.observe)
    tracker.replace(WORKLOADS, [_workload()])
    tracker.replace(GANG_PODS, pods)
    return tracker


def _series(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    wanted = ("tasgate_gang_phase_seconds_", "tasgate_gang_partial")
    return [s for s in text.splitlines() if s.startswith(wanted) and "_created{" not in s]


async def test_each_phase_is_observed_once_and_a_later_start_measures_the_same() -> None:
    registry = CollectorRegistry()
    tracker = _tracker(T0 + 60, registry, [_pod(0, 9, 20), _pod(1, 12, None), _pod(2, 10, None)])
    await tracker.step()
    series = _series(registry)
    assert 'tasgate_gang_phase_seconds_count{cluster_queue="gpu-cq",phase="queued"} 1.0' in series
    assert 'tasgate_gang_phase_seconds_sum{cluster_queue="gpu-cq",phase="assembling"} 5.0' in series
    assert not any('phase="starting"' in s for s in series)
    tracker.replace(GANG_PODS, PODS)  # every pod runs now
    await tracker.step()
    await tracker.step()
    series = _series(registry)
    for phase, total in (("queued", 7.0), ("assembling", 5.0), ("starting", 38.0)):
        assert f'tasgate_gang_phase_seconds_count{{cluster_queue="gpu-cq",phase="{phase}"}} 1.0' in series
        assert f'tasgate_gang_phase_seconds_sum{{cluster_queue="gpu-cq",phase="{phase}"}} {total}' in series
    assert 'tasgate_gang_partial_start_seconds_sum{cluster_queue="gpu-cq"} 30.0' in series
    # a tasgate started an hour later (a restart) sees the same objects and measures the same times
    later = CollectorRegistry()
    await _tracker(T0 + 3600, later, PODS).step()
    assert _series(later) == series


def test_phase_buckets_go_from_sub_second_to_hours() -> None:
    assert PHASE_BUCKETS[0] < 1 and PHASE_BUCKETS[-1] >= 6 * 3600
    assert list(PHASE_BUCKETS) == sorted(PHASE_BUCKETS)
