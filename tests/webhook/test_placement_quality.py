"""Placement quality of running gangs: the domains their pods occupy, against what they asked for.

The captured gang ``run`` (a Job, 2 pods, ``required: rack``, on n0 and n1 of rack b0-r0) as the
real components left it; moved pods and a preferred request are edits of those objects, as a pod
recreated outside Kueue's assignment or a PyTorchJob asking ``preferred`` would leave them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from webhook.cli.status import domains_of, table
from webhook.live.holder import StateHolder
from webhook.live.tracked import GANG_PODGROUPS, GANG_PODS, WORKLOADS
from webhook.live.tracker import Tracker
from webhook.present.running import RunningGang, with_running
from webhook.serve.gang_metrics import running_rows
from webhook.serve.lifecycle_metrics import LifecycleMetrics
from webhook.track.quality import placement
from webhook.track.records import parse_pod, parse_workload

from .test_tracker import BLOCK, LIFECYCLE, RACK, Recorder, _capture_state, _capture_time, _docs, _policy

HOSTS = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOSTS)
LABELS = {f"n{i}": {BLOCK: "b0", RACK: f"b0-r{i // 4}", HOSTS: f"n{i}"} for i in range(8)}


def _objects(request: dict[str, str] | None = None, nodes: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """The captured workloads and pods; ``run``'s topologyRequest replaced, its pods moved."""
    workloads, pods = _docs(LIFECYCLE / "workloads.yaml"), _docs(LIFECYCLE / "pods.yaml")
    for w in workloads:
        if w["metadata"]["name"].startswith("job-run-") and request is not None:
            w["spec"]["podSets"][0]["topologyRequest"] = request
    run = [p for p in pods if p["metadata"]["name"].startswith("run-")]
    for p, name in zip(run, nodes, strict=False):
        p["spec"]["nodeName"] = name
    return workloads, pods


def _tracker(request: dict[str, str] | None = None, nodes: tuple[str, ...] = (), events: Any = None) -> Any:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    clock = _capture_time() + 60
    tracker = Tracker(_holder(), _policy, events, clock=lambda: clock, observed=metrics.gangs.observe)
    workloads, pods = _objects(request, nodes)
    tracker.replace(WORKLOADS, workloads)
    tracker.replace(GANG_PODS, pods)
    tracker.replace(GANG_PODGROUPS, _docs(LIFECYCLE / "podgroups.yaml"))
    metrics.follow(tracker.rows, tracker.counts, tracker.placed)
    return tracker, registry, metrics


def _holder() -> StateHolder:
    holder = StateHolder()
    holder.publish(_capture_state())
    return holder


def _run(workloads: Any, pods: Any) -> tuple[Any, list[Any]]:
    wl = next(parse_workload(w) for w in workloads if w["metadata"]["name"].startswith("job-run-"))
    return wl, [parse_pod(p) for p in pods if p["metadata"]["name"].startswith("run-")]


def test_a_required_gang_in_one_rack_is_met_and_its_domains_are_counted_per_level() -> None:
    wl, pods = _run(*_objects())
    where = placement(wl, pods, LEVELS, LABELS)
    assert where is not None
    assert (where.mode, where.result, where.fits_level) == ("required", "met", RACK)
    assert dict(where.spanned) == {BLOCK: 1, RACK: 1, HOSTS: 2}
    assert where.text(LEVELS) == "block=b0 rack=b0-r0"


def test_a_required_gang_whose_pods_left_its_rack_is_violated() -> None:
    wl, pods = _run(*_objects(nodes=("n0", "n4")))
    where = placement(wl, pods, LEVELS, LABELS)
    assert where is not None and (where.result, where.fits_level) == ("violated", BLOCK)
    assert "b0-r0, b0-r1" in where.detail and dict(where.spanned)[RACK] == 2


def test_a_preferred_gang_that_spread_counts_spread_at_the_level_that_holds_it() -> None:
    wl, pods = _run(*_objects({"preferred": RACK}, ("n0", "n4")))
    where = placement(wl, pods, LEVELS, LABELS)
    assert where is not None and (where.mode, where.result, where.fits_level) == (
        "preferred",
        "spread",
        BLOCK,
    )
    wl, pods = _run(*_objects({"preferred": RACK}))
    met = placement(wl, pods, LEVELS, LABELS)
    assert met is not None and met.result == "met"


def test_an_unconstrained_gang_has_spans_and_no_verdict_and_no_topology_no_placement() -> None:
    wl, pods = _run(*_objects({"unconstrained": "true"}, ("n0", "n4")))
    where = placement(wl, pods, LEVELS, LABELS)
    assert where is not None and (where.mode, where.result) == ("unconstrained", None)
    assert placement(wl, pods, (), LABELS) is None


