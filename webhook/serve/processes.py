"""Decisions in worker processes, so decisions per second scale with cores.

A decision's two placements run in one ``nogil`` call, so on 2 cores a second decision thread
nearly doubles decisions (1.5-2.0x, `make bench-threads`); the rest of a decision (reading the
workload, the rules, messages, the verdict) is Python that holds the GIL and caps threads at
about 2x. For more cores, ``--decision-processes N`` starts N decision processes
(`process_main`), each holding its own copy of the cluster state (its own list+watch in live
mode, the same files in static mode) and deciding what the server sends it over a pipe, one
review at a time; the server keeps TLS, HTTP, the audit line, metrics, the tracker and every
writer.

Never worse than no processes: a review no process can take now (none started yet, its state
not loaded or stale, the process gone mid-review) is decided in the server as it would be
without them. A process that exits is logged, counted and restarted by the app's supervisor
(``tasgate_task_restarts_total{task="decision-process-<i>"}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import pickle
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from webhook.decide.policy import Policy
from webhook.decide.review import Outcome
from webhook.serve.brief import Brief
from webhook.serve.process_main import WorkerConfig, worker_main
from webhook.wire.admission import AdmissionRequest

log = logging.getLogger("tasgate.processes")

REPLY_SLACK_SECONDS = 0.05  # past the review's budget, how long a process's answer is awaited
FALLBACK_LOG_EVERY = 60.0  # seconds between two log lines saying reviews are decided in the server


@dataclass(frozen=True, slots=True)
class Answer:
    outcome: Outcome  # without its `Decision`: what was needed of it is in ``brief``
    brief: Brief | None
    placements: tuple[float, ...] = ()  # seconds of each placement the scorer made for it


class DecisionFailedError(RuntimeError):
    """The decision raised in the process; its traceback is in the process's log."""


