"""PodGroups reconciled from the watches, against an in-process fake API server (HTTP only).

The reconciler is fed by the real ``watch.run_kind`` through real kubernetes-asyncio clients;
``compute`` stands in for the decision path (the PodGroup the stored Job's template names).

No test sleeps for a fixed time and then asserts: each waits, with a bound, for the event it
is about — a request the fake API served, a result the reconciler recorded, a kind its watches
listed, or (before asserting that something did *not* happen) ``settled``: more resyncs of the
writing loop with its queue empty since, so the reconciler has looked again and found nothing
to do. A result is waited for in ``results`` (what the reconciler recorded after the API
answered), never only in the fake's store, which holds a POST before the reconciler has read
its answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import pytest

from webhook.live import leader, reconcile_http, reconcile_view
from webhook.live.events import EventRecorder
from webhook.live.reconcile import Intent, PodGroups, Reconciler, ReconcileSettings
from webhook.live.reconcile_queue import WorkQueue
from webhook.live.reconcile_view import Target
from webhook.live.watch import WatchSettings, run_kind

from .fakeapi import FakeApi

COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
JOBS = "/apis/batch/v1/namespaces/ml/jobs"
PODS = "/api/v1/namespaces/ml/pods"
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads"
FAST = ReconcileSettings(resync_seconds=0.2, hint_seconds=3.0, backoff_base=0.05, backoff_max=2.0)
WATCH = WatchSettings(watch_seconds=30, backoff_max=0.2)


def job(name: str = "train", pods: int = 2) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": name, "kueue.x-k8s.io/queue-name": "q"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c"}]}}
    spec = {"parallelism": pods, "completions": pods, "template": template}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def pod(owner: Mapping[str, Any], index: int, phase: str = "Pending") -> dict[str, Any]:
    meta = owner["metadata"]
    ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    labels = {"kueue.x-k8s.io/podset": "main", "scheduling.x-k8s.io/pod-group": meta["name"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{meta['name']}-{index}", "labels": labels, "ownerReferences": [ref]},
        "status": {"phase": phase},
    }


async def compute(obj: Mapping[str, Any]) -> PodGroups:
    """The decision path's part here: the PodGroup the stored Job's pods are labelled for."""
    name = obj["spec"]["template"]["metadata"]["labels"].get("scheduling.x-k8s.io/pod-group")
    if obj.get("kind") != "Job" or not name:
        return ()
    meta = {"name": name, "namespace": obj["metadata"]["namespace"]}
    return ({"apiVersion": COSCHEDULING, "kind": "PodGroup", "metadata": meta,
             "spec": {"minMember": obj["spec"]["parallelism"]}},)  # fmt: skip


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


class Counted(Reconciler):
    """The Reconciler, counting its resyncs: each queues again every missing target, pending
    hint and due repair, so two of them with an empty queue after are "it looked again"."""

    resyncs = 0

    def resync(self) -> None:
        super().resync()
        self.resyncs += 1


class Running:
    """Reconcilers with their watches (and, unless told, their writing loop) on one fake API."""

    def __init__(self, fake: FakeApi) -> None:
        self.fake = fake
        self.tasks: list[asyncio.Task[None]] = []
        self.clients: list[Any] = []

    def start(self, *, write: bool = True, compute: Any = compute) -> tuple[Counted, list[str]]:
        results: list[str] = []
        api = self.fake.client()
        self.clients.append(api)
        rec = Counted(api, compute, results.append, settings=FAST)
        for kind in rec.kinds():
            self.tasks.append(asyncio.create_task(run_kind(api, kind, rec, WATCH)))
        if write:
            self.tasks.append(asyncio.create_task(rec.run()))
        return rec, results

    def spawn(self, work: Callable[[], Any]) -> asyncio.Task[None]:
        task = asyncio.create_task(work())
        self.tasks.append(task)
        return task

    async def stop(self) -> None:
        tasks, self.tasks = self.tasks, []
        try:
            await stop_all(tasks)
        finally:
            for api in self.clients:
                await api.close()
            self.clients = []


async def stop_all(tasks: list[asyncio.Task[None]], timeout: float = 20.0) -> None:
    """Cancel ``tasks`` and wait for them, failing (never hanging) on one that does not stop: a
    loop that swallows its cancellation (Python 3.11's ``asyncio.wait_for`` does, when the
    awaited event is set as the cancel comes) would otherwise hang the suite."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    if pending:
        for task in pending:
            task.cancel()  # a second cancel reaches a loop that swallowed the first
        await asyncio.wait(pending, timeout=timeout)
    assert not pending, f"did not stop when cancelled: {[t.get_coro() for t in pending]}"


