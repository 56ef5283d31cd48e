"""The live tracker: watch events in, states, predictions, Events and the lifecycle metrics out.

Fed with objects as the real components leave them (``manifests/lifecycle`` and
``manifests/kueue_stored``, captured from real runs); the API server is not involved: Events are
read off the recorder's queue, metrics off the registry, as Prometheus would scrape them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from webhook.cli.status import age, table
from webhook.decide.policy import Policy, PolicyError
from webhook.decide.policy_text import parse_policy
from webhook.files.policy import load_policy
from webhook.live.events import EventRecorder, GangEvent, ObjectRef, event_name
from webhook.live.holder import StateHolder
from webhook.live.tracked import GANG_PODGROUPS, GANG_PODS, WORKLOADS
from webhook.live.tracker import Tracker
from webhook.live.watch import Collected
from webhook.serve.app import create_app, create_metrics_app
from webhook.serve.keys import Settings, StateSource
from webhook.serve.lifecycle_metrics import LifecycleMetrics
from webhook.state.cluster import build_state
from webhook.track.compare import Comparison
from webhook.track.fields import timestamp

from .conftest import HOST, MANIFESTS, kueue_objects, node

LIFECYCLE = MANIFESTS / "lifecycle"
STORED = MANIFESTS / "kueue_stored"
BLOCK, RACK = "topology.example.com/block", "topology.example.com/rack"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _capture_time() -> float:
    stamps = [timestamp(w.strip("'\"")) for w in (LIFECYCLE / "pods.yaml").read_text().split()]
    return max(s for s in stamps if s is not None)


def _capture_state(generation: int = 1) -> Any:
    """kueue_stored's world: 2 racks × 4 8-GPU nodes n0 … n7 (pool gpu), queue gpu-queue."""
    nodes = [node(f"n{i}", {"pool": "gpu", BLOCK: "b0", RACK: f"b0-r{i // 4}"}) for i in range(8)]
    queues = kueue_objects(
        (BLOCK, RACK, HOST),
        {"gpu-flavor": {"pool": "gpu"}},
        "gpu-topology",
        "gpu-queue",
        "kueue-capture",
        "gpu-cq",
    )
    return build_state([*nodes, *queues], generation=generation)


class Recorder(EventRecorder):
    """The real recorder (deduplication, queue) with the queue read instead of posted."""

    def __init__(self) -> None:
        super().__init__(api=None)  # type: ignore[arg-type]

    def queued(self) -> list[GangEvent]:
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out


def _policy(partial: str = "5s") -> Policy:
    return parse_policy(
        f"apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\nspec:\n  partialStartAfter: {partial}\n",
        "p",
    )


def _fed(
    clock: float, events: Recorder | None = None, comparisons: list[Comparison] | None = None
) -> Tracker:
    holder = StateHolder()
    found = comparisons if comparisons is not None else []
    tracker = Tracker(holder, _policy, events, found.append, clock=lambda: clock)
    tracker.replace(WORKLOADS, _docs(LIFECYCLE / "workloads.yaml"))
    tracker.replace(GANG_PODS, _docs(LIFECYCLE / "pods.yaml"))
    tracker.replace(GANG_PODGROUPS, _docs(LIFECYCLE / "podgroups.yaml"))
    return tracker


async def test_one_event_per_state_change_on_the_owner_with_the_workload_related() -> None:
    events = Recorder()
    tracker = _fed(_capture_time() + 60, events)
    await tracker.step()
    await tracker.step()  # another round in the same state: nothing new
    (event,) = events.queued()
    assert (event.reason, event.type, event.regarding.kind, event.regarding.name) == (
        "PartialStart", "Warning", "Job", "partial"
    )  # fmt: skip
    assert event.related is not None and event.related.kind == "Workload"
    body = events.body(event)
    assert body["reportingController"] == "tasgate.io/lifecycle" and body["regarding"]["uid"]
    assert body["metadata"]["name"].startswith("partial.") and body["note"].startswith("2 of 4 pods running")


