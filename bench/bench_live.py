"""Live state at cluster scale (a benchmark, never a test): `make bench-live`.

Drives the real ``Mirror`` (the one writer), ``StateHolder`` and decision path in one process
with a replayed watch stream: N Nodes, P bound Pods, then pod churn at E events/s (one Pod
created or deleted per event) plus one node-set change per 10 s, while reviews are decided on
the server's thread pool. Rest and churn are measured in the same run, interleaved. Prints and
writes ``bench/live.json``: one object per (nodes, events/s) run.

Reviews are measured twice, one at a time: through the decision path on the server's thread
pool (``review_*``), and as AdmissionReviews through the real app over TLS (``review_tls_*``:
aiohttp, the handlers, JSON, TLS; client and server share the process and its loop). The API
server's own cost is not in it (``make e2e-scale`` is the place).

Node events are timed one at a time to visibility, 28 of them (capacity, cordon, NotReady, a
move to another rack, to a new block and rack, a node removed and added back), as
``node_visible_ms`` (p50) and ``node_visible_p99_ms``, with the longest loop stall while they
ran (``max_loop_stall_ms_node_events``); each includes the writer's 50 ms debounce.

Beside the loop, one process per CPU, pinned to it, only naps (1 ms at a time) while the stalls
are measured (``bench/napper.py``); ``host_max_oversleep_ms`` is the longest any of them
overslept. A napper wakes late when its CPU was taken from the VM (the host runs other VMs on
these cores): a loop stall that long can happen in that run whatever tasgate does. The nappers
cost the run a few percent of the CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.live_memory import pod, rss_now_mib
from tests.webhook.conftest import job, job_review, kueue_objects, node
from webhook.decide.decision import decide
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.live import heap
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.live.watch import LIST_PAGE
from webhook.serve import certs
from webhook.serve.app import create_app
from webhook.serve.keys import STATE, Settings, StateSource
from webhook.serve.tls import server_context

KUEUE_KINDS = ("topologies", "resourceflavors", "clusterqueues", "localqueues")
NAPPER = str(Path(__file__).with_name("napper.py"))  # the VM's own stalls (bench/napper.py)


def _node(i: int) -> dict[str, Any]:
    return node(f"n{i}", {"block": f"b{i // 1000}", "rack": f"r{i // 50}", "pool": "gpu"})


async def _stall_probe(stop: asyncio.Event, stalls: list[float]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.005)
        stalls.append((time.perf_counter() - t - 0.005) * 1000)


async def _reviews(pool: ThreadPoolExecutor, holder: StateHolder, seconds: float) -> list[float]:
    """Decisions one at a time (concurrency 1) for ``seconds``; their latencies in ms."""
    policy = load_policy("none")
    obj = job(
        64, annotations={"kueue.x-k8s.io/podset-required-topology": "block"}, queue="q", namespace="team"
    )
    loop = asyncio.get_running_loop()
    out: list[float] = []
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        state = holder.current
        assert state is not None
        t = time.perf_counter()
        await loop.run_in_executor(pool, decide, Review(obj, "team"), state, policy)
        out.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(0.002)
    return out


async def _churn(mirror: Mirror, nodes: int, rate: int, seconds: float, applies: list[float]) -> None:
    interval, i, until = 1.0 / rate, 0, time.perf_counter() + seconds
    next_node_change = time.perf_counter() + 10
    while time.perf_counter() < until:
        key = f"churn-{i // 2}"
        event = "ADDED" if i % 2 == 0 else "DELETED"
        obj = pod(10**7 + i // 2, f"n{(i // 2) % nodes}") | {"metadata": {"name": key, "namespace": "team"}}
        t = time.perf_counter()  # the watch's own JSON decoding is not in the figure
        mirror.apply("pods", event, obj)
        applies.append((time.perf_counter() - t) * 1e6)
        if time.perf_counter() > next_node_change:
            mirror.apply(
                "nodes",
                "MODIFIED",
                node(f"n{i % nodes}", {"block": "bx", "rack": "rx", "pool": "gpu"}, gpus=4),
            )
            next_node_change += 10
        i += 1
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - t)))


def _node_changes(mirror: Mirror) -> list[Callable[[], None]]:
    """One node event of each kind, then again: capacity, cordon, NotReady, a move to another
    rack, to a new block and rack, a node removed and added back."""
    labels = {"block": "b0", "rack": "r0", "pool": "gpu"}
    kinds: list[dict[str, Any]] = [
        node("n0", labels, gpus=2),
        node("n0", labels, gpus=2, cordoned=True),
        node("n0", labels, gpus=2, ready=False),
        node("n0", labels | {"rack": "r1"}),
        node("n0", labels | {"block": "b-new", "rack": "r-new"}),
    ]
    changes: list[Callable[[], None]] = []
    for round_ in range(4):
        for obj in kinds:
            changes.append(lambda obj=obj: mirror.apply("nodes", "MODIFIED", obj))
        gone = node(f"n{round_ + 10}", {"block": "b0", "rack": f"r{(round_ + 10) // 50}", "pool": "gpu"})
        changes.append(lambda gone=gone: mirror.apply("nodes", "DELETED", gone))
        changes.append(lambda gone=gone: mirror.apply("nodes", "ADDED", gone))
    return changes


async def _visible(holder: StateHolder, change: Callable[[], None]) -> float:
    """Milliseconds from one watch event to a published state that holds it."""
    assert holder.current is not None
    generation = holder.current.generation
    started = time.perf_counter()
    change()
    while holder.current.generation == generation:
        await asyncio.sleep(0.001)
    return (time.perf_counter() - started) * 1000


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 2) if values else 0.0


@contextlib.asynccontextmanager
async def _tls_server(workdir: Path) -> AsyncIterator[tuple[web.Application, str, ssl.SSLContext]]:
    """The real app (handlers, executors, metrics, audit) on a TLS port, with no state of its
    own: the bench's Mirror publishes into its holder. Yields (app, URL, client context)."""
    files = certs.generate(workdir, ["localhost"], ["127.0.0.1"], days=1)
    app = create_app(Settings(policy=load_policy("none")), lambda _record: None, StateSource())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(files.cert, files.key))
    await site.start()
    port = runner.addresses[0][1]
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    try:
        yield app, f"https://127.0.0.1:{port}/validate?timeout=10s", client
    finally:
        await runner.cleanup()


