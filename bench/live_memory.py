"""Memory of the live mirror at cluster scale (a benchmark, not a test).

Feeds N Nodes and 5 bound Pods per Node (kilobyte-sized, as the API server sends them, in pages
of 500 as the watch's paged list reads them) through the real ``Mirror``, publishes one state
with its snapshots, and prints the time it took and the process's peak and
current RSS. Usage: ``.venv/bin/python bench/live_memory.py [NODES]`` (default 10,000).
"""

from __future__ import annotations

import asyncio
import gc
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.webhook.conftest import kueue_objects, node
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.live.watch import LIST_PAGE

KUEUE_KINDS = ("topologies", "resourceflavors", "clusterqueues", "localqueues")


def pod(i: int, node_name: str) -> dict[str, Any]:
    container = {
        "name": "c",
        "image": "registry.example.com/train:1",
        "resources": {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}},
        "env": [{"name": f"E{k}", "value": "v" * 20} for k in range(10)],
    }
    meta = {
        "name": f"p{i}",
        "namespace": "team",
        "uid": f"uid-{i}",
        "labels": {"app": "train", "job-name": f"j{i // 8}"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 800},
    }
    conditions = [{"type": t, "status": "True"} for t in ("Ready", "PodScheduled", "Initialized")]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node_name, "containers": [container]},
        "status": {"phase": "Running", "conditions": conditions},
    }


def rss_now_mib() -> float:
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    names = [k.name for k in kinds()]
    mirror = Mirror(StateHolder(), names)
    started = time.perf_counter()
    mirror.replace(
        "nodes", [node(f"n{i}", {"block": f"b{i // 1000}", "rack": f"r{i // 50}"}) for i in range(count)]
    )
    listing = mirror.listing("pods")  # in pages, as the watch's paged list delivers them
    for start in range(0, 5 * count, LIST_PAGE):
        listing.add([pod(i, f"n{i % count}") for i in range(start, min(5 * count, start + LIST_PAGE))])
    mirror.commit(listing)
    del listing
    for name in names:
        if name not in ("nodes", "pods"):
            mirror.replace(name, kueue_objects() if name in KUEUE_KINDS else [])
    listed = time.perf_counter() - started
    gc.collect()
    started = time.perf_counter()
    asyncio.run(mirror.publish_once())  # the state and every TAS flavor's snapshot
    state = mirror.state
    assert state is not None
    built = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{count} nodes, {5 * count} pods: listed in {listed:.1f} s, state built in {built * 1000:.0f} ms")
    print(f"RSS peak {peak:.0f} MiB, now {rss_now_mib():.0f} MiB (interpreter and imports: {base:.0f} MiB)")
    assert len(state.nodes) == count and not mirror.raw.get("pods")


if __name__ == "__main__":
    main()
