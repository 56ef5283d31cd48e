"""Live mode's background work, all of it under the app's `Supervisor`.

On every replica: one list+watch per kind into the `Mirror`, the Mirror's publisher, the
heartbeat that says whether the API server behind the watches still answers, the lifecycle
tracker's watches and loop, and the PodGroup reconciler's watches (a follower keeps
everything warm, so a new leader starts with current state). On the holder of the Lease only
(``live.leader``): the writers — the PodGroup reconciler's loop and the Event poster — so two
replicas never write twice. Every replica answers reviews.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiohttp import web

import scorer
from webhook.decide.decision import decide
from webhook.decide.kueue.topology import default_snapshot_levels
from webhook.decide.policy import Policy
from webhook.decide.verdicts import Review
from webhook.live import heartbeat, leader, tracker, watch
from webhook.live.api import api_client, api_client_from
from webhook.live.events import EventRecorder
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds as watched_kinds
from webhook.live.lease import Standing
from webhook.live.mirror import Mirror
from webhook.live.multikueue import WorkerClusters, WorkerState, multikueue_clusters
from webhook.live.native import NativeBook
from webhook.live.native_kinds import native_kinds
from webhook.live.rebuild_hold import RebuildHold
from webhook.live.reconcile import Compute, NotReadyError, PodGroups, Reconciler
from webhook.live.tracked import tracked_kinds
from webhook.serve.keys import (
    API,
    EXECUTOR,
    METRICS,
    PODGROUPS,
    POLICY,
    REBUILD_HOLD,
    SETTINGS,
    STATE,
    SUPERVISOR,
    Election,
    StateSource,
)
from webhook.serve.lifecycle_metrics import LIFECYCLE
from webhook.serve.supervise import Job, Supervisor

Writers = dict[str, Job]
# This replica's part in the leader election (live mode with --leader-elect): whether it leads,
# and why the Lease cannot be taken, which /readyz notes without failing (answering needs no Lease).
STANDING = web.AppKey("leader-standing", Standing)


def context(source: StateSource, engine: scorer.Engine) -> Callable[[web.Application], AsyncIterator[None]]:
    """Watch the API server into the state holder; follow gangs; write on the leader."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        api = await api_client(source.kubeconfig)
        app[API] = api
        supervisor, policy = app[SUPERVISOR], app[POLICY]
        stale_after = app[SETTINGS].stale_after
        mirror = watch_into(app[STATE], api, supervisor, lambda: policy.current, source, engine, stale_after)
        if app[SETTINGS].fault_hook:  # test-only: the rebuild hold (`serve.debug`)
            mirror.hold = app[REBUILD_HOLD] = RebuildHold()
        every = heartbeat.interval_for(app[SETTINGS].stale_after)
        supervisor.spawn("heartbeat", functools.partial(heartbeat.beat_forever, api, mirror, every))
        events = _track(app, api, source, mirror.native)
        reconciler = _reconciler(app, api, source, events)
        _lead(app, api, source.election, events, {"podgroups": reconciler.run, "events": events.run})
        yield
        await supervisor.stop()  # before the client closes: nothing may use it after this
        await api.close()

    return ctx


def watch_into(
    holder: StateHolder,
    api: Any,
    supervisor: Supervisor,
    policy: Callable[[], Policy],
    source: StateSource,
    engine: scorer.Engine,
    stale_after: float = 0.0,
) -> Mirror:
    """One list+watch per kind into a `Mirror` publishing into ``holder``, each supervised (the
    server's state, and each decision process's own copy, ``serve.processes``); with
    ``--multikueue-workers``, each MultiKueue worker cluster's too (`watch_workers`), judged on
    while younger than ``stale_after`` seconds (0: always)."""
    mirror, jobs = mirror_jobs(holder, api, policy, source, engine, settle_heap=True)
    for name, job in jobs.items():
        supervisor.spawn(name, job)
    if source.multikueue_namespace is not None:
        watch_workers(holder, api, supervisor, policy, source, engine, stale_after)
    return mirror


def mirror_jobs(
    holder: StateHolder,
    api: Any,
    policy: Callable[[], Policy],
    source: StateSource,
    engine: scorer.Engine,
    settle_heap: bool = False,
    prefix: str = "",
) -> tuple[Mirror, Writers]:
    """A `Mirror` publishing into ``holder`` and the jobs that feed it: a list+watch per kind and
    its publisher."""
    book = NativeBook()  # the native v1.36 gang kinds, gated on the API being served
    kinds = [*watched_kinds(), *native_kinds(book)]
    mirror = Mirror(
        holder,
        [k.name for k in kinds],
        engine=engine,
        default_levels=lambda state: default_snapshot_levels(state, policy().default_topology),
        settle_heap=settle_heap,
        native=book,
    )
    jobs: Writers = {
        f"{prefix}watch-{kind.name}": functools.partial(watch.run_kind, api, kind, mirror, source.watch)
        for kind in kinds
    }
    jobs[f"{prefix}publish"] = mirror.publish_forever
    return mirror, jobs


