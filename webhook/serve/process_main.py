"""Inside a decision process: its own cluster state, and one review at a time from the server's pipe.

Started by ``serve.processes`` (the ``spawn`` start method: a fresh interpreter, nothing of the
server's threads). The state comes the way the server's does: the same files, or a list+watch
of its own against the API server (``live_tasks.watch_into``), so it is as fresh as the
server's without a byte of it crossing the pipe. Each review is decided by the very steps the
server runs (`deciding.decide_held`); what goes back is the outcome without its `Decision`, the
`Brief` the server's audit line and metrics read, and the seconds of each placement (the
server's scorer histogram). The process ends when the server's end of the pipe closes.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

import scorer
from webhook.decide.policy import Policy
from webhook.decide.review import judge
from webhook.live import heap
from webhook.live.api import api_client
from webhook.live.holder import StateHolder
from webhook.serve.brief import brief_of
from webhook.serve.catch_up import waits
from webhook.serve.deciding import decide_held, settled, state_problem
from webhook.serve.keys import Settings, StateSource
from webhook.serve.live_tasks import watch_into
from webhook.serve.supervise import Supervisor
from webhook.serve.timed_engine import TimedEngine
from webhook.state.cluster import ClusterState, build_state
from webhook.wire.admission import AdmissionRequest

log = logging.getLogger("tasgate.decision-process")


@dataclass(frozen=True)
class WorkerConfig:
    settings: Settings
    source: StateSource
    # Benchmarks and tests: a picklable callable making the state (instead of ``source``).
    make_state: Callable[[], ClusterState] | None = None


class Stopwatch(TimedEngine):
    """An engine that notes how long each placement took, for the server's scorer histogram."""

    def __init__(self, engine: scorer.Engine) -> None:
        self.seconds: list[float] = []
        super().__init__(engine, self.seconds.append)

    def take(self) -> tuple[float, ...]:
        taken = tuple(self.seconds)
        self.seconds.clear()
        return taken


def worker_main(conn: Connection, config: WorkerConfig) -> None:
    """The process's entry point (a picklable top-level function, as ``spawn`` needs)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the server's to handle
    heap.share_the_gil()
    asyncio.run(_serve(conn, config))


async def _serve(conn: Connection, config: WorkerConfig) -> None:
    holder = StateHolder(source="live" if config.source.live else config.source.label)
    supervisor = Supervisor()
    watch = Stopwatch(scorer.default_engine())
    policy = [config.settings.policy]  # replaced when the server sends a newer one
    api = await _load(holder, supervisor, config, watch, lambda: policy[0])
    loop = asyncio.get_running_loop()
    serving = Serving(conn, holder, config.settings, policy, watch, loop)
    try:
        await asyncio.to_thread(serving.run)  # the loop keeps the watches meanwhile
    finally:
        await supervisor.stop()
        if api is not None:
            await api.close()


class Serving:
    """Reviews read, decided and answered on one thread, no hop through the loop on the way: a
    hand-over between threads costs a GIL switch (up to ``sys.getswitchinterval()``) each. Only a
    verdict judged again on newer states (`catch_up`) runs on the loop, which publishes them."""

    def __init__(
        self,
        conn: Connection,
        holder: StateHolder,
        settings: Settings,
        policy: list[Policy],
        watch: Stopwatch,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.conn, self.holder, self.settings = conn, holder, settings
        self.policy, self.watch, self.loop = policy, watch, loop

    def run(self) -> None:
        while True:
            try:
                raw = self.conn.recv_bytes()
            except (EOFError, OSError):
                return  # the server is gone
            req, mutating, budget, newer = pickle.loads(raw)
            if newer is not None:
                self.policy[0] = newer
            self.conn.send_bytes(pickle.dumps(self.reply(req, mutating, budget), 5))

    def reply(self, req: AdmissionRequest, mutating: bool, budget: float) -> tuple[Any, ...]:
        holder, settings, policy = self.holder, self.settings, self.policy[0]
        state, problem = holder.current, state_problem(holder, settings)
        if problem or state is None:
            return ("not-ready", problem)
        self.watch.take()
        started = time.monotonic()
        try:
            outcome = judge(req, state, policy, mutating, () if mutating else holder.earlier())
            if waits(holder, outcome):
                left = max(budget - (time.monotonic() - started), 0.001)
                again = decide_held(holder, settings, req, mutating, policy, left, None)
                outcome = asyncio.run_coroutine_threadsafe(again, self.loop).result(left + 1.0)
        except TimeoutError:
            return ("timeout",)
        except Exception:
            log.exception("decision failed uid=%s kind=%s %s/%s", req.uid, req.kind, req.namespace, req.name)
            return ("failed", traceback.format_exc(limit=3).strip().splitlines()[-1])
        if time.monotonic() - started > budget:
            return ("timeout",)
        brief = brief_of(outcome.decision, policy.gpu_resources, mutating)
        return ("ok", replace(settled(outcome, settings), decision=None), brief, self.watch.take())


async def _load(
    holder: StateHolder,
    supervisor: Supervisor,
    config: WorkerConfig,
    stopwatch: Stopwatch,
    policy: Callable[[], Policy],
) -> Any:
    """Fill ``holder`` as the server fills its own; the API client in live mode, else None."""
    source = config.source
    if config.make_state is not None:
        holder.publish(await asyncio.to_thread(config.make_state))
    elif source.objects is not None:
        holder.publish(build_state(source.objects, 1, stopwatch))
        heap.settle()
    elif source.live:
        api = await api_client(source.kubeconfig)
        watch_into(holder, api, supervisor, policy, source, stopwatch, config.settings.stale_after)
        return api
    return None