async def _tls_reviews(session: aiohttp.ClientSession, url: str, body: bytes, seconds: float) -> list[float]:
    """AdmissionReviews through TLS, aiohttp and the handlers, one at a time; latencies in ms."""
    out: list[float] = []
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        t = time.perf_counter()
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
            answer = await response.read()
        out.append((time.perf_counter() - t) * 1000)
        assert response.status == 200 and b'"allowed"' in answer, answer[:200]
        await asyncio.sleep(0.002)
    return out


def _review_body() -> bytes:
    obj = job(
        64, annotations={"kueue.x-k8s.io/podset-required-topology": "block"}, queue="q", namespace="team"
    )
    return job_review(obj, "bench", "team", "bench")


async def run(nodes: int, pods: int, rate: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workdir:
        async with (
            _tls_server(Path(workdir)) as (app, url, client),
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client, limit=1)) as session,
        ):
            return await _run(app[STATE], session, url, nodes, pods, rate, seconds)


async def _run(
    holder: StateHolder,
    session: aiohttp.ClientSession,
    url: str,
    nodes: int,
    pods: int,
    rate: int,
    seconds: float,
) -> dict[str, Any]:
    heap.settle()  # as `tasgate serve` does before it starts
    heap.share_the_gil()
    mirror = Mirror(holder, [k.name for k in kinds()], settle_heap=True)
    started = time.perf_counter()
    mirror.replace("nodes", [_node(i) for i in range(nodes)])
    listing = mirror.listing("pods")  # in pages, as the paged list of the watch delivers them
    for start in range(0, pods, LIST_PAGE):
        listing.add([pod(i, f"n{i % nodes}") for i in range(start, min(pods, start + LIST_PAGE))])
    mirror.commit(listing)
    del listing
    for name in mirror.watched - {"nodes", "pods"}:
        mirror.replace(
            name,
            kueue_objects(levels=("block", "rack", "kubernetes.io/hostname")) if name in KUEUE_KINDS else [],
        )
    publisher = asyncio.create_task(mirror.publish_forever())
    while holder.current is None:
        await asyncio.sleep(0.01)
    ready = time.perf_counter() - started
    stop, stalls, applies = asyncio.Event(), [], []  # type: ignore[var-annotated]
    probe = asyncio.create_task(_stall_probe(stop, stalls))
    nappers = [
        subprocess.Popen([sys.executable, NAPPER, str(cpu)], stdout=subprocess.PIPE, text=True)
        for cpu in sorted(os.sched_getaffinity(0))
    ]
    body = _review_body()
    with ThreadPoolExecutor(4) as pool:
        rest = await _reviews(pool, holder, seconds / 2)
        rest_tls = await _tls_reviews(session, url, body, seconds / 2)
        first_stall = len(stalls)
        node_times = [await _visible(holder, change) for change in _node_changes(mirror)]
        node_stall = max(stalls[first_stall:], default=0.0)
        pod_visible = await _visible(holder, lambda: mirror.apply("pods", "ADDED", pod(10**9, "n1")))
        churn_task = asyncio.create_task(_churn(mirror, nodes, rate, 2 * seconds, applies))
        churn = await _reviews(pool, holder, seconds)
        churn_tls = await _tls_reviews(session, url, body, seconds)
        await churn_task
    stop.set()
    await probe
    publisher.cancel()
    for napper in nappers:
        napper.terminate()
    host_stall = max(float(napper.communicate(timeout=10)[0].strip() or "nan") for napper in nappers)
    return {
        "nodes": nodes,
        "pods": pods,
        "events_per_s": rate,
        "review_p50_ms_rest": _pct(rest, 0.5),
        "review_p99_ms_rest": _pct(rest, 0.99),
        "review_p50_ms_churn": _pct(churn, 0.5),
        "review_p99_ms_churn": _pct(churn, 0.99),
        "review_tls_p50_ms_rest": _pct(rest_tls, 0.5),
        "review_tls_p99_ms_rest": _pct(rest_tls, 0.99),
        "review_tls_p50_ms_churn": _pct(churn_tls, 0.5),
        "review_tls_p99_ms_churn": _pct(churn_tls, 0.99),
        "max_loop_stall_ms": round(max(stalls, default=0.0), 2),
        "host_max_oversleep_ms": host_stall,
        "event_apply_us": round(statistics.mean(applies), 2) if applies else 0.0,
        "visible_ms": round(max(pod_visible, _pct(node_times, 0.5)), 1),
        "pod_visible_ms": round(pod_visible, 1),
        "node_visible_ms": _pct(node_times, 0.5),
        "node_visible_p99_ms": _pct(node_times, 0.99),
        "node_events": len(node_times),
        "max_loop_stall_ms_node_events": round(node_stall, 2),
        "ready_s": round(ready, 2),
        "rss_mib": round(rss_now_mib()),
        "rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--rates", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", default=str(Path(__file__).with_name("live.json")))
    parser.add_argument("--one", action="store_true", help="one (nodes, rate) run in this process")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(run(args.nodes[0], args.pods, args.rates[0], args.seconds))))
        return
    results = []
    for nodes in args.nodes:
        for rate in args.rates:
            # Each run in a fresh process: its RSS and ready time are its own, not the last run's heap.
            argv = [sys.executable, __file__, "--one", "--nodes", str(nodes), "--rates", str(rate)]
            argv += ["--pods", str(args.pods), "--seconds", str(args.seconds)]
            done = subprocess.run(argv, check=True, capture_output=True, text=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(result), flush=True)
            results.append(result)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