async def test_the_tracker_counts_a_running_gang_once_with_its_spans() -> None:
    tracker, registry, _ = _tracker()
    await tracker.step()
    await tracker.step()  # the same gang, still running: not counted again
    text = generate_latest(registry).decode()
    rack = f'level="{RACK}",mode="required"'
    assert f'tasgate_gang_domains_spanned_bucket{{le="1.0",{rack}}} 1.0' in text
    assert f"tasgate_gang_domains_spanned_count{{{rack}}} 1.0" in text
    assert f'tasgate_gang_domains_spanned_sum{{level="{HOSTS}",mode="required"}} 2.0' in text
    assert f'tasgate_gang_topology_met_total{{level="{RACK}",mode="required",result="met"}} 1.0' in text


async def test_a_gang_running_before_the_state_loads_is_placed_once_it_does() -> None:
    """tasgate started while the gang already ran: the tracker's first rounds come before the
    cluster state is published; the placement waits for it instead of being given up."""
    tracker, registry, _ = _tracker()
    loaded = tracker.holder.current
    tracker.holder.current = None
    await tracker.step()
    assert "tasgate_gang_domains_spanned_count{" not in generate_latest(registry).decode()
    tracker.holder.current = loaded
    tracker.dirty.set()
    await tracker.step()
    assert f'tasgate_gang_domains_spanned_count{{level="{RACK}",mode="required"}} 1.0' in (
        generate_latest(registry).decode()
    )


async def test_a_violated_required_topology_is_counted_and_raises_one_event() -> None:
    events = Recorder()
    tracker, registry, _ = _tracker(nodes=("n0", "n4"), events=events)
    await tracker.step()
    await tracker.step()
    text = generate_latest(registry).decode()
    assert f'tasgate_gang_topology_met_total{{level="{RACK}",mode="required",result="violated"}} 1.0' in text
    violated = [e for e in events.queued() if e.reason == "TopologyViolated"]
    assert len(violated) == 1 and violated[0].regarding.name == "run"
    assert "b0-r0, b0-r1" in violated[0].note


async def test_a_spread_preferred_gang_counts_at_the_level_it_fits() -> None:
    tracker, registry, _ = _tracker({"preferred": RACK}, ("n0", "n4"))
    await tracker.step()
    text = generate_latest(registry).decode()
    assert f'tasgate_gang_topology_met_total{{level="{BLOCK}",mode="preferred",result="spread"}} 1.0' in text


async def test_status_wide_and_the_topology_page_show_the_domains_of_running_gangs() -> None:
    tracker, _, metrics = _tracker(nodes=("n0", "n4"))
    await tracker.step()
    state = tracker.holder.current
    now = _capture_time() + 60
    wide = table(tracker.current, now, wide=True, domains=domains_of(tracker.current, state))
    line = next(line for line in wide.splitlines() if " run " in line)
    assert "block=b0 rack=b0-r0,b0-r1 (required violated)" in line
    assert "DOMAINS" in wide.splitlines()[0]
    rows = running_rows(metrics.placed(), state)
    assert rows == [
        RunningGang("gangs", "run", "gpu-cq", "required", "violated", "block=b0 rack=b0-r0,b0-r1")
    ]
    page = with_running("<html><body><p>x</p></body></html>", rows, html=True)
    assert page.index("Running gangs") < page.index("</body>") and "b0-r0,b0-r1" in page
    assert "gangs/run [gpu-cq] required violated: block=b0 rack=b0-r0,b0-r1" in with_running("", rows, False)


def test_a_gang_is_judged_by_the_podsets_of_its_strictest_mode() -> None:
    wl, pods = _run(*_objects())
    workers = [replace(p, podset="workers", node=node) for p, node in zip(pods, ("n0", "n1"), strict=True)]
    driver = [replace(pods[0], name=f"driver-{n}", podset="driver", node=n) for n in ("n4", "n5")]
    asked = {"workers": ("required", RACK), "driver": ("preferred", HOSTS)}  # the drivers spread
    where = placement(replace(wl, requests=asked), [*workers, *driver], LEVELS, LABELS)
    assert where is not None and (where.mode, where.result) == ("required", "met")
    assert dict(where.spanned)[RACK] == 2  # the spans count every pod of the gang
    moved = [workers[0], replace(workers[1], node="n4"), *driver]
    where = placement(replace(wl, requests=asked), moved, LEVELS, LABELS)
    assert where is not None and where.result == "violated" and "PodSet workers" in where.detail