class _Worker:
    """One decision process, its end of the pipe and the one server thread that talks to it."""

    def __init__(self, index: int, context: Any, config: WorkerConfig) -> None:
        self.index = index
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=worker_main, args=(child, config), name=f"tasgate-decide-{index}", daemon=True
        )
        self.child: Connection = child
        self.policy: Policy | None = None  # the last one sent: sent again only when replaced
        self.alive = False
        self.pending: asyncio.Future[tuple[Any, ...]] | None = None  # the answer awaited

    def listen(self, loop: asyncio.AbstractEventLoop, done: Callable[[_Worker, bool], None]) -> None:
        """Read answers on the loop as they come (no thread between the loop and the pipe)."""
        loop.add_reader(self.conn.fileno(), self._readable, loop, done)

    def ask(self, loop: asyncio.AbstractEventLoop, message: bytes) -> asyncio.Future[tuple[Any, ...]]:
        """Send one review (reviews are at most `LARGE_BODY_BYTES`: the process is idle, reading)."""
        self.pending = loop.create_future()
        self.conn.send_bytes(message)
        return self.pending

    def _readable(self, loop: asyncio.AbstractEventLoop, done: Callable[[_Worker, bool], None]) -> None:
        pending, self.pending = self.pending, None
        try:
            reply = pickle.loads(self.conn.recv_bytes())
        except (EOFError, OSError) as exc:
            self.deaf(loop)
            if pending is not None and not pending.done():
                pending.set_exception(exc)
            done(self, False)
            return
        if pending is not None and not pending.done():  # else its review gave up waiting
            pending.set_result(reply)
        done(self, True)

    def deaf(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop reading (before the pipe closes) and count the process gone."""
        self.alive = False
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(self.conn.fileno())

    def stop(self) -> None:
        """End the process (SIGTERM, then SIGKILL) and close both ends of the pipe. A process
        whose start raised has nothing to end: the start's error is the one reported."""
        self.alive = False
        if self.process.pid is not None:
            if self.process.is_alive():
                self.process.terminate()
            self.process.join(2.0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(2.0)
        self.conn.close()
        self.child.close()  # closed already once started; held still when the start failed


class DecisionProcesses:
    """N decision processes behind one `decide`; each runs as a supervised job (`jobs`)."""

    def __init__(self, count: int, config: WorkerConfig) -> None:
        self.count = count
        self.config = config
        self._context = multiprocessing.get_context("spawn")  # never fork a process with threads
        self._workers: dict[int, _Worker] = {}
        self._idle: asyncio.Queue[_Worker] | None = None
        self._last_fallback_log = 0.0
        self.answered = 0  # reviews a process answered
        self.fell_back = 0  # reviews handed back to the server (see `decide`)

    def jobs(self) -> dict[str, Callable[[], Awaitable[None]]]:
        return {f"decision-process-{i}": functools.partial(self.keep, i) for i in range(self.count)}

    @property
    def alive(self) -> int:
        return sum(1 for w in self._workers.values() if w.alive)

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers.values() if w.alive and w.process.pid]

    async def keep(self, index: int) -> None:
        """Run process ``index`` until it exits (a failure: the supervisor restarts it)."""
        worker = _Worker(index, self._context, self.config)
        try:
            await asyncio.to_thread(worker.process.start)
            worker.child.close()  # the process holds its end: EOF there when the server goes
            worker.alive = True
            worker.listen(asyncio.get_running_loop(), self._answered)
            self._workers[index] = worker
            self._queue().put_nowait(worker)
            await _exited(worker.process.sentinel)
            raise RuntimeError(f"decision process {index} exited with code {worker.process.exitcode}")
        finally:
            self._workers.pop(index, None)
            worker.deaf(asyncio.get_running_loop())
            await asyncio.to_thread(worker.stop)

    async def decide(
        self, req: AdmissionRequest, mutating: bool, policy: Policy, budget: float
    ) -> Answer | None:
        """The answer of a process; None when no process can take ``req`` (decide it in the server).

        Raises `TimeoutError` past ``budget`` and `DecisionFailedError` when the decision raised."""
        if not self.alive:
            self._fallback("no decision process is running")
            return None
        loop = asyncio.get_running_loop()
        started = loop.time()
        idle = self._idle_now()
        worker = idle if idle is not None else await asyncio.wait_for(self._take(), budget)
        left = max(budget - (loop.time() - started), 0.001)
        message = pickle.dumps((req, mutating, left, None if worker.policy is policy else policy), 5)
        worker.policy = policy
        try:
            asked = worker.ask(loop, message)
            reply = await asyncio.wait_for(
                asked, left + REPLY_SLACK_SECONDS
            )  # its answer, if late, is dropped
        except (EOFError, OSError) as exc:
            self._answered(worker, False)
            self._fallback(f"decision process {worker.index} went away ({type(exc).__name__})")
            return None
        return self._answer(reply)

    def _answer(self, reply: tuple[Any, ...]) -> Answer | None:
        kind = reply[0]
        if kind == "ok":
            self.answered += 1
            return Answer(*reply[1:])
        if kind == "not-ready":
            self._fallback(f"decision process not ready: {reply[1]}")
            return None
        if kind == "timeout":
            raise TimeoutError
        raise DecisionFailedError(str(reply[1]))

    def _idle_now(self) -> _Worker | None:
        """An idle, live process without waiting (the common case: no task, no loop round)."""
        queue = self._queue()
        while not queue.empty():
            worker = queue.get_nowait()
            if worker.alive:
                return worker
        return None

    async def _take(self) -> _Worker:
        """An idle, live process (waiting for one when all are busy)."""
        while True:
            worker = await self._queue().get()
            if worker.alive:
                return worker

    def _answered(self, worker: _Worker, ok: bool) -> None:
        """An answer read (``ok``): the process is idle again; a broken pipe: it is stopped, and
        restarted by `keep`."""
        if ok and worker.alive:
            self._queue().put_nowait(worker)
            return
        worker.alive = False
        if worker.process.is_alive():
            worker.process.terminate()

    def _queue(self) -> asyncio.Queue[_Worker]:
        if self._idle is None:
            self._idle = asyncio.Queue()
        return self._idle

    def _fallback(self, why: str) -> None:
        self.fell_back += 1
        now = time.monotonic()
        if now - self._last_fallback_log > FALLBACK_LOG_EVERY:
            self._last_fallback_log = now
            log.warning("reviews are decided in the server: %s", why)


async def _exited(sentinel: int) -> None:
    """Until the process behind ``sentinel`` exits (it becomes readable then)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def exited() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(sentinel, exited)
    try:
        await done
    finally:
        loop.remove_reader(sentinel)
