"""Native v1.36 gangs followed after admission (``track.native``, ``live.native_track``), on the
PodGroups and pods the real kube-scheduler v1.36.5 left (tests/fixtures/native): the same
lifecycle states as Kueue's gangs, and its placement compared with tasgate's prediction."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.webhook.test_live_native import mirror_of, published, strip_binding, strip_status
from tests.webhook.test_native import BASE
from tests.webhook.test_native import _docs as docs
from webhook.decide.policy import Policy
from webhook.live import native
from webhook.live.mirror import Mirror
from webhook.live.tracked import GANG_NATIVE_PODGROUPS
from webhook.live.tracker import Tracker
from webhook.track.classify import State
from webhook.track.compare import Comparison
from webhook.track.ledger import Ledger
from webhook.track.native import as_workload, parse_native_group
from webhook.track.records import parse_pod

FIXTURES = Path(__file__).parents[1] / "fixtures" / "native"
NOW = 1767225600.0 + 3600  # an hour after the captures' placeholder times


def scenario(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    objects = docs(FIXTURES / name)
    (pg,) = [o for o in objects if o["kind"] == "PodGroup"]
    return pg, [o for o in objects if o["kind"] == "Pod"]


def ledger_of(pg: Mapping[str, Any], pods: list[dict[str, Any]]) -> Ledger:
    ledger = Ledger()
    ledger.replace("nativepodgroups", [pg])
    ledger.native_pods = {r.key: r for r in map(parse_pod, pods)}
    return ledger


@pytest.mark.parametrize(
    ("name", "state", "reason"),
    [
        ("rack-gang.yaml", State.RUNNING, "AllRunning"),
        ("job-gang.yaml", State.RUNNING, "AllRunning"),
        ("block-gang.yaml", State.RUNNING, "AllRunning"),
        ("rack-min-count.yaml", State.RUNNING, "AllRunning"),  # minCount 2 of 4 ran
        ("rack-never-fits.yaml", State.WAITING_TOPOLOGY, "Unschedulable"),  # not judged yet
        ("job-never-fits.yaml", State.WAITING_TOPOLOGY, "Unschedulable"),
    ],
)
def test_states_from_the_schedulers_conditions(name: str, state: State, reason: str) -> None:
    pg, pods = scenario(name)
    (tracked,) = ledger_of(pg, pods).tracked(NOW, 60.0)
    assert (tracked.status.state, tracked.status.reason) == (state, reason), tracked.status
    assert tracked.gang.workload.native and len(tracked.gang.pods) == len(pods)


def test_a_group_not_tried_yet_assembles_and_a_disrupted_one_is_evicted() -> None:
    pg, pods = scenario("rack-gang.yaml")
    fresh = strip_status(pg)
    (tracked,) = ledger_of(fresh, [strip_binding(p) for p in pods[:1]]).tracked(NOW, 60.0)
    assert (tracked.status.state, tracked.status.reason) == (State.ASSEMBLING, "WaitingForPods")
    preempted = copy.deepcopy(pg)
    preempted["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "m"}
    )
    (tracked,) = ledger_of(preempted, pods).tracked(NOW, 60.0)
    assert tracked.status.state is State.EVICTED


def test_every_pod_succeeded_is_finished() -> None:
    pg, pods = scenario("job-gang.yaml")
    for p in pods:
        p["status"]["phase"] = "Succeeded"
    (tracked,) = ledger_of(pg, pods).tracked(NOW, 60.0)
    assert tracked.status.state is State.FINISHED


def test_a_job_made_group_is_named_by_its_job() -> None:
    pg, _ = scenario("job-gang.yaml")
    wl = as_workload(parse_native_group(pg), ())
    assert wl.owner is not None and (wl.owner.kind, wl.owner.name) == ("Job", "trainer")
    assert wl.pod_count == 3 and wl.levels == ()


async def test_queued_never_fitting_group_reads_never_fits_on_the_live_state() -> None:
    """The tracker's figures are the decision path's, on the Mirror's state (pods unbound)."""
    pg, pods = scenario("rack-never-fits.yaml")
    mirror = mirror_of([*BASE, *(strip_binding(p) for p in pods)])
    tracker = Tracker(mirror.holder, lambda: Policy("test"), native_pods=lambda: mirror.native.records)
    mirror.holder.publish(await published(mirror))
    tracker.apply(GANG_NATIVE_PODGROUPS, "ADDED", pg)
    await tracker.step()
    (tracked,) = tracker.current
    assert tracked.status.state is State.NEVER_FITS and tracked.status.reason == "NeverFits"
    assert "holds at most 6 of the 7 pods" in tracked.status.message


