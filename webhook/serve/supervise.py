"""One supervisor for every background task of `tasgate serve` (controller-runtime's manager).

A background task that dies silently is worse than a crash: the replica keeps answering from
a state nobody updates, and two minutes later refuses every gated workload with no line saying
why. So no task is started bare: each runs under `Supervisor.keep`, which

- logs an unexpected exception once, with its traceback and the task's name;
- counts it (``on_restart(name)``: ``tasgate_task_restarts_total{task}``);
- restarts the task after a capped, jittered exponential backoff (`live.backoff`; a run that
  lasted ``stable_after`` seconds starts the backoff over);
- names a task that keeps failing (``failing_after`` failures in a row) in `problems`, which
  ``/readyz`` reports.

A task returning is a failure too: every supervised task is meant to run forever.
Cancellation (shutdown, a lost leadership) is not a failure and is never retried.

The test-only fault hook (``--test-fault-hook``) makes a named task fail on demand
(`inject`): a real watch cannot be made to raise at will, and this is the path such a raise takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.live.backoff import Backoff, Retry

log = logging.getLogger("tasgate.supervise")

Job = Callable[[], Awaitable[None]]


class InjectedFaultError(RuntimeError):
    """Raised in a task by the test-only fault hook."""


@dataclass
class TaskHealth:
    """What the supervisor knows of one task."""

    restarts: int = 0  # since start
    failures_in_a_row: int = 0  # reset by a run that lasts ``stable_after``
    last_error: str = ""
    running_since: float | None = None  # the current run's start; None while backing off


class Supervisor:
    def __init__(
        self,
        on_restart: Callable[[str], None] = lambda name: None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        stable_after: float = 60.0,
        failing_after: int = 3,
        fault_hook: bool = False,
    ) -> None:
        self.on_restart = on_restart
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self.stable_after, self.failing_after = stable_after, failing_after
        self.fault_hook = fault_hook
        self.health: dict[str, TaskHealth] = {}
        self._faults: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def spawn(self, name: str, job: Job) -> asyncio.Task[None]:
        """Run ``job`` supervised from now until `stop`."""
        task = asyncio.create_task(self.keep(name, job), name=name)
        self._tasks.append(task)
        return task

    async def keep(self, name: str, job: Job) -> None:
        """Run ``job()`` again and again: forever, or until cancelled (then it is not failing)."""
        health = self.health.setdefault(name, TaskHealth())
        try:
            await self._keep(name, job, health)
        except asyncio.CancelledError:
            health.running_since, health.failures_in_a_row = None, 0  # stopped, not failing
            raise

    async def _keep(self, name: str, job: Job, health: TaskHealth) -> None:
        retry = Retry(Backoff(self.backoff_initial, self.backoff_max), stable_after=self.stable_after)
        while True:
            retry.attempt()
            health.running_since = time.monotonic()
            failure: Exception | None = None
            try:
                await self._run(name, job)
                error = "returned"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure, error = exc, f"{type(exc).__name__}: {exc}"[:300]
            pause = retry.failed()
            if failure is None:
                log.error("task %s returned (it should run forever); restarting in %.1fs", name, pause)
            else:
                log.error("task %s failed; restarting in %.1fs", name, pause, exc_info=failure)
            health.restarts += 1
            health.failures_in_a_row = retry.failures
            health.last_error, health.running_since = error, None
            self.on_restart(name)
            await asyncio.sleep(pause)

    async def run_all(self, jobs: Mapping[str, Job]) -> None:
        """Run several jobs supervised until cancelled, then cancel them all: a leader's writers
        (``live.leader`` runs this as the work of each term, and restarts nothing itself) or a
        MultiKueue worker's watches. It never returns nor raises: each job is kept apart."""
        tasks = [asyncio.create_task(self.keep(name, job), name=name) for name, job in jobs.items()]
        try:
            await asyncio.gather(*tasks)
        finally:
            await _cancel(tasks)

    def problems(self) -> list[str]:
        """Tasks that keep failing, for /readyz: ``failing_after`` failures in a row, and not
        running for ``stable_after`` seconds since (a task that recovered is not named)."""
        now = time.monotonic()
        return [
            f"task {name} keeps failing ({h.failures_in_a_row} restarts in a row; last: {h.last_error})"
            for name, h in sorted(self.health.items())
            if h.failures_in_a_row >= self.failing_after
            and (h.running_since is None or now - h.running_since < self.stable_after)
        ]

    def inject(self, name: str) -> bool:
        """Make the running task ``name`` fail now (test-only hook); whether it is running."""
        fault = self._faults.get(name)
        if not self.fault_hook or fault is None:
            return False
        fault.set()
        return True

    async def stop(self) -> None:
        await _cancel(self._tasks)
        self._tasks.clear()

    async def _run(self, name: str, job: Job) -> None:
        if not self.fault_hook:
            await job()
            return
        fault = self._faults[name] = asyncio.Event()
        work = asyncio.ensure_future(job())
        trigger = asyncio.ensure_future(fault.wait())
        try:
            await asyncio.wait({work, trigger}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel([trigger] + ([] if work.done() else [work]))
        if not work.done() or work.cancelled():
            raise InjectedFaultError(f"fault injected into task {name}")
        work.result()


async def _cancel(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel and wait for ``tasks``; an exception one raised while stopping is logged, not lost."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception:
                log.exception("task %s failed while stopping", _name(task))


def _name(task: asyncio.Future[Any]) -> str:
    return task.get_name() if isinstance(task, asyncio.Task) else "?"
