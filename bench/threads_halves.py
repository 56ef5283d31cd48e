"""The two halves of a decision on 1 and 2 threads: which one keeps two threads from 2x.

A decision is one compiled placement call without the GIL (`place_group_both`, both of its
placements) between two stretches of Python that hold it. `make bench-threads` times each half
alone, on 1 and 2 threads, with the server's GIL switch interval:

- the placement: the very call a decision makes, with the arrays and the request it passed;
- the Python: the whole decision with that call answered at once from its recorded result
  (the same request read, the same verdict, messages and brief: only the C is left out);
- the Python on 2 threads confined to one CPU: the same GIL hand-overs, one core's caches.

CPU time a call (`time.thread_time`) and calls a second, the median of ``rounds``. The
placement scales with the cores; the Python cannot (one GIL), and what the bench shows besides
is that it costs more CPU on two cores than on one: the objects both threads touch (reference
counts, the allocator's pools) move between the cores' caches with the GIL. Benchmark code:
it swaps the compiled module's function for the Python rounds, and puts it back.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import scorer
from webhook.decide.policy import Policy
from webhook.decide.review import judge
from webhook.serve.brief import brief_of
from webhook.state.cluster import ClusterState
from webhook.wire.admission import parse_review

_T = TypeVar("_T")
Work = Callable[[int], float]  # n calls -> CPU seconds a call on the calling thread


def halves(state: ClusterState, policy: Policy, body: bytes, per: int, rounds: int) -> dict[str, Any]:
    """Each half's CPU µs a call and speed-up of 2 threads over 1 (medians of ``rounds``)."""
    if scorer.IMPLEMENTATION != "compiled":
        raise SystemExit("bench-threads needs the compiled scorer (pip install -e . builds it)")
    core: Any = scorer.default_engine()

    def decision() -> None:
        brief_of(judge(parse_review(body), state, policy, True).decision, policy.gpu_resources)

    recorded = _recorded_call(core, decision)

    def placement(n: int) -> float:
        started = time.thread_time()
        for _ in range(n):
            core.place_group_both(*recorded)
        return (time.thread_time() - started) / n

    def python(n: int) -> float:
        started = time.thread_time()
        for _ in range(n):
            decision()
        return (time.thread_time() - started) / n

    answer = core.place_group_both(*recorded)
    found = {"placement": _on_1_and_2(placement, per, rounds)}
    with _answered(core, lambda *_: answer):
        one_cpu = round(statistics.median(_on_one_cpu(python, per) for _ in range(rounds)))
        found["python"] = _on_1_and_2(python, per, rounds) | {"cpu_us_2_threads_on_one_cpu": one_cpu}
    return found


def _recorded_call(core: Any, decision: Callable[[], None]) -> tuple[Any, ...]:
    """The arguments of the placement call a decision makes (exactly one, or the bench is wrong)."""
    calls: list[tuple[Any, ...]] = []
    real = core.place_group_both

    def record(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    with _answered(core, record):
        decision()
    if len(calls) != 1:
        raise SystemExit(f"a decision made {len(calls)} placement calls, not 1: these are not its halves")
    return calls[0]


@contextlib.contextmanager
def _answered(core: Any, call: Callable[..., Any]) -> Iterator[None]:
    real = core.place_group_both
    core.place_group_both = call
    try:
        yield
    finally:
        core.place_group_both = real


def _on_1_and_2(work: Work, per: int, rounds: int) -> dict[str, float]:
    runs: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    work(50)  # warm
    for _ in range(rounds):
        for threads in (1, 2):
            with ThreadPoolExecutor(threads) as pool:
                started = time.perf_counter()
                cpu = list(pool.map(work, [per] * threads))
                runs[threads].append((statistics.mean(cpu), per * threads / (time.perf_counter() - started)))
    cpu_us = {n: round(1e6 * statistics.median(c for c, _ in rows)) for n, rows in runs.items()}
    rate = {n: statistics.median(r for _, r in rows) for n, rows in runs.items()}
    speedup = round(rate[2] / rate[1], 2)
    return {"cpu_us_1_thread": cpu_us[1], "cpu_us_2_threads": cpu_us[2], "speedup": speedup}


def _on_one_cpu(work: Work, per: int) -> float:
    return 1e6 * statistics.mean(two_threads_on_one_cpu(work, per))


def two_threads_on_one_cpu(work: Callable[[int], _T], per: int) -> list[_T]:
    """``work(per)`` on 2 threads confined to one CPU: the same hand-overs of the GIL as on two,
    but the objects both threads touch stay in one core's caches."""
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mask)})  # threads started from here on inherit it
    try:
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(work, [per] * 2))
    finally:
        os.sched_setaffinity(0, mask)
