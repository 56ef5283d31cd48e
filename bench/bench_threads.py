"""Do decisions run in parallel? (a benchmark, never a test): `make bench-threads`.

The compiled engine places a group in ``nogil`` C; the rest of a decision (reading the workload,
messages, the verdict) is Python and holds the GIL. This decides the same 64-pod block-required
gang on a 10,000-node / 100,000-pod live state with 1 and with 2 threads, side by side in one run,
and prints decisions per second and the speed-up. On a 2-core machine that other work shares, the speed-up is
bounded by the cores actually free: read the load average it prints next to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_live import KUEUE_KINDS, _node
from bench.live_memory import pod
from tests.webhook.conftest import job, kueue_objects
from webhook.decide.decision import decide
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.live.holder import StateHolder
from webhook.live.mirror import Mirror
from webhook.live.watch import kinds
from webhook.state.cluster import ClusterState


def live_state(nodes: int, pods: int) -> ClusterState:
    mirror = Mirror(StateHolder(), [k.name for k in kinds()])
    mirror.replace("nodes", [_node(i) for i in range(nodes)])
    mirror.replace("pods", [pod(i, f"n{i % nodes}") for i in range(pods)])
    for name in mirror.watched - {"nodes", "pods"}:
        levels = ("block", "rack", "kubernetes.io/hostname")
        mirror.replace(name, kueue_objects(levels=levels) if name in KUEUE_KINDS else [])
    asyncio.run(mirror.publish_once())
    assert mirror.state is not None
    return mirror.state


def run(nodes: int, pods: int, per_thread: int) -> dict[str, Any]:
    state, policy = live_state(nodes, pods), load_policy("none")
    required = {"kueue.x-k8s.io/podset-required-topology": "block"}  # as bench_live decides
    obj = job(64, annotations=required, queue="q", namespace="team")

    def work(count: int) -> None:
        for _ in range(count):
            decide(Review(obj, "team"), state, policy)

    work(50)  # warm
    rates = {}
    for threads in (1, 2):
        with ThreadPoolExecutor(threads) as pool:
            started = time.perf_counter()
            list(pool.map(work, [per_thread] * threads))
            rates[threads] = per_thread * threads / (time.perf_counter() - started)
    return {
        "nodes": nodes,
        "pods": pods,
        "decisions_per_s_1_thread": round(rates[1]),
        "decisions_per_s_2_threads": round(rates[2]),
        "speedup": round(rates[2] / rates[1], 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=1000, help="per thread")
    parser.add_argument("--out", type=Path, help="also write the result here (JSON)")
    args = parser.parse_args()
    result = run(args.nodes, args.pods, args.decisions)
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
