"""Do decisions scale with cores? (a benchmark, never a test): `make bench-threads`.

The compiled engine places a group in ``nogil`` C, both of a decision's placements (now and when
empty) in one call, so the GIL changes hands once per decision; the rest of a decision (reading
the workload, messages, the verdict) is Python and holds the GIL. A decision *process*
(``tasgate serve --decision-processes``) has a GIL of its own but pays the pipe. This decides
the same 64-pod block-required gang on a 10,000-node / 100,000-pod live state, side by side in
one run, with the server's GIL switch interval (`heap.share_the_gil`):

- on 1 and 2 server threads, as the server does without decision processes (`judge` and the
  `Brief` the handlers keep);
- through `DecisionProcesses.decide` with 1 and 2 decision processes, each holding its own copy
  of the same state, with as many reviews in flight as processes: the server's side of it
  (pickling, the pipe, its thread per process) is in the figure;
- each half of a decision alone on 1 and 2 threads, the placement and the Python
  (`bench.threads_halves`): which one keeps two threads from 2x.

It prints decisions per second, the speed-ups and the latency percentiles per decision. On a
2-core machine that other work shares, the speed-up is bounded by the cores actually free, so
before each thread round the same decisions run in 1 and 2 forked copies of the process (no GIL
shared, no pipe): the machine's own speed-up on this work at that moment, and the thread
speed-up's share of it (``share_of_the_machine``; 1.0 is all the cores allowed). Each thread
round also gives the CPU time a decision took and the share of the CPUs left idle: the speed-up
had a decision cost the same CPU on two busy cores as on one (``speedup_at_equal_cpu_cost``) is what
the GIL leaves of 2x; the median rounds' speed-up, the headline, also carries the cores slowing
each other, which on a shared VM varies from round to round (``speedup_of_best_rounds`` is the
fastest round of each). 2 threads confined to one CPU (`on_one_cpu`) give the CPU time a
decision takes with the same GIL hand-overs but nothing moving between the cores' caches.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import select
import signal
import statistics
import struct
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_live import KUEUE_KINDS, _node
from bench.live_memory import pod
from bench.threads_halves import halves, two_threads_on_one_cpu
from tests.webhook.conftest import job, kueue_objects
from webhook.decide.policy import Policy
from webhook.decide.review import judge
from webhook.files.policy import load_policy
from webhook.live import heap
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.serve.brief import brief_of
from webhook.serve.keys import Settings, StateSource
from webhook.serve.process_main import WorkerConfig
from webhook.serve.processes import DecisionProcesses
from webhook.state.cluster import ClusterState
from webhook.wire.admission import parse_review


def live_state(nodes: int, pods: int) -> ClusterState:
    mirror = Mirror(StateHolder(), [k.name for k in kinds()])
    mirror.replace("nodes", [_node(i) for i in range(nodes)])
    mirror.replace("pods", [pod(i, f"n{i % nodes}") for i in range(pods)])
    for name in mirror.watched - {"nodes", "pods"}:
        levels = ("block", "rack", "kubernetes.io/hostname")
        mirror.replace(name, kueue_objects(levels=levels) if name in KUEUE_KINDS else [])
    asyncio.run(mirror.publish_once())
    assert mirror.state is not None
    heap.settle()  # as the server does once its state is loaded (serve.main, the first sync)
    return mirror.state


def the_review() -> bytes:
    """The body of the review every decision reads: each decision parses it afresh, as the
    server does per request (a parsed request reused across decisions keeps its objects warm in
    the CPU's caches and allocates nothing: 20-30% faster than any real review)."""
    required = {"kueue.x-k8s.io/podset-required-topology": "block"}  # as bench_live decides
    obj = job(64, annotations=required, queue="q", namespace="team")
    request = {
        "uid": "bench", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"}, "namespace": "team",
        "operation": "CREATE", "userInfo": {"username": "bench"}, "object": obj,
    }  # fmt: skip
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3  # noqa: E731
    return {"p50_ms": round(at(0.5), 3), "p99_ms": round(at(0.99), 3)}


def cpu_ticks() -> tuple[int, int]:
    """(idle, all) jiffies of every CPU of the machine so far (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; user..steal


def on_threads(
    state: ClusterState, policy: Policy, body: bytes, per: int, rounds: int
) -> tuple[dict[int, dict[str, float]], list[float], list[float]]:
    """1 and 2 threads, alternating, ``rounds`` times: the median round of each, every round's
    speed-up, and before each round the machine's own speed-up on this work (`forked`). On a
    shared VM the other vCPU's speed varies with the host's load minute to minute: one round is
    not a figure. Each round also gives the CPU time a decision took on its thread and the
    share of the machine's CPUs left idle: on 2 threads the idle share is what the GIL costs,
    and a CPU time above the one-thread round's is the two busy cores slowing each other (shared
    caches, the host), not the GIL."""

    def work(count: int) -> tuple[list[float], float]:
        taken, cpu = [], time.thread_time()
        for _ in range(count):
            started = time.perf_counter()
            brief_of(judge(parse_review(body), state, policy, True).decision, policy.gpu_resources)
            taken.append(time.perf_counter() - started)
        return taken, time.thread_time() - cpu

    work(50)  # warm
    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    machine: list[float] = []
    one_cpu: list[float] = []
    for _ in range(rounds):
        machine.append(round(forked(work, per, 2) / forked(work, per, 1), 2))
        one_cpu.append(on_one_cpu(work, per))
        for threads in (1, 2):
            with ThreadPoolExecutor(threads) as pool:
                idle, ticks = cpu_ticks()
                started = time.perf_counter()
                parts = list(pool.map(work, [per] * threads))
                per_s = per * threads / (time.perf_counter() - started)
                idle, ticks = (now - then for now, then in zip(cpu_ticks(), (idle, ticks), strict=True))
            latencies = [x for taken, _ in parts for x in taken]
            cpu_us = 1e6 * sum(cpu for _, cpu in parts) / (per * threads)
            row = {"per_s": per_s, "cpu_us_per_decision": round(cpu_us), "idle_share": idle / max(ticks, 1)}
            runs[threads].append(row | percentiles(latencies))
    found = {n: sorted(r, key=lambda row: row["per_s"])[len(r) // 2] for n, r in runs.items()}
    for n, rows in runs.items():
        found[n]["best_per_s"] = max(row["per_s"] for row in rows)
    speedups = [round(b["per_s"] / a["per_s"], 2) for a, b in zip(runs[1], runs[2], strict=True)]
    found[2]["cpu_us_per_decision_on_one_cpu"] = round(statistics.median(one_cpu))
    return found, speedups, machine


def on_one_cpu(work: Callable[[int], tuple[list[float], float]], per: int) -> float:
    """The CPU time a decision takes on 2 threads confined to one CPU (µs): the same hand-overs
    of the GIL as on two, but the objects both threads touch (reference counts, the allocator's
    pools, the state) stay in one core's caches. Above it, the 2-thread rounds' CPU time is
    those objects moving between the cores on every hand-over (and the host)."""
    parts = two_threads_on_one_cpu(work, per)
    return 1e6 * sum(cpu for _, cpu in parts) / (2 * per)


def forked(work: Callable[[int], object], per: int, count: int) -> float:
    """Decisions per second of ``count`` forked copies of this process, each deciding ``per``
    times on its own interpreter (no GIL shared, no pipe, the same state by copy-on-write):
    what the machine's cores give this very work at the moment, the ceiling a thread speed-up
    is read against. Each copy warms first (its copy-on-write faults are not timed), then all
    start together and each reports the seconds its ``per`` decisions took."""
    ready, go, done = os.pipe(), os.pipe(), os.pipe()
    children = []
    try:
        for _ in range(count):
            pid = os.fork()
            if pid == 0:  # the copy: it never returns
                code = 1
                try:
                    work(50)
                    os.write(ready[1], b"r")
                    os.read(go[0], 1)
                    started = time.perf_counter()
                    work(per)
                    os.write(done[1], struct.pack("d", time.perf_counter() - started))
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            children.append(pid)
        os.close(ready[1])  # only the copies write these: a copy gone early reads as too short
        os.close(done[1])
        for _ in range(count):
            _read(ready[0], 1)
        os.write(go[1], b"g" * count)
        taken = [struct.unpack("d", _read(done[0], 8))[0] for _ in range(count)]
    except BaseException:
        for pid in children:  # a copy still waiting for "go", or still deciding
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    finally:
        for pid in children:
            os.waitpid(pid, 0)
        for fd in (ready[0], go[0], go[1], done[0]):
            os.close(fd)
    return per * count / max(taken)


def _read(fd: int, size: int, timeout: float = 300.0) -> bytes:
    """``size`` bytes a forked copy wrote, or an error: never a wait on a copy that is gone."""
    if not select.select([fd], [], [], timeout)[0]:
        raise TimeoutError(f"a forked decision copy said nothing for {timeout:.0f} s")
    data = os.read(fd, size)
    if len(data) != size:
        raise RuntimeError("a forked decision copy failed before answering (its traceback is above)")
    return data


async def on_processes(
    make: Callable[[], ClusterState], policy: Policy, body: bytes, per: int
) -> dict[int, Any]:
    found = {}
    for count in (1, 2):
        config = WorkerConfig(Settings(policy=policy), StateSource(), make_state=make)
        processes = DecisionProcesses(count, config)
        tasks = [asyncio.create_task(job()) for job in processes.jobs().values()]
        try:
            while processes.answered < 10 * count:  # every process up, its state built, warm
                await processes.decide(parse_review(body), True, policy, 60.0) or await asyncio.sleep(0.5)
            found[count] = await in_flight(processes, policy, body, per, count)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return found


async def in_flight(
    processes: DecisionProcesses, policy: Policy, body: bytes, per: int, count: int
) -> dict[str, float]:
    """``count`` clients, each deciding ``per`` reviews one after the other."""
    latencies: list[float] = []

    async def client() -> None:
        for _ in range(per):
            started = time.perf_counter()
            assert await processes.decide(parse_review(body), True, policy, 60.0) is not None
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(count)))
    return {"per_s": per * count / (time.perf_counter() - started), **percentiles(latencies)}


def run(nodes: int, pods: int, per: int, rounds: int) -> dict[str, Any]:
    policy, body = load_policy("none"), the_review()
    make = functools.partial(live_state, nodes, pods)
    state = make()
    threads, speedups, machine = on_threads(state, policy, body, per, rounds)
    parts = halves(state, policy, body, per, 3)
    processes = asyncio.run(on_processes(make, policy, body, per))
    on_threads_rows = {f"{n}_thread{'s' if n > 1 else ''}": v for n, v in threads.items()}
    rows: dict[str, dict[str, float]] = dict(on_threads_rows)
    rows |= {f"{n}_process{'es' if n > 1 else ''}": v for n, v in processes.items()}
    return {
        "nodes": nodes,
        "pods": pods,
        "decisions_per_s_1_thread": round(threads[1]["per_s"]),
        "decisions_per_s_2_threads": round(threads[2]["per_s"]),
        "decisions_per_s_1_process": round(processes[1]["per_s"]),
        "decisions_per_s_2_processes": round(processes[2]["per_s"]),
        "speedup": round(threads[2]["per_s"] / threads[1]["per_s"], 2),  # of the median rounds
        "speedup_per_round": speedups,
        # 2 forked copies over 1, before each thread round: the cores free for this work then
        "speedup_of_the_machine": round(statistics.median(machine), 2),
        "speedup_of_the_machine_per_round": machine,
        # each round's thread speed-up over the machine's just before it: 1.0 is all it allows
        "share_of_the_machine": round(
            statistics.median([t / m for t, m in zip(speedups, machine, strict=True)]), 2
        ),
        "speedup_of_best_rounds": round(threads[2]["best_per_s"] / threads[1]["best_per_s"], 2),
        # the speed-up had a decision cost the same CPU time on two busy cores as on one: what
        # the GIL leaves of 2x (the rest is the cores slowing each other)
        "speedup_at_equal_cpu_cost": round(
            threads[2]["per_s"]
            / threads[1]["per_s"]
            * threads[2]["cpu_us_per_decision"]
            / threads[1]["cpu_us_per_decision"],
            2,
        ),
        "speedup_2_processes_vs_1_thread": round(processes[2]["per_s"] / threads[1]["per_s"], 2),
        "speedup_2_processes_vs_1_process": round(processes[2]["per_s"] / processes[1]["per_s"], 2),
        "latency": {name: {k: row[k] for k in ("p50_ms", "p99_ms")} for name, row in rows.items()},
        "cpu_us_per_decision": {name: row["cpu_us_per_decision"] for name, row in on_threads_rows.items()}
        | {"2_threads_on_one_cpu": threads[2]["cpu_us_per_decision_on_one_cpu"]},
        "idle_share": {name: round(row["idle_share"], 3) for name, row in on_threads_rows.items()},
        # the placement alone and the Python alone, on 1 and 2 threads (bench.threads_halves)
        "halves": parts,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    heap.share_the_gil()  # the server's GIL switch interval (serve.main), as every figure here
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=1000, help="per thread or process")
    parser.add_argument("--rounds", type=int, default=7, help="of 1 and 2 threads, alternating")
    parser.add_argument("--out", type=Path, help="also write the result here (JSON)")
    args = parser.parse_args()
    result = run(args.nodes, args.pods, args.decisions, args.rounds)
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
