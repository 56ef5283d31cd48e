"""Background Pod churn for the scale scenario: the cluster keeps changing while reviews are timed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from e2e import scale


@dataclass
class Churn:
    """Background Pod churn: 1-GPU Pods created on busy hosts and deleted again a few seconds later.

    A busy host has one GPU free, so a churn Pod changes usage (every event is a real change for
    tasgate's mirror) but never makes room for a whole-host Pod: the gang's verdict does not move.
    """

    api: scale.Api
    shape: scale.Shape
    lifetime_s: float = 3.0
    in_flight: int = 32
    creates: int = 0
    deletes: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    _tasks: set[asyncio.Future[None]] = field(default_factory=set, init=False, repr=False)

    @property
    def events(self) -> int:
        return self.creates + self.deletes

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Churn]:
        """Churn while the block runs; afterwards every churn Pod is deleted again."""
        slots = asyncio.Semaphore(self.in_flight)
        alive: deque[tuple[float, str]] = deque()
        task = asyncio.create_task(self._loop(slots, alive))
        start = time.perf_counter()
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.seconds = time.perf_counter() - start
            for _ in range(self.in_flight):
                await slots.acquire()  # every pending request has finished
            leftovers = (functools.partial(self.api.delete_pod, scale.USAGE_NAMESPACE, n) for _, n in alive)
            await scale.run_bounded(leftovers, self.in_flight)

    async def _loop(self, slots: asyncio.Semaphore, alive: deque[tuple[float, str]]) -> None:
        """One create and the due deletes per tick; when requests back up, the ticks wait (and the
        achieved rate, `events_per_s`, says so)."""
        busy = [scale.node_name(i) for i in range(self.shape.nodes) if scale.is_busy(self.shape, i)]
        hosts = itertools.cycle(busy)
        period = 2.0 / self.shape.churn_per_s  # one create and one delete per period
        for tick in itertools.count():
            began = time.perf_counter()
            await self._launch(slots, functools.partial(self._create, f"churn-{tick}", next(hosts), alive))
            while alive and began - alive[0][0] > self.lifetime_s:
                await self._launch(slots, functools.partial(self._delete, alive.popleft()[1]))
            await asyncio.sleep(max(0.0, period - (time.perf_counter() - began)))

    async def _create(self, name: str, host: str, alive: deque[tuple[float, str]]) -> None:
        await self.api.add_pod(scale.usage_pod(name, host, 1))
        self.creates += 1
        alive.append((time.perf_counter(), name))

    async def _delete(self, name: str) -> None:
        await self.api.delete_pod(scale.USAGE_NAMESPACE, name)
        self.deletes += 1

    async def _launch(self, slots: asyncio.Semaphore, call: Callable[[], Awaitable[None]]) -> None:
        """Start ``call`` once a request slot is free (the loop waits for one)."""
        await slots.acquire()

        async def run() -> None:
            try:
                await call()
            except (scale.ApiError, aiohttp.ClientError, TimeoutError) as exc:
                self.errors.append(str(exc)[:200])
            finally:
                slots.release()

        self._tasks.add(task := asyncio.ensure_future(run()))
        task.add_done_callback(self._tasks.discard)