@pytest.fixture
async def running(fake: FakeApi) -> AsyncIterator[Running]:
    world = Running(fake)
    yield world
    await world.stop()


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``check`` until it holds (the sleep only paces the poll; the bound is generous, as
    the machine may be loaded: a passing run never waits for it)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def settled(rec: Counted, rounds: int = 2) -> None:
    """Until ``rec``'s writing loop has resynced ``rounds`` more times and its queue is empty
    (nothing queued, being handled or backing off): whatever it would do about what its watches
    hold now is done. What an assertion that something did *not* happen waits for."""
    start = rec.resyncs
    await until(lambda: rec.resyncs >= start + rounds and rec.queue is not None and len(rec.queue) == 0)


def listed(rec: Reconciler) -> bool:
    """Every watch of ``rec`` has listed once: it knows all a leader would act on."""
    return {kind.name for kind in rec.kinds()} <= rec.listed


def gang(fake: FakeApi, pods: int = 2) -> dict[str, Any]:
    """A stored Job and its pending pods, labelled for the PodGroup ``train``, which is missing."""
    stored = fake.put(JOBS, job(pods=pods))
    for i in range(pods):
        fake.put(PODS, pod(stored, i))
    return stored


async def test_a_missing_podgroup_is_created_once_owned_and_labelled(fake: FakeApi, running: Running) -> None:
    """Created once: later resyncs (the pods still name it) do not POST it again."""
    stored = gang(fake)
    rec, results = running.start()
    await until(lambda: results == ["created"])
    await settled(rec)
    created = fake.get(f"{GROUPS}/train")
    assert created is not None and len(fake.posts("/podgroups")) == 1 and results == ["created"]
    assert created["spec"]["minMember"] == 2
    assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tasgate"
    (ref,) = created["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("Job", "train", stored["metadata"]["uid"])


async def test_a_deleted_podgroup_is_recreated(fake: FakeApi, running: Running) -> None:
    gang(fake)
    _, results = running.start()
    await until(lambda: results == ["created"])
    fake.delete(f"{GROUPS}/train")
    await until(lambda: len(results) == 2)
    assert results == ["created", "created"] and len(fake.posts("/podgroups")) == 2
    assert fake.get(f"{GROUPS}/train") is not None


async def test_already_exists_is_done(fake: FakeApi, running: Running) -> None:
    """A 409 is taken as made: later resyncs do not POST it again."""
    gang(fake)
    fake.fail("POST", "/podgroups", 409)
    rec, results = running.start()
    await until(lambda: results == ["exists"])
    await settled(rec)
    assert len(fake.posts("/podgroups")) == 1 and results == ["exists"]


async def test_429_with_retry_after_and_500_are_retried_until_created(
    fake: FakeApi, running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waits are asserted as the reconciler chose them (each ``add_after`` delay), not as a
    wall clock measured them: 1 s for ``Retry-After: 1``, then for the 500 (no Retry-After) the
    exponential backoff of a second failure in a row: twice the base, ±20 % jitter. The second
    POST came no sooner than the Retry-After said, whatever the pod events and resyncs
    meanwhile: a lower bound, which a loaded machine cannot break."""
    delays: list[tuple[object, float]] = []
    add_after = WorkQueue.add_after

    def recorded(queue: WorkQueue[Any], key: Any, delay: float) -> None:
        delays.append((key, delay))
        add_after(queue, key, delay)

    monkeypatch.setattr(WorkQueue, "add_after", recorded)
    gang(fake)
    fake.fail("POST", "/podgroups", 429, headers={"Retry-After": "1"})
    fake.fail("POST", "/podgroups", 500)
    _, results = running.start()
    await until(lambda: len(results) == 3)
    assert results == ["retried", "retried", "created"]
    first, second, _ = fake.when("POST", "/podgroups")
    assert second - first >= 0.95, "Retry-After: 1 honoured, whatever the pod events and resyncs"
    (after_429, after_500) = [delay for key, delay in delays if isinstance(key, Target)]
    assert after_429 == 1.0, "the Retry-After, not the backoff"
    backoff = 2 * FAST.backoff_base
    assert 0.8 * backoff <= after_500 <= 1.2 * backoff, "a 500 backs off from the base"


async def test_a_connection_error_is_transient() -> None:
    assert reconcile_http.transient(aiohttp.ServerDisconnectedError())
    assert reconcile_http.transient(TimeoutError())
    assert not reconcile_http.transient(ValueError())


async def test_an_owner_that_is_gone_gets_nothing(fake: FakeApi, running: Running) -> None:
    """Settled: later resyncs (the pods still name the PodGroup) neither POST nor look again."""
    stored = gang(fake)
    fake.delete(f"{JOBS}/train")  # the pods linger until the garbage collector comes
    rec, results = running.start()
    await until(lambda: results == ["owner-missing"])
    await settled(rec)
    assert fake.posts("/podgroups") == [] and results == ["owner-missing"]
    assert len([p for m, p in fake.requests if m == "GET" and p == f"{JOBS}/train"]) == 1, "settled"
    assert stored["metadata"]["uid"]


async def test_an_unexpected_error_is_logged_with_its_traceback_and_retried(
    fake: FakeApi, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    gang(fake)
    calls: list[int] = []

    async def flaky(obj: Mapping[str, Any]) -> PodGroups:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("decision path broke")
        return await compute(obj)

    with caplog.at_level(logging.ERROR, "tasgate.podgroups"):
        _, results = running.start(compute=flaky)
        await until(lambda: len(results) == 2)
    assert results == ["failed", "created"] and fake.get(f"{GROUPS}/train") is not None
    (logged,) = [r for r in caplog.records if r.exc_info]
    assert "decision path broke" in str(logged.exc_info[1] if logged.exc_info else "")


async def test_a_restart_finds_the_work_from_a_fresh_list(fake: FakeApi, running: Running) -> None:
    gang(fake)
    refusing = fake.fail("POST", "/podgroups", 503, times=1000)
    rec, results = running.start()
    rec.hint(Intent("batch", "v1", "jobs", "Job", "batch/v1", "ml", "train"))
    await until(lambda: len(results) >= 2)
    await running.stop()  # the process dies: its queue, hints and backoff go with it
    refusing.times = 0
    _, fresh = running.start()
    await until(lambda: len(fresh) == 1)
    assert fresh == ["created"] and set(results) == {"retried"}
    assert fake.get(f"{GROUPS}/train") is not None


async def test_a_hint_creates_the_podgroup_before_any_pod_once_the_object_is_stored(
    fake: FakeApi, running: Running
) -> None:
    """The Job is stored only once the hint has looked for it and found nothing (a 404 served):
    the hint waits for it, and makes the PodGroup when it appears."""
    rec, results = running.start()
    rec.hint(Intent("batch", "v1", "jobs", "Job", "batch/v1", "ml", "train"))  # reviewed, not stored yet
    await until(lambda: ("GET", f"{JOBS}/train") in fake.requests)
    fake.put(JOBS, job())
    await until(lambda: len(results) == 1)
    assert results == ["created"] and rec.hints == {}
    assert fake.get(f"{GROUPS}/train") is not None


async def test_a_follower_keeps_a_hint_for_when_it_is_elected(fake: FakeApi, running: Running) -> None:
    """A follower, its watches listed (it knows all a leader would act on), holds the hint with
    no writer to hand it to, and has neither looked the Job up nor POSTed; elected, it makes the
    PodGroup from that hint (no pod exists: nothing else would)."""
    fake.put(JOBS, job())
    rec, results = running.start(write=False)
    intent = Intent("batch", "v1", "jobs", "Job", "batch/v1", "ml", "train")
    rec.hint(intent)
    await until(lambda: listed(rec))
    assert rec.queue is None and intent in rec.hints, "kept, with no writer to hand it to"
    assert ("GET", f"{JOBS}/train") not in fake.requests and fake.posts("/podgroups") == []
    running.spawn(rec.run)  # elected
    await until(lambda: results == ["created"])


async def test_a_kueue_workload_created_for_a_job_is_an_early_trigger(
    fake: FakeApi, running: Running
) -> None:
    """The Workload is stored once the Workloads are listed, so it arrives on the watch as ADDED
    (an early trigger; a listed one is not)."""
    stored = fake.put(JOBS, job())
    rec, results = running.start()
    await until(lambda: listed(rec))
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": stored["metadata"]["uid"],
           "controller": True}  # fmt: skip
    fake.put(WORKLOADS, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                         "metadata": {"name": "job-train-1", "ownerReferences": [ref]}})  # fmt: skip
    await until(lambda: len(results) == 1)
    assert results == ["created"] and fake.get(f"{GROUPS}/train") is not None


async def test_finished_pods_need_no_podgroup(fake: FakeApi, running: Running) -> None:
    """Listed, then resynced twice with nothing to do: a Succeeded pod names no missing PodGroup."""
    stored = fake.put(JOBS, job())
    fake.put(PODS, pod(stored, 0, phase="Succeeded"))
    rec, results = running.start()
    await until(lambda: listed(rec))
    await settled(rec)
    assert fake.posts("/podgroups") == [] and results == []


async def test_two_replicas_one_leader_one_post(fake: FakeApi, running: Running) -> None:
    """Both replicas watch the missing PodGroup; only the elected one writes it. Asserted once
    the leader has resynced twice since (its writer is settled) and the follower has looked at
    the Lease twice since, found it held and left it: each had its chance to write or to lead."""
    gang(fake)
    leading: dict[str, bool] = {}
    recs: dict[str, Counted] = {}
    campaign = leader.Campaign(lease_seconds=2, renew_seconds=1.5, retry_seconds=1.0)
    for name in ("a", "b"):
        rec, _ = running.start(write=False)
        recs[name] = rec
        api = running.clients[-1]
        api.user_agent = name  # the fake API tells their requests apart by it
        on_change = functools.partial(leading.__setitem__, name)
        running.spawn(lambda rec=rec, api=api, on_change=on_change, name=name: leader.lead(
            api, dataclasses.replace(campaign, identity=name), rec.run, on_change))  # fmt: skip
    await until(lambda: len(fake.posts("/podgroups")) == 1 and len(leading) == 1)
    (elected,) = leading
    (other,) = {"a", "b"} - {elected}
    created = fake.when("POST", "/podgroups")[0]
    await until(lambda: len([t for t in fake.when("GET", "/leases/", agent=other) if t > created]) >= 2)
    await settled(recs[elected])
    assert len(fake.posts("/podgroups")) == 1
    assert leading == {elected: True}, "one candidate elected; the other never was"


async def test_a_podgroup_the_stored_object_does_not_join_is_never_made(
    fake: FakeApi, running: Running
) -> None:
    unlabelled = job()
    del unlabelled["spec"]["template"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
    fake.put(JOBS, unlabelled)

    async def would_label(obj: Mapping[str, Any]) -> PodGroups:  # as if the policy changed since
        meta = {"name": "train", "namespace": "ml"}
        return ({"apiVersion": COSCHEDULING, "kind": "PodGroup", "metadata": meta, "spec": {"minMember": 2}},)

    rec, results = running.start(compute=would_label)
    rec.hint(Intent("batch", "v1", "jobs", "Job", "batch/v1", "ml", "train"))
    await until(lambda: results == ["none-needed"])
    assert fake.posts("/podgroups") == []


async def test_a_refused_podgroup_is_a_warning_event_on_the_workload(fake: FakeApi, running: Running) -> None:
    gang(fake)
    fake.fail("POST", "/podgroups", 403, times=1)
    api = fake.client()
    running.clients.append(api)
    events = EventRecorder(api)
    rec = Reconciler(api, compute, events=events, settings=FAST)
    results: list[str] = []
    rec.record = results.append
    for kind in rec.kinds():
        running.spawn(functools.partial(run_kind, api, kind, rec, WATCH))
    running.spawn(rec.run)
    await until(lambda: results == ["failed", "created"])
    event = events.queue.get_nowait()
    assert (event.reason, event.regarding.kind, event.regarding.name) == (
        "PodGroupCreateFailed",
        "Job",
        "train",
    )
    assert "403" in event.note


async def test_a_gang_that_names_no_kueue_queue_gets_its_podgroup_from_the_watches(
    fake: FakeApi, running: Running
) -> None:
    """The policy gangs a workload with no queue too (its default topology): no Kueue label,
    no Workload, a review hint that may have reached a follower — the pods alone say it."""
    stored = fake.put(JOBS, job())
    for i in range(2):
        queueless = pod(stored, i)
        del queueless["metadata"]["labels"]["kueue.x-k8s.io/podset"]
        fake.put(PODS, queueless)
    rec, results = running.start()
    await until(lambda: results == ["created"])
    await settled(rec)
    assert len(fake.posts("/podgroups")) == 1 and results == ["created"]


async def test_a_pod_both_watches_see_counts_once_and_leaves_with_either(fake: FakeApi) -> None:

    view = reconcile_view.View()
    stored = job()
    stored["metadata"].update(uid="u", namespace="ml")
    both = pod(stored, 0)
    both["metadata"]["namespace"] = "ml"
    for kind in (reconcile_view.PODS, reconcile_view.GANG_PODS):
        view.apply(kind, "ADDED", both)
    (target,) = view.members
    assert len(view.members_of(target)) == 1
    view.apply(reconcile_view.PODS, "DELETED", both)  # left one selector: the other still holds it
    assert len(view.members_of(target)) == 1
    view.apply(reconcile_view.GANG_PODS, "DELETED", both)
    assert view.members == {}
