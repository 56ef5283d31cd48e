"""The one app factory: every route and every background task of `tasgate serve` is wired here.

State lives in the ``web.AppKey``s of ``serve.keys``; background work runs as ``cleanup_ctx``
generators: the decision thread pool, certificate reload, and in live mode the API client, the
list+watch mirror that publishes cluster states, and the PodGroup creator. Tests build the very
app production runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiohttp import web

import scorer
from webhook.decide.decision import decide
from webhook.decide.policy import PolicyError
from webhook.decide.policy_text import parse_policy
from webhook.decide.topology import default_snapshot_levels
from webhook.decide.verdicts import Review
from webhook.live import podgroups, tracker, watch
from webhook.live.api import api_client
from webhook.live.events import EventRecorder
from webhook.live.holder import StateHolder
from webhook.live.mirror import Mirror
from webhook.serve import handlers, topology
from webhook.serve.keys import (
    API,
    AUDIT,
    EXECUTOR,
    LARGE_EXECUTOR,
    MAIN,
    METRICS,
    PODGROUPS,
    POLICY,
    RELOADER,
    RUNTIME,
    SETTINGS,
    STATE,
    WAITING,
    AuditSink,
    PolicyState,
    Runtime,
    Settings,
    StateSource,
)
from webhook.serve.lifecycle_metrics import LIFECYCLE, LifecycleMetrics
from webhook.serve.metrics import Metrics
from webhook.serve.tls import CertReloader
from webhook.serve.waiting import RecentWaiting
from webhook.state.cluster import build_state

log = logging.getLogger("tasgate")


def create_app(
    settings: Settings, audit: AuditSink, source: StateSource, reloader: CertReloader | None = None
) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes)
    holder = StateHolder(source="live" if source.live else source.label)
    app[SETTINGS], app[STATE], app[AUDIT] = settings, holder, audit
    app[METRICS] = Metrics(lambda: (holder.current, holder.age()), lambda: app[POLICY].current)
    app[WAITING] = RecentWaiting()
    engine = app[METRICS].timed(scorer.default_engine())  # passed to every state built
    app[LIFECYCLE] = LifecycleMetrics(app[METRICS].registry)
    if source.objects is not None:
        holder.publish(build_state(source.objects, 1, engine))
    app[RUNTIME] = Runtime()
    app[RUNTIME].idle.set()
    app[POLICY] = PolicyState(settings.policy, settings.policy_file, _digest_of(settings.policy_file))
    app.cleanup_ctx.append(_executor)
    if reloader is not None:
        app[RELOADER] = reloader
        app[METRICS].cert_expiry.set(reloader.not_after or 0)
        app.cleanup_ctx.append(_cert_poller(settings.cert_poll_seconds))
    if settings.policy_file:
        app.cleanup_ctx.append(_policy_poller(settings.cert_poll_seconds))
    if source.live:
        app.cleanup_ctx.append(_live(source, engine))
    app.router.add_post("/mutate", handlers.mutate)
    app.router.add_post("/validate", handlers.validate)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    return app


def create_metrics_app(app: web.Application) -> web.Application:
    """The plain-HTTP side listener: /metrics, /topology, and /healthz and /readyz of ``app``.

    A separate port so the NetworkPolicy can open the webhook port to the API server (from
    anywhere) and this one to the scraper's namespace only; it reads ``app``'s state, owns none.
    """
    side = web.Application(client_max_size=1024)
    side[MAIN] = app
    side.router.add_get("/metrics", handlers.metrics)
    side.router.add_get(
        "/topology", topology.TopologyPage().handle
    )  # the cluster's layout: the scraper's port only
    side.router.add_get("/healthz", handlers.healthz)
    side.router.add_get("/readyz", handlers.readyz)
    return side


async def _executor(app: web.Application) -> AsyncIterator[None]:
    app[EXECUTOR] = ThreadPoolExecutor(app[SETTINGS].decision_threads, thread_name_prefix="decide")
    app[LARGE_EXECUTOR] = ThreadPoolExecutor(1, thread_name_prefix="decide-large")
    yield
    # Never block shutdown on a decision still running: its review has been answered or dropped.
    app[EXECUTOR].shutdown(wait=False, cancel_futures=True)
    app[LARGE_EXECUTOR].shutdown(wait=False, cancel_futures=True)


def _cert_poller(interval: float) -> Callable[[web.Application], AsyncIterator[None]]:
    async def poll(app: web.Application) -> AsyncIterator[None]:
        reloader, m = app[RELOADER], app[METRICS]

        def reloaded(fingerprint: str) -> None:
            m.cert_reloads.inc()
            m.cert_expiry.set(reloader.not_after or 0)
            log.info("serving certificate reloaded fingerprint=%s", fingerprint[:16])

        def failed(error: Exception) -> None:
            log.warning("serving certificate reload failed: %s", error)

        task = asyncio.create_task(reloader.run(interval, on_reload=reloaded, on_error=failed))
        yield
        await _stop([task])

    return poll


def _digest_of(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _policy_poller(interval: float) -> Callable[[web.Application], AsyncIterator[None]]:
    """Reload the policy file when its content changes (by hash: a mounted ConfigMap changes by
    symlink swap). A new policy that does not parse keeps the old one, logged once per content."""

    async def poll(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_poll_policy(app[POLICY], app[METRICS], interval))
        yield
        await _stop([task])

    return poll


async def _poll_policy(held: PolicyState, m: Metrics, interval: float) -> None:
    refused: str | None = None
    while True:
        await asyncio.sleep(interval)
        assert held.path is not None
        try:
            raw = Path(held.path).read_bytes()
        except OSError as exc:
            if refused != f"unreadable:{exc.strerror}":
                refused = f"unreadable:{exc.strerror}"
                held.error = f"cannot read policy file {held.path}: {exc.strerror}"
                m.policy_reloads.labels("error").inc()
                m.policy_error.set(1)
                log.warning("policy not reloaded, keeping %s: %s", held.current.name, held.error)
            continue
        digest = hashlib.sha256(raw).hexdigest()
        if digest in (held.digest, refused):
            continue
        try:
            policy = parse_policy(raw.decode("utf-8", errors="replace"), held.path)
        except PolicyError as exc:
            refused, held.error = digest, str(exc)
            m.policy_reloads.labels("error").inc()
            m.policy_error.set(1)
            log.warning("policy not reloaded, keeping %s: %s", held.current.name, exc)
            continue
        held.current, held.digest, held.error, refused = policy, digest, None, None
        m.policy_reloads.labels("ok").inc()
        m.policy_error.set(0)
        log.info("policy reloaded from %s: %s sha256=%s", held.path, policy.name, digest[:16])


def _live(source: StateSource, engine: scorer.Engine) -> Callable[[web.Application], AsyncIterator[None]]:
    """Watch the API server into the state holder, and create PodGroups for admitted gangs."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        api = await api_client(source.kubeconfig)
        app[API] = api
        kinds = watch.kinds()
        policy = app[POLICY]
        mirror = Mirror(
            app[STATE],
            [k.name for k in kinds],
            engine=engine,
            default_levels=lambda state: default_snapshot_levels(state, policy.current.default_topology),
            settle_heap=True,
        )
        counter = app[METRICS].podgroups
        creator = podgroups.Creator(api, lambda result: counter.labels(result).inc(), _pod_groups_of(app))
        app[PODGROUPS] = creator
        tasks = watch.start(api, kinds, mirror, source.watch)
        tasks.append(asyncio.create_task(creator.run(), name="podgroups"))
        tasks += _track(app, api, source)
        yield
        await _stop(tasks)
        await api.close()

    return ctx


def _track(app: web.Application, api: Any, source: StateSource) -> list[asyncio.Task[None]]:
    """Follow every gang after admission (lifecycle states, predictions, Events)."""
    lifecycle = app[LIFECYCLE]
    events = EventRecorder(api, lifecycle.event)
    follower = tracker.Tracker(app[STATE], lambda: app[POLICY].current, events, lifecycle.predicted)
    lifecycle.follow(follower.rows, follower.counts)
    return tracker.start(api, follower, events, source.watch)


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


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*tasks, return_exceptions=True)
