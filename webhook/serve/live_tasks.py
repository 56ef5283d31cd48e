"""Live mode's background work, all of it under the app's `Supervisor`.

On every replica: one list+watch per kind into the `Mirror`, the Mirror's publisher, and the
lifecycle tracker's watches and loop (a follower keeps everything warm, so a new leader starts
with current state). On the leader only: the writers — PodGroup creation and the Event poster —
so two replicas never write twice. Every replica answers reviews.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiohttp import web

import scorer
from webhook.decide.decision import decide
from webhook.decide.topology import default_snapshot_levels
from webhook.decide.verdicts import Review
from webhook.live import podgroups, tracker, watch
from webhook.live.api import api_client
from webhook.live.events import EventRecorder
from webhook.live.mirror import Mirror
from webhook.live.tracked import tracked_kinds
from webhook.serve.keys import API, EXECUTOR, METRICS, PODGROUPS, POLICY, STATE, SUPERVISOR, StateSource
from webhook.serve.lifecycle_metrics import LIFECYCLE
from webhook.serve.supervise import Job

Writers = dict[str, Job]


def context(source: StateSource, engine: scorer.Engine) -> Callable[[web.Application], AsyncIterator[None]]:
    """Watch the API server into the state holder; follow gangs; write on the leader."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        api = await api_client(source.kubeconfig)
        app[API] = api
        supervisor = app[SUPERVISOR]
        kinds = watch.kinds()
        policy = app[POLICY]
        mirror = Mirror(
            app[STATE],
            [k.name for k in kinds],
            engine=engine,
            default_levels=lambda state: default_snapshot_levels(state, policy.current.default_topology),
            settle_heap=True,
        )
        for kind in kinds:
            supervisor.spawn(
                f"watch-{kind.name}", functools.partial(watch.run_kind, api, kind, mirror, source.watch)
            )
        supervisor.spawn("publish", mirror.publish_forever)
        writers = _track(app, api, source)
        counter = app[METRICS].podgroups
        creator = podgroups.Creator(api, lambda result: counter.labels(result).inc(), _pod_groups_of(app))
        app[PODGROUPS] = creator
        writers["podgroups"] = creator.run
        _lead(app, writers)
        yield
        await supervisor.stop()  # before the client closes: nothing may use it after this
        await api.close()

    return ctx


def _track(app: web.Application, api: Any, source: StateSource) -> Writers:
    """Follow every gang after admission (lifecycle states, predictions); its Event poster is a writer."""
    lifecycle = app[LIFECYCLE]
    events = EventRecorder(api, lifecycle.event)
    follower = tracker.Tracker(app[STATE], lambda: app[POLICY].current, events, lifecycle.predicted)
    lifecycle.follow(follower.rows, follower.counts)
    supervisor = app[SUPERVISOR]
    for kind in tracked_kinds():
        supervisor.spawn(
            f"track-{kind.name}", functools.partial(watch.run_kind, api, kind, follower, source.watch)
        )
    supervisor.spawn("track", follower.run)
    return {"events": events.run}


def _lead(app: web.Application, writers: Writers) -> None:
    """Run the writers (supervised, each on its own)."""
    supervisor = app[SUPERVISOR]
    app[METRICS].leader.set(1)
    supervisor.spawn("writers", functools.partial(supervisor.run_all, writers))


def _pod_groups_of(app: web.Application) -> podgroups.Compute:
    """The PodGroups a stored object needs: the decision path on the current state, in the pool.

    Nothing when the state is not loaded or the stored object would not be admitted.
    """

    def compute(obj: Mapping[str, Any]) -> podgroups.PodGroups:
        state = app[STATE].current
        if state is None:
            return ()
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        decision = decide(Review(obj, namespace=namespace), state, app[POLICY].current)
        return tuple(decision.pod_groups) if decision.allowed else ()

    async def run(obj: Mapping[str, Any]) -> podgroups.PodGroups:
        return await asyncio.get_running_loop().run_in_executor(app[EXECUTOR], compute, obj)

    return run