async def test_lifecycle_metrics_as_scraped() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    tracker = _fed(_capture_time() + 60)
    metrics.follow(tracker.rows, tracker.counts)
    await tracker.step()
    text = generate_latest(registry).decode()
    assert 'tasgate_gangs{cluster_queue="cpu-cq",namespace="gangs",state="partial_start"} 1.0' in text
    assert 'tasgate_gangs{cluster_queue="cpu-cq",namespace="gangs",state="running"} 0.0' in text
    assert 'tasgate_gangs{cluster_queue="gpu-cq",namespace="gangs",state="running"} 1.0' in text
    series = [line for line in text.splitlines() if line.startswith("tasgate_gang_state_seconds{")]
    assert len(series) == 3 and any(
        'name="run"' in s and 'state="running"' in s and 'workload="job-run-' in s for s in series
    )
    assert 'tasgate_predictions_total{reason="none",result="agree"} 0.0' in text
    assert 'tasgate_predictions_total{reason="domain",result="disagree"} 0.0' in text


async def test_a_finished_gang_has_no_state_series_but_is_counted() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    tracker = _fed(_capture_time() + 60)
    metrics.follow(tracker.rows, tracker.counts)
    run = next(
        o for o in _docs(LIFECYCLE / "workloads.yaml") if o["metadata"]["ownerReferences"][0]["name"] == "run"
    )
    finished = copy.deepcopy(run)
    finished["status"]["conditions"].append(
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully",
         "lastTransitionTime": "2026-12-01T12:00:00Z"}
    )  # fmt: skip
    tracker.apply(WORKLOADS, "MODIFIED", finished)
    await tracker.step()
    text = generate_latest(registry).decode()
    assert 'tasgate_gangs{cluster_queue="gpu-cq",namespace="gangs",state="finished"} 1.0' in text
    assert not [
        s for s in text.splitlines() if s.startswith("tasgate_gang_state_seconds{") and 'name="run"' in s
    ]
    tracker.apply(WORKLOADS, "DELETED", finished)
    await tracker.step()
    assert 'state="finished"} 1.0' not in generate_latest(registry).decode()


async def test_an_admission_is_compared_with_the_prediction_on_the_state_of_that_moment() -> None:
    comparisons: list[Comparison] = []
    events = Recorder()
    tracker = Tracker(StateHolder(), _policy, events, comparisons.append, clock=lambda: 0.0)
    tracker.holder.publish(_capture_state())
    admitted = _docs(STORED / "job-workload.yaml")[0]
    queued = copy.deepcopy(admitted)
    del queued["status"]["admission"]
    queued["status"]["conditions"] = []
    tracker.replace(WORKLOADS, [queued])
    await tracker.step()
    tracker.apply(WORKLOADS, "MODIFIED", admitted)
    tracker.holder.publish(build_state([], generation=2))  # what changes later does not count
    await tracker.step()
    assert [(c.result, c.reason) for c in comparisons] == [("agree", "none")]
    assert events.queued() == [] and tracker.ledger.specs == {}  # the templates are dropped


