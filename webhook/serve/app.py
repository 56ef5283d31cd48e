"""The one app factory: every route and every background task of `tasgate serve` is wired here.

State lives in the ``web.AppKey``s of ``serve.keys``; background work runs as ``cleanup_ctx``
generators: the decision thread pool, certificate reload, and in live mode the API client, the
list+watch mirror that publishes cluster states, and the PodGroup creator. Tests build the very
app production runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

import scorer
from webhook.decide.policy import PolicyError
from webhook.decide.policy_text import parse_policy
from webhook.live.holder import StateHolder
from webhook.serve import debug, errors, handlers, live_tasks, probes, topology
from webhook.serve.audit import AuditLog
from webhook.serve.keys import (
    AUDIT,
    EXECUTOR,
    LARGE_EXECUTOR,
    MAIN,
    METRICS,
    POLICY,
    PROCESSES,
    RELOADER,
    RUNTIME,
    SETTINGS,
    STATE,
    SUPERVISOR,
    WAITING,
    AuditSink,
    PolicyState,
    Runtime,
    Settings,
    StateSource,
)
from webhook.serve.lifecycle_metrics import LIFECYCLE, LifecycleMetrics
from webhook.serve.metrics import Metrics
from webhook.serve.probe_metrics import ProbeMetrics
from webhook.serve.process_main import WorkerConfig
from webhook.serve.processes import DecisionProcesses
from webhook.serve.supervise import Supervisor
from webhook.serve.tls import CertReloader
from webhook.serve.waiting import RecentWaiting
from webhook.state.cluster import build_state

log = logging.getLogger("tasgate")


def create_app(
    settings: Settings, audit: AuditSink, source: StateSource, reloader: CertReloader | None = None
) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes, middlewares=[errors.answer_errors])
    holder = StateHolder(source="live" if source.live else source.label)
    app[SETTINGS], app[STATE], app[AUDIT] = settings, holder, audit
    app[METRICS] = Metrics(lambda: (holder.current, holder.age()), lambda: app[POLICY].current)
    app[WAITING] = RecentWaiting()
    engine = app[METRICS].timed(scorer.default_engine())  # passed to every state built
    app[LIFECYCLE] = LifecycleMetrics(app[METRICS].registry, pod_info=settings.pod_info_metrics)
    if source.objects is not None:
        holder.publish(build_state(source.objects, 1, engine))
        for rejected in holder.current.rejected if holder.current else ():
            log.error("%s left out of the cluster state: %s", rejected.subject, rejected.why)
    app[RUNTIME] = Runtime()
    app[RUNTIME].idle.set()
    app[POLICY] = PolicyState(settings.policy, settings.policy_file, _digest_of(settings.policy_file))
    restarts = app[METRICS].task_restarts
    app[SUPERVISOR] = Supervisor(lambda task: restarts.labels(task).inc(), fault_hook=settings.fault_hook)
    app.cleanup_ctx.append(_supervised)
    app.cleanup_ctx.append(_executor)
    if isinstance(audit, AuditLog):
        audit.on_drop = app[METRICS].audit_dropped.inc
        app.on_cleanup.append(lambda _app: _close_audit(audit))
    if reloader is not None:
        app[RELOADER] = reloader
        app[METRICS].cert_expiry.set(reloader.not_after or 0)
        app.cleanup_ctx.append(_cert_poller(settings.cert_poll_seconds))
    # Seconds left on the certificate and readiness as gauges, computed on scrape (probe_metrics.py).
    not_after = (lambda: reloader.not_after) if reloader is not None else (lambda: None)
    ProbeMetrics(app[METRICS].registry, not_after, lambda: not probes.readiness_problems(app))
    if settings.policy_file:
        app.cleanup_ctx.append(_policy_poller(settings.cert_poll_seconds))
    if source.live:
        app.cleanup_ctx.append(live_tasks.context(source, engine))
    if settings.decision_processes > 0 and (source.live or source.objects is not None):
        app[PROCESSES] = DecisionProcesses(settings.decision_processes, WorkerConfig(settings, source))
        app.cleanup_ctx.append(_decision_processes)
    app.router.add_post("/mutate", handlers.mutate)
    app.router.add_post("/validate", handlers.validate)
    app.router.add_get("/healthz", probes.healthz)
    app.router.add_get("/readyz", probes.readyz)
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
    side.router.add_get("/healthz", probes.healthz)
    side.router.add_get("/readyz", probes.readyz)
    if app[SETTINGS].fault_hook:  # test-only: fail a background task, hold a rebuild
        debug.add_routes(side)
    return side


async def _executor(app: web.Application) -> AsyncIterator[None]:
    app[EXECUTOR] = ThreadPoolExecutor(app[SETTINGS].decision_threads, thread_name_prefix="decide")
    app[LARGE_EXECUTOR] = ThreadPoolExecutor(1, thread_name_prefix="decide-large")
    yield
    # Never block shutdown on a decision still running: its review has been answered or dropped.
    app[EXECUTOR].shutdown(wait=False, cancel_futures=True)
    app[LARGE_EXECUTOR].shutdown(wait=False, cancel_futures=True)


async def _decision_processes(app: web.Application) -> AsyncIterator[None]:
    """Each decision process runs, and is restarted when it exits, under the supervisor."""
    for name, job in app[PROCESSES].jobs().items():
        app[SUPERVISOR].spawn(name, job)
    yield  # the supervisor's own context stops them (they are its tasks)


def _cert_poller(interval: float) -> Callable[[web.Application], AsyncIterator[None]]:
    async def poll(app: web.Application) -> AsyncIterator[None]:
        reloader, m = app[RELOADER], app[METRICS]

        def reloaded(fingerprint: str) -> None:
            m.cert_reloads.inc()
            m.cert_expiry.set(reloader.not_after or 0)
            log.info("serving certificate reloaded fingerprint=%s", fingerprint[:16])

        def failed(error: Exception) -> None:
            log.warning("serving certificate reload failed: %s", error)

        app[SUPERVISOR].spawn(
            "certificates", lambda: reloader.run(interval, on_reload=reloaded, on_error=failed)
        )
        yield

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
        app[SUPERVISOR].spawn("policy", lambda: _poll_policy(app[POLICY], app[METRICS], interval))
        yield

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


async def _supervised(app: web.Application) -> AsyncIterator[None]:
    """The supervisor outlives every other context: it stops the tasks they spawned last."""
    yield
    await app[SUPERVISOR].stop()


async def _close_audit(audit: AuditLog) -> None:
    """Write out the queued audit lines at shutdown (off the loop: the stream may be slow)."""
    await asyncio.to_thread(audit.close)
