#!/usr/bin/env python3
"""Benchmark the topology scorer: both engines, synthetic GPU clusters of 1k / 10k / 50k nodes.

    python bench/bench_scorer.py [--out bench/latest.json] [--quick] [--sizes 1000,10000]

Not a test: it never fails on a slow result, it prints the targets with PASS/MISS. Each
measurement warms up, times one call, then repeats for a time budget (between a minimum and
a maximum count), with the garbage collector off while the clock runs, as ``timeit`` does.
See bench/README.md for the cluster shape and the JSON format.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import random
import resource
import statistics
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scorer
from scorer import Cluster, View
from scorer.model import HOSTNAME_LABEL, Mode, Node, Placement, PodSetRequest, Taint, TopologyRequest

GPU = "nvidia.com/gpu"
GiB = 2**30
LEVELS = ("zone", "block", "rack", HOSTNAME_LABEL)
HOSTS_PER_RACK = 96
RACKS_PER_BLOCK = 4
BLOCKS_PER_ZONE = 4
ALLOCATABLE = {"cpu": 128000, "memory": 1024 * GiB, GPU: 8, "pods": 110}
USED_SHARE, TAINTED_SHARE, CORDONED_SHARE = 0.30, 0.005, 0.005
SIZES = (1000, 10000, 50000)

# Targets, reported but never enforced.
TARGET_PLACE_US = 1000.0  # full placement at 10k nodes, compiled, median
TARGET_SPEEDUP = 30.0  # compiled vs reference, full placement at 10k nodes
TARGET_BUILD_MS = 200.0  # Cluster.build at 10k nodes, median


def synthetic_nodes(n: int, seed: int = 20260801) -> list[Node]:
    """zone / block / rack / host, 96 hosts a rack, 4 racks a block, 4 blocks a zone.

    About 30% of the nodes are partly used (some GPUs, cpu, memory, pods), 0.5% carry an
    untolerated NoSchedule taint, 0.5% are cordoned (in ``never`` only).
    """
    rng = random.Random(seed)
    nodes = []
    for i in range(n):
        rack = i // HOSTS_PER_RACK
        block = rack // RACKS_PER_BLOCK
        zone = f"z{block // BLOCKS_PER_ZONE:03d}"
        b = f"{zone}-b{block % BLOCKS_PER_ZONE}"
        labels = {
            "zone": zone,
            "block": b,
            "rack": f"{b}-r{rack % RACKS_PER_BLOCK}",
            HOSTNAME_LABEL: f"gpu-{i:05d}",
        }
        usage: dict[str, int] = {}
        if rng.random() < USED_SHARE:
            usage = {
                GPU: rng.choice((0, 1, 2, 4, 8)),
                "cpu": rng.choice((2000, 16000, 64000)),
                "memory": rng.choice((16, 128, 512)) * GiB,
                "pods": rng.randint(1, 30),
            }
        taints = (
            (Taint("nvidia.com/gpu", "NoSchedule", "maintenance"),) if rng.random() < TAINTED_SHARE else ()
        )
        nodes.append(
            Node(
                name=labels[HOSTNAME_LABEL],
                labels=labels,
                allocatable=ALLOCATABLE,
                taints=taints,
                unschedulable=rng.random() < CORDONED_SHARE,
                usage=usage,
            )
        )
    return nodes


def _worker(name: str, count: int, mode: Mode, level: str | None, group: str | None = None) -> PodSetRequest:
    return PodSetRequest(
        name, count, {GPU: 8, "cpu": 32000, "memory": 256 * GiB}, TopologyRequest(mode, level, group=group)
    )


FULL = (_worker("trainer", 64, Mode.REQUIRED, "rack"),)
LEADER_WORKERS = (
    PodSetRequest(
        "launcher", 1, {"cpu": 4000, "memory": 16 * GiB}, TopologyRequest(Mode.REQUIRED, "block", group="g")
    ),
    _worker("workers", 32, Mode.REQUIRED, "block", group="g"),
)
IMPLIED = (
    PodSetRequest("serve", 256, {GPU: 1, "cpu": 8000, "memory": 64 * GiB}, TopologyRequest(Mode.IMPLIED)),
)


@dataclass(frozen=True)
class Budget:
    seconds: float
    min_repeats: int
    max_repeats: int
    warmup: int


FULL_BUDGET = Budget(seconds=1.0, min_repeats=5, max_repeats=3000, warmup=3)
QUICK_BUDGET = Budget(seconds=0.15, min_repeats=3, max_repeats=300, warmup=1)


def measure(fn: Callable[[], object], budget: Budget) -> list[int]:
    """Nanoseconds per call: warm up, size the run from one timed call, then repeat."""
    for _ in range(budget.warmup):
        fn()
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        fn()
        first = time.perf_counter_ns() - start
        repeats = int(budget.seconds * 1e9 / max(first, 1))
        repeats = max(budget.min_repeats, min(budget.max_repeats, repeats))
        samples = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            fn()
            samples.append(time.perf_counter_ns() - start)
    finally:
        gc.enable()
    return samples


def p90(samples: Sequence[int]) -> float:
    ordered = sorted(samples)
    return float(ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)])


def entry(
    benchmark: str, nodes: int, implementation: str, samples: Sequence[int], **extra: Any
) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "nodes": nodes,
        "implementation": implementation,
        "median_us": round(statistics.median(samples) / 1000, 2),
        "p90_us": round(p90(samples) / 1000, 2),
        "min_us": round(min(samples) / 1000, 2),
        "repeats": len(samples),
        **extra,
    }


PLACEMENTS: tuple[tuple[str, str, tuple[PodSetRequest, ...]], ...] = (
    ("place_rack_now", "now", FULL),
    ("place_rack_never", "never", FULL),
    ("place_leader_workers", "now", LEADER_WORKERS),
    ("place_implied_256", "now", IMPLIED),
)


def run_size(n: int, budget: Budget, results: list[dict[str, Any]]) -> Cluster:
    nodes = synthetic_nodes(n)
    build = measure(lambda: Cluster.build("default", LEVELS, nodes), budget)
    results.append(entry("snapshot_build", n, scorer.IMPLEMENTATION, build, engine_independent=True))
    print(f"  {n:>6} nodes: snapshot_build {statistics.median(build) / 1e6:.1f} ms", flush=True)
    cluster = Cluster.build("default", LEVELS, nodes)
    engines = scorer.engines()
    for name, view_name, pod_sets in PLACEMENTS:
        view: View = getattr(cluster, view_name)
        answers: dict[str, tuple[Placement, ...]] = {}
        for impl in sorted(engines):
            engine = engines[impl]
            answers[impl] = view.place(pod_sets, engine=engine)
            samples = measure(functools.partial(view.place, pod_sets, engine=engine), budget)
            fits = all(p.fits for p in answers[impl])
            results.append(entry(name, n, impl, samples, fits=fits))
            print(
                f"  {n:>6} nodes: {name:<22} {impl:<9} median {statistics.median(samples) / 1000:>10.1f} us"
                f"  ({len(samples)} runs, fits={fits})",
                flush=True,
            )
        if len({repr(a) for a in answers.values()}) != 1:
            print(f"  WARNING: engines disagree on {name} at {n} nodes", flush=True)
    return cluster


def add_speedups(results: list[dict[str, Any]]) -> None:
    by_key = {(r["benchmark"], r["nodes"], r["implementation"]): r for r in results}
    for (bench, n, impl), ref in list(by_key.items()):
        comp = by_key.get((bench, n, "compiled"))
        if impl == "reference" and comp is not None and comp["median_us"] > 0:
            results.append(
                {
                    "benchmark": bench,
                    "nodes": n,
                    "implementation": "reference/compiled",
                    "speedup": round(ref["median_us"] / comp["median_us"], 1),
                }
            )


def print_table(results: list[dict[str, Any]]) -> None:
    timed = {(r["benchmark"], r["nodes"], r["implementation"]): r for r in results if "median_us" in r}
    speed = {(r["benchmark"], r["nodes"]): r["speedup"] for r in results if "speedup" in r}
    rows = sorted(
        {(r["benchmark"], r["nodes"]) for r in results if "median_us" in r}, key=lambda k: (k[1], k[0])
    )
    head = (
        f"{'benchmark':<22} {'nodes':>6} | {'compiled med':>12} {'p90':>10} {'runs':>5}"
        f" | {'reference med':>13} {'p90':>11} {'runs':>5} | {'speedup':>7}"
    )
    print()
    print(head)
    print("-" * len(head))
    for bench, n in rows:
        comp = timed.get((bench, n, "compiled"))
        ref = timed.get((bench, n, "reference"))
        if bench == "snapshot_build":
            comp = timed.get((bench, n, scorer.IMPLEMENTATION))
        left = (
            f"{comp['median_us']:>10.1f}us {comp['p90_us']:>8.1f}us {comp['repeats']:>5}"
            if comp
            else " " * 32
        )
        right = (
            f"{ref['median_us']:>11.1f}us {ref['p90_us']:>9.1f}us {ref['repeats']:>5}" if ref else " " * 34
        )
        ratio = f"{speed[(bench, n)]:>6.1f}x" if (bench, n) in speed else f"{'-':>7}"
        print(f"{bench:<22} {n:>6} | {left} | {right} | {ratio}")
    print("(snapshot_build is engine-independent Python; it is listed under the compiled column)")


def report_targets(results: list[dict[str, Any]]) -> None:
    timed = {(r["benchmark"], r["nodes"], r["implementation"]): r for r in results if "median_us" in r}
    speed = {(r["benchmark"], r["nodes"]): r["speedup"] for r in results if "speedup" in r}

    def verdict(ok: bool | None) -> str:
        return "n/a " if ok is None else ("PASS" if ok else "MISS")

    place = timed.get(("place_rack_now", 10000, "compiled"))
    build = timed.get(("snapshot_build", 10000, scorer.IMPLEMENTATION))
    ratio = speed.get(("place_rack_now", 10000))
    print("\nTargets (reported, never enforced):")
    place_us = None if place is None else place["median_us"]
    print(
        f"  [{verdict(None if place_us is None else place_us <= TARGET_PLACE_US)}] full placement at"
        f" 10,000 nodes (compiled, now) <= {TARGET_PLACE_US:.0f} us median: "
        + ("not measured" if place_us is None else f"{place_us:.1f} us")
    )
    print(
        f"  [{verdict(None if ratio is None else ratio >= TARGET_SPEEDUP)}] compiled >= {TARGET_SPEEDUP:.0f}x"
        f" reference (full placement, 10,000 nodes): "
        + ("not measured" if ratio is None else f"{ratio:.1f}x")
    )
    placement_ratios = {k: v for k, v in speed.items() if k[0] != "snapshot_build"}
    if placement_ratios:
        worst = min(placement_ratios, key=placement_ratios.__getitem__)
        lowest = f"{placement_ratios[worst]:.1f}x ({worst[0]}, {worst[1]} nodes)"
        print(f"         lowest speedup of any placement: {lowest}")
    build_ms = None if build is None else build["median_us"] / 1000
    print(
        f"  [{verdict(None if build_ms is None else build_ms <= TARGET_BUILD_MS)}] snapshot build"
        f" at 10,000 nodes <= {TARGET_BUILD_MS:.0f} ms median: "
        + ("not measured" if build_ms is None else f"{build_ms:.1f} ms")
    )


def snapshot_memory(n: int) -> dict[str, Any]:
    """Bytes Python allocates for one Cluster.build (both views), from tracemalloc."""
    nodes = synthetic_nodes(n)
    gc.collect()
    tracemalloc.start()
    cluster = Cluster.build("default", LEVELS, nodes)
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del cluster
    return {
        "benchmark": "snapshot_memory",
        "nodes": n,
        "implementation": scorer.IMPLEMENTATION,
        "median_us": None,
        "p90_us": None,
        "repeats": 1,
        "retained_bytes": retained,
        "peak_bytes": peak,
    }


def placement_breakdown(cluster: Cluster, repeats: int = 400) -> dict[str, float]:
    """Median microseconds of each step of View.place for FULL on ``now``, compiled engine.

    Reaches into View's private helpers (a diagnostic, not an API): the engine call is timed
    on its own, the rest is the Python preparation and the conversion of its answer.
    """
    from scorer.snapshot import _groups  # noqa: PLC0415 - diagnostic only

    view, engine = cluster.now, scorer.engines()["compiled"]
    steps: dict[str, list[int]] = {}

    def clock(name: str, start: int) -> int:
        now = time.perf_counter_ns()
        steps.setdefault(name, []).append(now - start)
        return now

    for _ in range(repeats):
        t0 = t = time.perf_counter_ns()
        free = array("q", view.free)
        t = clock("copy free capacity (array)", t)
        (group,) = _groups(FULL)
        plan = view._plan(group)
        assert not isinstance(plan, str), plan
        t = clock("group + plan (remembered per tree)", t)
        request = view._request(group, plan)
        t = clock("build GroupRequest (amounts, selectors)", t)
        raw = engine.place_group(view.tree, free, request)
        t = clock("engine.place_group (compiled)", t)
        levels = view._levels(raw, plan)
        t = clock("per-level table (LevelCapacity)", t)
        view._assignment(plan, raw.worker_leaves, raw.worker_counts)
        t = clock("assignment objects", t)
        view._consume(free, request.req_col, request.req_val, raw.worker_leaves, raw.worker_counts)
        t = clock("consume capacity for later PodSets", t)
        Placement(group.workers.name, True, None, levels=levels, total_count=group.workers.count)
        clock("Placement + tuple", t)
        clock("sum of steps", t0)
    totals = measure(lambda: view.place(FULL, engine=engine), QUICK_BUDGET)
    out = {name: statistics.median(v) / 1000 for name, v in steps.items()}
    out["View.place (measured as a whole)"] = statistics.median(totals) / 1000
    return out


def place_overhead(
    cluster: Cluster, pod_sets: tuple[PodSetRequest, ...], repeats: int = 2000
) -> tuple[float, float]:
    """Median microseconds of View.place and of the compiled engine alone on the same request.

    Interleaved call by call (the same machine state for both); the difference is the Python
    around the engine, which also holds the GIL: issue 21 asks it to stay small.
    """
    from scorer.snapshot import _groups  # noqa: PLC0415 - diagnostic only

    view, engine = cluster.now, scorer.engines()["compiled"]
    group = _groups(pod_sets)[0]
    plan = view._plan(group)
    assert not isinstance(plan, str), plan
    request = view._request(group, plan)
    whole, alone = [], []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        view.place(pod_sets, engine=engine)
        t1 = time.perf_counter_ns()
        engine.place_group(view.tree, view.free, request)
        whole.append(t1 - t0)
        alone.append(time.perf_counter_ns() - t1)
    return statistics.median(whole) / 1000, statistics.median(alone) / 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("latest.json"))
    parser.add_argument("--quick", action="store_true", help="short budgets, 1k and 10k nodes only")
    parser.add_argument("--sizes", help="comma-separated node counts (default 1000,10000,50000)")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the per-step timing of View.place")
    args = parser.parse_args(argv)
    sizes = (
        tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (SIZES[:2] if args.quick else SIZES)
    )
    budget = QUICK_BUDGET if args.quick else FULL_BUDGET
    started = time.perf_counter()
    print(
        f"tasgate scorer benchmark: engines {sorted(scorer.engines())}, default {scorer.IMPLEMENTATION}; "
        f"Python {sys.version.split()[0]}; sizes {sizes}; budget {budget.seconds}s per measurement",
        flush=True,
    )
    if "compiled" not in scorer.engines():
        print("WARNING: the compiled engine is not built; only the reference engine is measured")

    results: list[dict[str, Any]] = []
    clusters: dict[int, Cluster] = {}
    for n in sizes:
        clusters[n] = run_size(n, budget, results)
    add_speedups(results)
    print_table(results)
    report_targets(results)

    memory_size = 10000 if 10000 in sizes else min(sizes)
    mem = snapshot_memory(memory_size)
    results.append(mem)
    print(
        f"\nSnapshot memory at {memory_size} nodes (tracemalloc around Cluster.build): "
        f"{mem['retained_bytes'] / 2**20:.1f} MiB retained, "
        f"{mem['peak_bytes'] / 2**20:.1f} MiB peak during build"
    )

    breakdown_size = 10000 if 10000 in clusters else max(clusters)
    if not args.no_breakdown and "compiled" in scorer.engines():
        try:
            steps = placement_breakdown(clusters[breakdown_size])
        except (AttributeError, ImportError, TypeError, ValueError) as exc:  # private helpers moved
            print(f"\nPlacement breakdown unavailable: {exc!r}")
        else:
            print(f"\nWhere View.place goes, full placement at {breakdown_size} nodes, compiled (median us):")
            for name, us in steps.items():
                print(f"  {name:<40} {us:>9.1f}")
            print("\nView.place beside the compiled engine alone (median us; one group each):")
            for n, cluster in clusters.items():
                for label, pod_sets in (("rack_now", FULL), ("leader_workers", LEADER_WORKERS)):
                    whole, alone = place_overhead(cluster, pod_sets)
                    print(
                        f"  {n:>6} nodes {label:<16} place {whole:>8.1f}  engine {alone:>8.1f}"
                        f"  Python around it {whole - alone:>6.1f}"
                    )

    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    results.append(
        {
            "benchmark": "peak_rss",
            "nodes": max(sizes),
            "implementation": "process",
            "median_us": None,
            "p90_us": None,
            "repeats": 1,
            "rss_bytes": peak_rss,
        }
    )
    print(f"Peak RSS of this run: {peak_rss / 2**20:.0f} MiB")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"Wrote {args.out} ({len(results)} entries) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
