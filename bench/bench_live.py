"""Live state at cluster scale (a benchmark, never a test): `make bench-live`.

Drives the real ``Mirror`` (the one writer), ``StateHolder`` and decision path in one process
with a replayed watch stream: N Nodes, P bound Pods, then pod churn at E events/s (one Pod
created or deleted per event) plus one node-set change per 10 s, while reviews are decided on
the server's thread pool. Rest and churn are measured in the same run, interleaved. Prints and
writes ``bench/live.json``: one object per (nodes, events/s) run.

What it does not do: reviews here skip the aiohttp server and TLS (the decision path only); the
API server's own cost is not in it (``make e2e-scale`` would be the place).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.live_memory import pod, rss_now_mib
from tests.webhook.conftest import job, kueue_objects, node
from webhook.decide.decision import decide
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.live import heap
from webhook.live.holder import StateHolder
from webhook.live.mirror import Mirror
from webhook.live.watch import LIST_PAGE, kinds

KUEUE_KINDS = ("topologies", "resourceflavors", "clusterqueues", "localqueues")


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


async def run(nodes: int, pods: int, rate: int, seconds: float) -> dict[str, Any]:
    holder = StateHolder(source="live")
    heap.settle()  # as `tasgate serve` does before it starts
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
    with ThreadPoolExecutor(4) as pool:
        rest = await _reviews(pool, holder, seconds / 2)
        node_visible = await _visible(
            holder,
            lambda: mirror.apply(
                "nodes", "MODIFIED", node("n0", {"block": "b0", "rack": "r0", "pool": "gpu"}, gpus=2)
            ),
        )
        pod_visible = await _visible(holder, lambda: mirror.apply("pods", "ADDED", pod(10**9, "n1")))
        churn_task = asyncio.create_task(_churn(mirror, nodes, rate, seconds, applies))
        churn = await _reviews(pool, holder, seconds)
        await churn_task
    stop.set()
    await probe
    publisher.cancel()
    return {
        "nodes": nodes,
        "pods": pods,
        "events_per_s": rate,
        "review_p50_ms_rest": _pct(rest, 0.5),
        "review_p99_ms_rest": _pct(rest, 0.99),
        "review_p50_ms_churn": _pct(churn, 0.5),
        "review_p99_ms_churn": _pct(churn, 0.99),
        "max_loop_stall_ms": round(max(stalls, default=0.0), 2),
        "event_apply_us": round(statistics.mean(applies), 2) if applies else 0.0,
        "visible_ms": round(max(pod_visible, node_visible), 1),
        "pod_visible_ms": round(pod_visible, 1),
        "node_visible_ms": round(node_visible, 1),
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
    args = parser.parse_args()
    results = []
    for nodes in args.nodes:
        for rate in args.rates:
            result = asyncio.run(run(nodes, args.pods, rate, args.seconds))
            print(json.dumps(result))
            results.append(result)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
