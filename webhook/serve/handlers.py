"""The routes: handlers only move bytes.

``wire.admission`` parses, ``decide.review.judge`` decides (in a thread, so a slow decision never
blocks /healthz), ``audit`` and ``metrics`` record. A broken request is an HTTP-level answer; a
bad object is a denial inside a well-formed AdmissionReview.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import replace
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome
from webhook.live.api import get_object
from webhook.live.reconcile import Intent
from webhook.model.workloads.registry import ADAPTERS
from webhook.serve import hangups, scale
from webhook.serve.audit import audit_record
from webhook.serve.brief import Brief, brief_of
from webhook.serve.deciding import decide_held, unavailable
from webhook.serve.keys import (
    API,
    AUDIT,
    EXECUTOR,
    LARGE_BODY_BYTES,
    LARGE_EXECUTOR,
    METRICS,
    PODGROUPS,
    POLICY,
    PROCESSES,
    REVIEW_UID,
    RUNTIME,
    SETTINGS,
    STATE,
    WAITING,
    main_app,
)
from webhook.serve.metrics import RequestLabels
from webhook.serve.processes import Answer, DecisionFailedError
from webhook.state.cluster import ClusterState
from webhook.wire.admission import AdmissionRequest, MalformedReview, parse_review, parse_timeout
from webhook.wire.admission import review_response as respond

log = logging.getLogger("tasgate")


async def mutate(request: web.Request) -> web.Response:
    return await _review(request, "mutate")


async def validate(request: web.Request) -> web.Response:
    return await _review(request, "validate")


async def metrics(request: web.Request) -> web.Response:
    """Rendered in the decision pool: the topology gauges of a 50,000-node state take tens of
    milliseconds, which on the loop would hold every review and watch event for as long."""
    app = main_app(request.app)
    loop = asyncio.get_running_loop()
    pool = app.get(EXECUTOR)  # None (the loop's default pool) when the side app runs alone
    body = await loop.run_in_executor(pool, generate_latest, app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _review(request: web.Request, endpoint: str) -> web.Response:
    started = time.perf_counter_ns()
    runtime = request.app[RUNTIME]
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
        async with asyncio.timeout(app[SETTINGS].read_timeout):  # no task per review, as wait_for makes
            raw = await request.read()
    except TimeoutError:
        app[METRICS].errors.labels("slow-body").inc()
        log.warning("bad request: body not received within %gs; closing", app[SETTINGS].read_timeout)
        response = web.json_response({"error": "request body not received in time"}, status=408)
        response.force_close()
        return response
    except ConnectionError:
        return hangups.hung_up(request, "before its body arrived")
    except web.RequestPayloadError as exc:
        app[METRICS].errors.labels("malformed").inc()
        encoding = request.headers.get("Content-Encoding")
        why = (
            f"Content-Encoding is {encoding} but the body does not decode as {encoding}"
            if encoding
            else re.sub(r"\s+", " ", str(exc)).strip()
        )
        log.warning("bad request: body cannot be read: %s", why)
        return web.json_response({"error": f"request body cannot be read: {why}"}, status=400)
    try:
        req = parse_review(raw)
    except MalformedReview as exc:
        app[METRICS].errors.labels("malformed").inc()
        if exc.uid:
            return json_response(
                respond(exc.uid, False, code=400, message=f"malformed AdmissionReview: {exc}")
            )
        return web.json_response({"error": f"malformed AdmissionReview: {exc}"}, status=400)
    request[REVIEW_UID] = req.uid
    budget = parse_timeout(request.query.get("timeout")) * app[SETTINGS].timeout_margin
    if scale.is_scale(req):
        answer = await _judge_scale(app, req, endpoint, budget)
    else:
        answer = await _decide(app, req, endpoint, budget, len(raw) > LARGE_BODY_BYTES)
    outcome, brief = answer.outcome, answer.brief
    latency_us = (time.perf_counter_ns() - started) // 1000
    _record(app, req, answer, endpoint, latency_us)
    if endpoint == "mutate" and not req.dry_run:  # the picture's waiting gangs (serve.waiting)
        app[WAITING].note(brief)
    if endpoint == "validate":
        _hand_over_pod_groups(app, req, outcome, brief)
    body = respond(
        req.uid,
        outcome.allowed,
        code=outcome.code if not outcome.allowed else None,
        message=outcome.message,
        warnings=outcome.warnings,
        patch=outcome.patch if endpoint == "mutate" and not req.sub_resource else (),
        audit=outcome.audit,
    )
    return json_response(body)


async def _decide(
    app: web.Application,
    req: AdmissionRequest,
    endpoint: str,
    budget: float,
    large: bool = False,
    as_written: bool = False,
) -> Answer:
    """In a decision process when there are any and one can take it, else on a server thread.
    ``as_written``: judged with nothing injected (the policy's settings, none of its rules), in
    the server (a decision process keeps the policy the server sent it)."""
    mutating, policy = endpoint == "mutate", app[POLICY].current
    if as_written:
        policy = replace(policy, rules=())
    processes = app.get(PROCESSES)
    try:
        if processes is not None and not large and not as_written:  # a large body: dearer to send
            answer: Answer | None = await processes.decide(req, mutating, policy, budget)
            if answer is not None:
                app[METRICS].decided_in.labels("process").inc()
                return answer
        app[METRICS].decided_in.labels("server").inc()
        executor = app[LARGE_EXECUTOR] if large else app[EXECUTOR]
        outcome = await decide_held(app[STATE], app[SETTINGS], req, mutating, policy, budget, executor)
    except TimeoutError:
        app[METRICS].errors.labels("timeout").inc()
        return Answer(unavailable(app[SETTINGS], f"decision overran {budget:.1f}s"), None)
    except Exception as exc:
        app[METRICS].errors.labels("exception").inc()
        where = "in a decision process: " + str(exc) if isinstance(exc, DecisionFailedError) else ""
        log.error("decision failed uid=%s kind=%s %s/%s %s", req.uid, req.kind, req.namespace, req.name,
                  where, exc_info=not where)  # fmt: skip
        failed = unavailable(app[SETTINGS], "tasgate failed to decide; see its log")
        return Answer(replace(failed, reason=Reason.INTERNAL_ERROR), None)
    return Answer(outcome, brief_of(outcome.decision, policy.gpu_resources, mutating))


async def _judge_scale(app: web.Application, req: AdmissionRequest, endpoint: str, budget: float) -> Answer:
    """A change of the scale subresource: the parent as the API server stores it, with the new
    count, judged as a CREATE (so the count is judged even on an admitted workload), as written:
    nothing can be injected through a Scale, and Kueue runs the parent as it is stored."""
    settings = app[SETTINGS]
    replicas = scale.wanted_replicas(req)
    if not scale.known(req) or replicas is None:
        return Answer(Outcome(True, Reason.SKIPPED_OPERATION), None)
    api = app.get(API)
    if api is None:
        why = "a scale change can only be checked in live mode (no API server)"
        return Answer(unavailable(settings, why), None)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        parent = await asyncio.wait_for(get_object(api, scale.parent_path(req), budget), budget / 2)
    except (ApiException, aiohttp.ClientError, TimeoutError, OSError) as exc:
        app[METRICS].errors.labels("scale-parent").inc()
        why = getattr(exc, "status", None) or type(exc).__name__
        why = f"cannot read {req.resource}/{req.name} to judge its scale ({why})"
        return Answer(unavailable(settings, why), None)
    remaining = max(budget - (loop.time() - started), 0.001)
    return await _decide(app, scale.as_create(req, parent, replicas), endpoint, remaining, as_written=True)


def _record(
    app: web.Application, req: AdmissionRequest, answer: Answer, endpoint: str, latency_us: int
) -> None:
    outcome, d = answer.outcome, answer.brief
    state = app[STATE].current
    final = is_final(endpoint, outcome.allowed)
    generation = state.generation if state else None
    app[AUDIT](audit_record(req, outcome, d, endpoint, latency_us, generation, final))
    labels = request_labels(state, endpoint, req, d.cluster_queue if d else None, d.queue if d else None)
    app[METRICS].count_review(
        labels, outcome.allowed, outcome.reason.value, req.dry_run, final, latency_us / 1e6
    )
    app[METRICS].observe_placements(answer.placements)


def is_final(endpoint: str, allowed: bool) -> bool:
    """Whether this call is the API request's verdict, so each request counts as one decision.

    The shipped webhooks send every request to /mutate, then (after all mutating webhooks, on
    the stored form with its UID) to /validate: the validate call has the last word. A /mutate
    denial ends the request there (validate never sees it), so it is the verdict itself. A
    /mutate allow is not: validate follows, or the request was refused by someone else.
    """
    return endpoint == "validate" or not allowed


OTHER = "other"  # the label value of anything not in a bounded set
ENDPOINTS = frozenset({"mutate", "validate"})
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
KINDS = frozenset(kind for _, kind in ADAPTERS)


def request_labels(
    state: ClusterState | None,
    endpoint: str,
    req: AdmissionRequest,
    cluster_queue: str | None,
    queue: str | None,
) -> RequestLabels:
    """endpoint, operation, kind, cluster_queue, local_queue, namespace: every value from a bounded set.

    A request carries whatever its sender wrote; only names the cluster state holds (or fixed
    sets) become label values, anything else is "other", so no request can grow /metrics.
    """
    namespaces = state.namespaces if state else {}
    cq = cluster_queue if cluster_queue and state and cluster_queue in state.cluster_queues else None
    lq = queue if queue and state and (req.namespace, queue) in state.local_queues else None
    return RequestLabels(
        endpoint=endpoint if endpoint in ENDPOINTS else OTHER,
        operation=req.operation if req.operation in OPERATIONS else OTHER,
        kind=req.kind if req.kind in KINDS else OTHER,
        cluster_queue="" if not cluster_queue else cq or OTHER,
        local_queue="" if not queue else lq or OTHER,
        namespace=req.namespace if req.namespace in namespaces else OTHER,
    )


def _hand_over_pod_groups(
    app: web.Application, req: AdmissionRequest, outcome: Outcome, d: Brief | None
) -> None:
    """An admitted, persisted-to-be workload's PodGroups, early (live mode; never on dry-run).

    Only a hint: the reconciler creates them from what the API server holds in any case.
    """
    reconciler = app.get(PODGROUPS)
    if reconciler is None or d is None or not outcome.allowed or req.dry_run or not d.pod_groups:
        return
    name = str(((req.obj or {}).get("metadata") or {}).get("name") or req.name)
    # Only which object: what to create is computed from the object the API server stored.
    reconciler.hint(Intent(req.group, req.version, req.resource, d.kind, d.api_version, req.namespace, name))


def json_response(body: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")
