"""The admission webhook over HTTPS: aiohttp at the edge, the shared decision path inside.

One `create_app()` factory; state lives in `web.AppKey`s; background work (certificate
reload) runs as `cleanup_ctx` generators. Handlers only move bytes: `admission` parses,
`review.judge` decides (in a thread, so a slow decision never blocks /healthz), `audit` and
`metrics` record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

import scorer
from scorer.request import Engine
from webhook.admission import MAX_BODY_BYTES, AdmissionRequest, MalformedReview, parse_review, parse_timeout
from webhook.admission import review_response as respond
from webhook.audit import audit_record
from webhook.cluster import ClusterState
from webhook.metrics import Metrics
from webhook.policy import Policy
from webhook.review import Outcome, judge
from webhook.tls import CertReloader

log = logging.getLogger("tasgate")


@dataclass
class StateHolder:
    """The current cluster state. One writer publishes by swapping the reference; readers never wait."""

    current: ClusterState | None = None
    loaded_at: float | None = None  # monotonic time of the last publish
    fresh_at: float | None = None  # monotonic time the state was last known to match the cluster
    source: str = "static"
    engine: Engine | None = None  # the (timed) engine every published state places with

    def publish(self, state: ClusterState) -> None:
        if state.engine is None:
            state.engine = self.engine
        self.current, self.loaded_at = state, time.monotonic()
        self.fresh_at = self.loaded_at

    def touch(self, at: float) -> None:
        """The watches were healthy at ``at``: the state is current even if nothing changed."""
        self.fresh_at = at

    def age(self) -> float | None:
        return None if self.fresh_at is None else time.monotonic() - self.fresh_at


@dataclass(frozen=True)
class Settings:
    policy: Policy
    on_timeout: str = "allow"  # allow | deny: the answer when a decision overruns the API server's timeout
    stale_after: float = 0.0  # seconds; 0 = a static state never goes stale
    allow_reference_scorer: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    decision_threads: int = 4
    timeout_margin: float = 0.8  # share of the API server's timeout a decision may use


@dataclass
class Runtime:
    """Mutable serving state: draining flag and in-flight count, for readiness and SIGTERM."""

    draining: bool = False
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)


SETTINGS = web.AppKey("settings", Settings)
STATE = web.AppKey("state", StateHolder)
METRICS = web.AppKey("metrics", Metrics)
AUDIT: web.AppKey[Callable[[dict[str, Any]], None]] = web.AppKey("audit")
RUNTIME = web.AppKey("runtime", Runtime)
EXECUTOR = web.AppKey("executor", ThreadPoolExecutor)
RELOADER = web.AppKey("reloader", CertReloader)
API = web.AppKey("api", ApiClient)  # set in live mode only


def create_app(
    settings: Settings,
    state: StateHolder,
    audit: Callable[[dict[str, Any]], None],
    reloader: CertReloader | None = None,
    cert_poll_seconds: float = 10.0,
) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS], app[STATE], app[AUDIT] = settings, state, audit
    app[METRICS] = Metrics(lambda: (state.current, state.age()))
    state.engine = app[METRICS].timed(scorer.default_engine())
    if state.current is not None and state.current.engine is None:
        state.current.engine = state.engine
    app[RUNTIME] = Runtime()
    app[RUNTIME].idle.set()
    if reloader is not None:
        app[RELOADER] = reloader
        app.cleanup_ctx.append(_cert_poller(cert_poll_seconds))
    app.cleanup_ctx.append(_executor)
    app.router.add_post("/mutate", mutate)
    app.router.add_post("/validate", validate)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def mutate(request: web.Request) -> web.Response:
    return await _review(request, "mutate")


async def validate(request: web.Request) -> web.Response:
    return await _review(request, "validate")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    problems = readiness_problems(request.app)
    if problems:
        return web.Response(status=503, text="not ready: " + "; ".join(problems))
    return web.Response(text="ok")


async def metrics(request: web.Request) -> web.Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415 - edge-only import

    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def readiness_problems(app: web.Application) -> list[str]:
    settings, holder = app[SETTINGS], app[STATE]
    problems = []
    if app[RUNTIME].draining:
        problems.append("draining")
    if holder.current is None:
        problems.append("cluster state not loaded")
    age = holder.age()
    if settings.stale_after and age is not None and age > settings.stale_after:
        problems.append(f"cluster state is {age:.0f}s old (limit {settings.stale_after:.0f}s)")
    if scorer.IMPLEMENTATION != "compiled" and not settings.allow_reference_scorer:
        problems.append(
            "compiled scorer not active (pure-Python twin in use; --allow-reference-scorer to accept)"
        )
    reloader = app.get(RELOADER)
    if reloader is not None and not reloader.loaded:
        problems.append("serving certificate not loaded")
    return problems


async def _review(request: web.Request, endpoint: str) -> web.Response:
    app = request.app
    started = time.perf_counter_ns()
    runtime = app[RUNTIME]
    runtime.in_flight += 1
    runtime.idle.clear()
    try:
        return await _answer(request, endpoint, started)
    finally:
        runtime.in_flight -= 1
        if runtime.in_flight == 0:
            runtime.idle.set()


async def _answer(request: web.Request, endpoint: str, started: int) -> web.Response:
    app = request.app
    try:
        req = parse_review(await request.read())
    except MalformedReview as exc:
        app[METRICS].errors.labels("malformed").inc()
        if exc.uid:
            return _json(respond(exc.uid, False, code=400, message=f"malformed AdmissionReview: {exc}"))
        return web.json_response({"error": f"malformed AdmissionReview: {exc}"}, status=400)
    budget = parse_timeout(request.query.get("timeout")) * app[SETTINGS].timeout_margin
    outcome = await _decide(app, req, endpoint, budget)
    latency_us = (time.perf_counter_ns() - started) // 1000
    _record(app, req, outcome, endpoint, latency_us)
    if endpoint == "validate":
        _hand_over_pod_groups(app, req, outcome)
    code = outcome.code if not outcome.allowed else None
    body = respond(
        req.uid,
        outcome.allowed,
        code=code,
        message=outcome.message,
        warnings=outcome.warnings,
        patch=outcome.patch if endpoint == "mutate" else (),
        audit=outcome.audit,
    )
    return _json(body)


async def _decide(app: web.Application, req: AdmissionRequest, endpoint: str, budget: float) -> Outcome:
    holder, settings = app[STATE], app[SETTINGS]
    state = holder.current
    if state is None:
        return _unavailable(settings, "cluster state not loaded yet")
    age = holder.age()
    if settings.stale_after and age is not None and age > settings.stale_after:
        return _unavailable(settings, f"cluster state is stale ({age:.0f}s old)")
    loop = asyncio.get_running_loop()
    call = loop.run_in_executor(app[EXECUTOR], judge, req, state, settings.policy, endpoint == "mutate")
    try:
        return await asyncio.wait_for(call, budget)
    except TimeoutError:
        app[METRICS].errors.labels("timeout").inc()
        return _unavailable(settings, f"decision overran {budget:.1f}s")
    except Exception:
        app[METRICS].errors.labels("exception").inc()
        log.exception("decision failed uid=%s kind=%s %s/%s", req.uid, req.kind, req.namespace, req.name)
        return Outcome(False, "internal-error", "tasgate failed to decide; see its log", 500)


def _unavailable(settings: Settings, why: str) -> Outcome:
    """The answer when tasgate cannot judge: the policy's documented choice, said plainly."""
    if settings.on_timeout == "deny":
        return Outcome(False, "unavailable", f"tasgate could not decide: {why}", 503)
    return Outcome(True, "unavailable", "", None, (f"tasgate did not check this workload: {why}",))