async def test_a_mismatch_is_counted_by_reason_and_is_an_event() -> None:
    comparisons: list[Comparison] = []
    events = Recorder()
    tracker = Tracker(StateHolder(), _policy, events, comparisons.append, clock=lambda: 0.0)
    tracker.holder.publish(_capture_state())
    admitted = _docs(STORED / "job-workload.yaml")[0]
    queued = copy.deepcopy(admitted)
    del queued["status"]["admission"]
    tracker.replace(WORKLOADS, [queued])
    elsewhere = copy.deepcopy(admitted)
    roots = elsewhere["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0]
    roots["valuesPerLevel"][0]["individual"]["roots"] = ["4", "5", "6", "7"]
    tracker.apply(WORKLOADS, "MODIFIED", elsewhere)
    await tracker.step()
    assert [(c.result, c.reason) for c in comparisons] == [("disagree", "domain")]
    (event,) = events.queued()
    assert event.reason == "PredictionMismatch" and "Kueue placed n4×1 n5×1 n6×1 n7×1" in event.note


def test_events_are_deduplicated_and_a_full_queue_drops() -> None:
    results: list[str] = []
    recorder = EventRecorder(api=None, record=results.append, queue_limit=1)  # type: ignore[arg-type]
    ref = ObjectRef("batch/v1", "Job", "ns", "j", "u")
    recorder.emit(GangEvent(ref, None, "PartialStart", "Track", "2 of 4"))
    recorder.emit(GangEvent(ref, None, "PartialStart", "Track", "2 of 4"))
    recorder.emit(GangEvent(ref, None, "CapacityLost", "Track", "gone"))
    assert results == ["deduplicated", "dropped"] and recorder.queue.qsize() == 1


def test_partial_start_after_is_a_validated_duration() -> None:
    assert _policy("1m30s").partial_start_after == 90.0
    assert (
        parse_policy("apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\n", "p").partial_start_after
        == 300.0
    )
    for bad in ("5", "0s", "1h 2m", "200h", "[]"):
        with pytest.raises(PolicyError, match=r"spec\.partialStartAfter"):
            _policy(bad)


async def test_status_table_reads_like_kubectl() -> None:
    tracker = _fed(_capture_time() + 60)
    await tracker.step()
    lines = table(tracker.current, _capture_time() + 60).splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "KIND", "QUEUE", "STATE", "REASON", "AGE"]
    rows = {line.split()[1]: line.split()[2:6] for line in lines[1:]}
    assert rows == {
        "partial": ["Job", "cpu-queue", "partial_start", "PartialStart"],
        "run": ["Job", "gpu-queue", "running", "AllRunning"],
        "wide": ["Job", "gpu-queue", "waiting_quota", "Pending"],  # no cluster state: Kueue's word
    }
    assert table([], 0.0) == "No gangs found."
    assert [age(s) for s in (None, 5, 119, 600, 7300, 200000)] == [
        "<unknown>",
        "5s",
        "119s",
        "10m",
        "2h",
        "2d",
    ]


def test_replicas_name_one_occurrence_alike() -> None:
    ref = ObjectRef("batch/v1", "Job", "ns", "j", "u")
    first = GangEvent(
        ref, None, "PartialStart", "Track", "2 of 4, pending 31s", episode="partial_start:100.0"
    )
    later = GangEvent(
        ref, None, "PartialStart", "Track", "2 of 4, pending 32s", episode="partial_start:100.0"
    )
    again = GangEvent(
        ref, None, "PartialStart", "Track", "2 of 4, pending 31s", episode="partial_start:900.0"
    )
    # Two replicas' recorders, as they post: the body's name is the occurrence's, not the moment's.
    one, other = EventRecorder(api=None), EventRecorder(api=None)  # type: ignore[arg-type]
    named = [r.body(e)["metadata"]["name"] for r, e in ((one, first), (other, later), (other, again))]
    assert named[0] == named[1] == event_name(first) != named[2]
    assert named[0].startswith("j.") and len(named[0]) == len("j.") + 16


async def test_the_served_metrics_port_exports_the_lifecycle_metrics(aiohttp_client: Any) -> None:
    """The app production runs registers them on the /metrics registry (empty without live mode)."""
    app = create_app(
        Settings(policy=load_policy("default")), lambda line: None, StateSource(objects=[], label="t")
    )
    text = await (await (await aiohttp_client(create_metrics_app(app))).get("/metrics")).text()
    for family in (
        "tasgate_gangs gauge",
        "tasgate_gang_state_seconds gauge",
        "tasgate_predictions_total counter",
    ):
        assert f"# TYPE {family}" in text
    assert 'tasgate_predictions_total{reason="none",result="agree"} 0.0' in text


def test_a_paged_pod_list_keeps_records_only_and_equals_the_whole_list() -> None:
    whole = _fed(_capture_time())
    paged = _fed(_capture_time())
    pods = _docs(LIFECYCLE / "pods.yaml")
    pages = paged.listing(GANG_PODS)
    for start in range(0, len(pods), 2):
        pages.add(pods[start : start + 2])
    assert not isinstance(pages, Collected), "pods are parsed page by page, never kept as objects"
    paged.ledger.pods = {}
    paged.commit(pages)
    assert paged.ledger.pods == whole.ledger.pods and paged.ledger.pods
    assert isinstance(paged.listing(WORKLOADS), Collected)