def watch_workers(
    holder: StateHolder,
    api: Any,
    supervisor: Supervisor,
    policy: Callable[[], Policy],
    source: StateSource,
    engine: scorer.Engine,
    stale_after: float,
) -> WorkerClusters:
    """The MultiKueue worker clusters' live states, carried by ``holder``'s (`live.multikueue`)."""

    async def start(name: str, kubeconfig: Mapping[str, Any]) -> WorkerState:
        worker_api = await api_client_from(kubeconfig)
        worker = WorkerState(StateHolder(source=f"worker {name}"), worker_api)
        _, jobs = mirror_jobs(worker.holder, worker_api, policy, source, engine, prefix=f"worker-{name}-")
        worker.task = asyncio.create_task(supervisor.run_all(jobs), name=f"worker-{name}")
        return worker

    namespace = source.multikueue_namespace or "kueue-system"
    workers = WorkerClusters(api, namespace, start, holder, stale_after)
    feed = functools.partial(watch.run_kind, api, multikueue_clusters(), workers, source.watch)
    supervisor.spawn("watch-multikueueclusters", feed)
    supervisor.spawn("multikueue-workers", workers.run)
    return workers


def _track(app: web.Application, api: Any, source: StateSource, book: NativeBook) -> EventRecorder:
    """Follow every gang after admission (lifecycle states, predictions); its Events are posted
    by the leader's writer (a follower's recorder holds them, to post if it is elected)."""
    lifecycle = app[LIFECYCLE]
    events = EventRecorder(api, lifecycle.event, leading=not source.election.enabled)
    follower = tracker.Tracker(
        app[STATE], lambda: app[POLICY].current, events, lifecycle.predicted,
        observed=lifecycle.gangs.observe, native_pods=lambda: book.records,
    )  # fmt: skip
    book.listeners.append(follower.dirty.set)  # a native gang's pods come from the Mirror's watches
    lifecycle.follow(
        follower.rows, follower.counts, follower.placed, lambda: (follower.current, app[STATE].current)
    )
    supervisor = app[SUPERVISOR]
    for kind in tracked_kinds():
        job = functools.partial(watch.run_kind, api, kind, follower, source.watch)
        supervisor.spawn(f"track-{kind.name}", job)
    supervisor.spawn("track", follower.run)
    return events


def _reconciler(app: web.Application, api: Any, source: StateSource, events: EventRecorder) -> Reconciler:
    """The PodGroup reconciler, fed by its own watches on every replica (writes on the leader)."""
    counter = app[METRICS].podgroups
    reconciler = Reconciler(
        api, _pod_groups_of(app), lambda result: counter.labels(result).inc(), events=events
    )
    app[PODGROUPS] = reconciler
    for kind in reconciler.kinds():
        job = functools.partial(watch.run_kind, api, kind, reconciler, source.watch)
        app[SUPERVISOR].spawn(f"watch-{kind.name}", job)
    return reconciler


def _lead(
    app: web.Application, api: Any, election: Election, events: EventRecorder, writers: Writers
) -> None:
    """Run the writers while this replica holds the Lease; always, without election. Each writer
    is supervised once, by its own name: spawned, or in the leader's term by ``run_all`` (the
    election restarts no work of its own: `live.leader`)."""
    supervisor, gauge = app[SUPERVISOR], app[METRICS].leader
    if not election.enabled:
        gauge.set(1)
        for name, job in writers.items():
            supervisor.spawn(name, job)
        return
    work = functools.partial(supervisor.run_all, writers)

    def on_change(leading: bool) -> None:
        events.lead(leading)
        gauge.set(1 if leading else 0)

    standing = app[STANDING] = Standing(election.campaign)  # /readyz says why it cannot lead
    campaign = functools.partial(leader.lead, api, election.campaign, work, on_change, standing)
    supervisor.spawn("leader-election", campaign)


def _pod_groups_of(app: web.Application) -> Compute:
    """The PodGroups a stored object needs: the decision path on the current state, in the pool.

    Not ready (retried) while the state is not loaded or lacks an object the verdict needs; the
    reconciler only ever creates PodGroups the stored object's templates name.
    """

    def compute(obj: Mapping[str, Any]) -> PodGroups:
        state = app[STATE].current
        if state is None:
            raise NotReadyError("cluster state not loaded yet")
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        decision = decide(Review(obj, namespace=namespace), state, app[POLICY].current)
        if decision.rejected is not None:  # retried: its pods wait for the object to be fixed
            raise NotReadyError(f"{decision.rejected}")
        return tuple(decision.pod_groups)

    async def run(obj: Mapping[str, Any]) -> PodGroups:
        return await asyncio.get_running_loop().run_in_executor(app[EXECUTOR], compute, obj)

    return run
