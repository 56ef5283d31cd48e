"""What the app holds: its configuration, its typed ``web.AppKey``s, and its mutable runtime.

A leaf module: the app factory, the handlers and the start-up code all import it, and it
imports none of them, so no edge module has to reach into another for shared state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from webhook.decide.policy import Policy
from webhook.live.holder import StateHolder
from webhook.live.leader import Campaign
from webhook.live.rebuild_hold import RebuildHold
from webhook.live.reconcile import Reconciler
from webhook.live.watch import WatchSettings
from webhook.serve.metrics import Metrics
from webhook.serve.supervise import Supervisor
from webhook.serve.tls import CertReloader
from webhook.serve.waiting import RecentWaiting
from webhook.wire.admission import MAX_BODY_BYTES, AdmissionRequest

AuditSink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Settings:
    policy: Policy
    on_timeout: str = "allow"  # allow | deny: the answer when a decision overruns the API server's timeout
    stale_after: float = 0.0  # seconds; 0 = a static state never goes stale
    allow_reference_scorer: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    decision_threads: int = 4
    decision_processes: int = 0  # > 0: decide in that many worker processes (``serve.processes``)
    timeout_margin: float = 0.8  # share of the API server's timeout a decision may use
    cert_poll_seconds: float = 10.0
    read_timeout: float = 10.0  # seconds a client has for a request head, and again for its body
    policy_file: str | None = None  # a policy read from this file is reloaded when its content changes
    fault_hook: bool = False  # test-only: POST /debug/raise/<task> on the metrics port makes a task raise
    pod_info_metrics: bool = False  # export tasgate_pod_info, one series per running pod of a gang


@dataclass(frozen=True)
class Election:
    """Who writes (PodGroups, Events): the holder of one ``coordination.k8s.io`` Lease.

    Every replica answers reviews; only the leader runs the writers, so two replicas never
    write twice. Off (every replica writes) only where one replica runs by design (tests).
    """

    enabled: bool = True
    campaign: Campaign = field(default_factory=Campaign)


@dataclass(frozen=True)
class StateSource:
    """Where cluster state comes from: parsed dump objects (static), or the API server (live).

    With neither, the state is never loaded (the server stays unready): what tests of that
    path use. ``kubeconfig`` None with ``live`` set means the pod's in-cluster service account.
    """

    objects: Sequence[Mapping[str, Any]] | None = None
    label: str = "static"
    live: bool = False
    kubeconfig: str | None = None
    watch: WatchSettings = field(default_factory=WatchSettings)
    election: Election = field(default_factory=Election)
    # Live mode: watch the MultiKueue worker clusters whose kubeconfig Secrets are in this
    # namespace (Kueue's own), ``--multikueue-workers``; None: not watched.
    multikueue_namespace: str | None = None


@dataclass
class PolicyState:
    """The policy in force; replaced (never mutated) when its file's content changes and parses.

    ``digest`` is the SHA-256 of the file content in force (None for the built-in policies);
    ``error`` is why the newest content was refused (the previous policy stays), else None.
    """

    current: Policy
    path: str | None = None
    digest: str | None = None
    error: str | None = None


@dataclass
class Runtime:
    """Mutable serving state: draining flag and in-flight count, for readiness and SIGTERM."""

    draining: bool = False
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)


class Deciders(Protocol):
    """The decision processes as the app uses them (``serve.processes.DecisionProcesses``, which
    imports this leaf module: named here by what it does, not imported)."""

    def jobs(self) -> dict[str, Callable[[], Awaitable[None]]]: ...

    async def decide(self, req: AdmissionRequest, mutating: bool, policy: Policy, budget: float) -> Any: ...


SETTINGS = web.AppKey("settings", Settings)
STATE = web.AppKey("state", StateHolder)
REBUILD_HOLD = web.AppKey("rebuild-hold", RebuildHold)  # test-only (`serve.debug`)
METRICS = web.AppKey("metrics", Metrics)
AUDIT: web.AppKey[AuditSink] = web.AppKey("audit")
RUNTIME = web.AppKey("runtime", Runtime)
POLICY = web.AppKey("policy", PolicyState)
EXECUTOR = web.AppKey("executor", ThreadPoolExecutor)
# Reviews with large bodies decide on their own thread, so cheap ones never queue behind them.
LARGE_EXECUTOR = web.AppKey("large_executor", ThreadPoolExecutor)
LARGE_BODY_BYTES = 256 * 1024
RELOADER = web.AppKey("reloader", CertReloader)
API = web.AppKey("api", ApiClient)  # live mode only
PODGROUPS = web.AppKey("podgroups", Reconciler)  # live mode only
WAITING = web.AppKey("waiting", RecentWaiting)  # gangs recently told to wait, for /topology
SUPERVISOR = web.AppKey("supervisor", Supervisor)  # every background task runs under it
MAIN = web.AppKey("main", web.Application)
PROCESSES = web.AppKey("processes", Deciders)  # --decision-processes > 0
# On a review request once its body parses: the uid an error is still answered with (serve.errors).
REVIEW_UID = web.RequestKey("review_uid", str)  # on the metrics app: the webhook app it reports on


def main_app(app: web.Application) -> web.Application:
    """The webhook app whose state a request reads, whether it came in on its port or the metrics port."""
    return app.get(MAIN) or app