async def counting_tracker(mirror: Mirror, counted: list[Comparison]) -> Tracker:
    """A tracker on ``mirror``'s native book that appends each prediction compared to ``counted``,
    with the mirror's state published."""
    tracker = Tracker(
        mirror.holder,
        lambda: Policy("test"),
        predicted=counted.append,
        native_pods=lambda: mirror.native.records,
    )
    mirror.holder.publish(await published(mirror))
    return tracker


async def test_the_schedulers_domain_is_compared_with_the_prediction_once() -> None:
    """PodGroup queued (judged on the state with its pods unbound), then scheduled, then the pods
    bound where the real scheduler bound them: one prediction counted, in agreement; the gang
    runs, in the rack it required."""
    pg, pods = scenario("rack-gang.yaml")
    mirror = mirror_of([*BASE, strip_status(pg), *(strip_binding(p) for p in pods)])
    counted: list[Comparison] = []
    tracker = await counting_tracker(mirror, counted)
    tracker.apply(GANG_NATIVE_PODGROUPS, "ADDED", strip_status(pg))
    await tracker.step()
    assert tracker.ledger.assessments  # judged while queued
    tracker.apply(GANG_NATIVE_PODGROUPS, "MODIFIED", pg)
    await tracker.step()
    assert not counted  # no pod bound yet: nothing to compare
    for p in pods:
        mirror.apply("pods", "ADDED", p)
        mirror.apply(native.UNBOUND_PODS, "DELETED", strip_binding(p))
    mirror.holder.publish(await published(mirror))
    await tracker.step()
    await tracker.step()
    assert [(c.agree, c.reason) for c in counted] == [(True, "none")], counted
    (tracked,) = tracker.current
    assert tracked.status.state is State.RUNNING
    (where,) = tracker.placed()
    assert where[1].result == "met" and where[1].domains["topology.example.com/rack"] == ("r0",)


async def test_a_wrong_prediction_is_counted_as_a_disagreement() -> None:
    """The same gang, the pods bound in another rack than predicted (as a scheduler picking
    among tied domains would): counted as a domain disagreement."""
    pg, pods = scenario("rack-gang.yaml")
    mirror = mirror_of([*BASE, strip_status(pg), *(strip_binding(p) for p in pods)])
    counted: list[Comparison] = []
    tracker = await counting_tracker(mirror, counted)
    tracker.apply(GANG_NATIVE_PODGROUPS, "ADDED", strip_status(pg))
    await tracker.step()
    tracker.apply(GANG_NATIVE_PODGROUPS, "MODIFIED", pg)
    for p, host in zip(pods, ("r3-h0", "r3-h1", "r3-h2", "r3-h0"), strict=True):
        moved = copy.deepcopy(p)
        moved["spec"]["nodeName"] = host
        mirror.apply("pods", "ADDED", moved)
    mirror.holder.publish(await published(mirror))
    await tracker.step()
    assert [(c.agree, c.reason) for c in counted] == [(False, "domain")], counted
    assert "r3" in counted[0].detail and "r0" in counted[0].detail


async def test_a_group_first_seen_scheduled_is_not_compared() -> None:
    """After a restart, the scheduler's choice cannot be held to a prediction made before it."""
    pg, pods = scenario("rack-gang.yaml")
    mirror = mirror_of([*BASE, pg, *pods])
    counted: list[Comparison] = []
    tracker = await counting_tracker(mirror, counted)
    tracker.apply(GANG_NATIVE_PODGROUPS, "ADDED", pg)
    await tracker.step()
    assert not counted and tracker.current[0].status.state is State.RUNNING