def _record(
    app: web.Application, req: AdmissionRequest, outcome: Outcome, endpoint: str, latency_us: int
) -> None:
    d = outcome.decision
    state = app[STATE].current
    app[AUDIT](audit_record(req, outcome, endpoint, latency_us, state.generation if state else None))
    m = app[METRICS]
    m.decision_seconds.labels(endpoint).observe(latency_us / 1e6)
    m.requests.labels(
        endpoint,
        req.operation,
        req.kind,
        "allow" if outcome.allowed else "deny",
        outcome.reason,
        (d.cluster_queue if d else None) or "",
        (d.queue if d else None) or "",
        req.namespace,
    ).inc()


def _hand_over_pod_groups(app: web.Application, req: AdmissionRequest, outcome: Outcome) -> None:
    """An admitted, persisted-to-be workload gets its PodGroups (live mode; never on dry-run)."""
    from webhook.podgroups import CREATOR, Intent  # noqa: PLC0415 - live-mode edge, imported late

    creator, d = app.get(CREATOR), outcome.decision
    if creator is None or d is None or not outcome.allowed or req.dry_run or not d.pod_groups:
        return
    name = str(((req.obj or {}).get("metadata") or {}).get("name") or req.name)
    creator.submit(
        Intent(req.group, req.version, req.resource, d.kind, d.api_version, req.namespace, name, d.pod_groups)
    )


def _json(body: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def _executor(app: web.Application) -> AsyncIterator[None]:
    app[EXECUTOR] = ThreadPoolExecutor(app[SETTINGS].decision_threads, thread_name_prefix="decide")
    yield
    app[EXECUTOR].shutdown(wait=True, cancel_futures=False)


def _cert_poller(interval: float) -> Callable[[web.Application], AsyncIterator[None]]:
    async def poll(app: web.Application) -> AsyncIterator[None]:
        reloader, m = app[RELOADER], app[METRICS]

        def reloaded(fingerprint: str) -> None:
            m.cert_reloads.inc()
            log.info("serving certificate reloaded fingerprint=%s", fingerprint[:16])

        def failed(error: Exception) -> None:
            log.warning("serving certificate reload failed: %s", error)

        task = asyncio.create_task(reloader.run(interval, on_reload=reloaded, on_error=failed))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return poll
