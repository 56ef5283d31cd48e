#!/usr/bin/env python3
"""tasgate's placement and snapshot build beside Kueue's own Go code, on identical inputs.

    python bench/bench_peer.py [--out bench/peer.json] [--sizes 1000,10000] [--with-50k] [--quick]
                               [--build-rounds 3]

The clusters are bench_scorer's (``synthetic_nodes``: zone / block / rack / host, 30% partly
used, 0.5% tainted, 0.5% cordoned). Kueue's side is bench/kueue_peer (build it first with
``bash bench/kueue_peer/build.sh``): the same nodes and PodSets through Kueue v0.19.2's TAS
cache, snapshot build and ``FindTopologyAssignmentsForFlavor``. Not a test: it prints ratios
(Kueue's median / tasgate's median, so > 1 means tasgate is faster) against the targets with
PASS/MISS and never fails on a slow result; it does say when the two placements disagree.

The snapshot build is compared like for like: both sides start from parsed nodes in memory and
neither decodes JSON in the timed part. tasgate's is ``Cluster.build`` over `scorer.model.Node`
objects (what the webhook's informers hold, amounts already integers): flavor selection, both
views (``now``, and ``never`` since the cordoned nodes are away from ``now``), capacity minus
usage. Kueue's is ``TASFlavorCache.snapshot`` over the corev1.Node objects its TAS cache holds
(the peer fills that cache first, untimed in the ratio: ``SyncNode`` per Node, ``Update`` per
pod): node selection, the topology tree, leaf capacity from allocatable, the non-TAS usage; one
view only. The machine is shared, so the build is measured in ``--build-rounds`` interleaved
rounds (tasgate, then Kueue, again and again) and the median of the per-round ratios is the
figure; each round and the load average are written beside it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Run as a script (python bench/bench_peer.py): the repository root holds the bench package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import kueue_peer
from bench.bench_scorer import (
    FULL_BUDGET,
    GPU,
    LEADER_WORKERS,
    LEVELS,
    QUICK_BUDGET,
    Budget,
    GiB,
    measure,
    synthetic_nodes,
)
from scorer import Cluster
from scorer.model import Mode, PodSetRequest, TopologyRequest

SIZES = (1000, 10000)
WORKER = {GPU: 8, "cpu": 32000, "memory": 256 * GiB}
SHAPES: dict[str, tuple[PodSetRequest, ...]] = {
    # 64 pods x 8 GPUs that must share one block.
    "block_64x8_required": (PodSetRequest("trainer", 64, WORKER, TopologyRequest(Mode.REQUIRED, "block")),),
    # bench_scorer's leader (cpu only) + 32 workers x 8 GPUs, one podset-group-name, required block.
    "leader_plus_32_workers": LEADER_WORKERS,
    # 128 pods x 8 GPUs in one block, in slices of 32 pods that each share a rack.
    "sliced_128_in_32_per_rack": (
        PodSetRequest(
            "sliced", 128, WORKER, TopologyRequest(Mode.REQUIRED, "block", slice_level="rack", slice_size=32)
        ),
    ),
}
TARGET_PLACE_RATIO = 20.0  # tasgate >= 20x Kueue on every shape at 10k nodes
TARGET_BUILD_RATIO = 1.0  # tasgate's snapshot build at least as fast as Kueue's


def _median_us(samples: Sequence[int]) -> float:
    return statistics.median(samples) / 1000


def _peer_repeats(seconds: float, estimate_ns: int, low: int, high: int) -> int:
    return max(low, min(high, int(seconds * 1e9 / max(estimate_ns, 1))))


def kueue_side(n: int, cluster_doc: dict[str, Any], budget: Budget) -> dict[str, Any]:
    """Two peer runs: one repeat each to size the run, then the timed one on the same budget."""
    probe = kueue_peer.run([kueue_peer.document(cluster_doc, SHAPES, 1, 1)])[0]
    slowest = max(w["place"]["medianNs"] for w in probe["workloads"])
    doc = kueue_peer.document(
        cluster_doc,
        SHAPES,
        build_repeats=_peer_repeats(budget.seconds, probe["snapshot"]["medianNs"], budget.min_repeats, 50),
        place_repeats=_peer_repeats(budget.seconds, slowest, budget.min_repeats, budget.max_repeats),
    )
    answer: dict[str, Any] = kueue_peer.run([doc])[0]
    if answer["nodes"] != n:
        raise RuntimeError(f"the peer read {answer['nodes']} nodes, not {n}")
    return answer


def _round(ours: Sequence[int], theirs: dict[str, Any]) -> dict[str, Any]:
    tasgate_us, kueue_us = _median_us(ours), theirs["medianNs"] / 1000
    return {
        "tasgate_median_us": round(tasgate_us, 1),
        "tasgate_repeats": len(ours),
        "kueue_median_us": round(kueue_us, 1),
        "kueue_repeats": theirs["repeats"],
        "ratio": round(kueue_us / tasgate_us, 2),
    }


def build_rounds(
    nodes: Sequence[Any], cluster_doc: dict[str, Any], first: dict[str, Any], rounds: int, budget: Budget
) -> list[dict[str, Any]]:
    """More build-only rounds after the first (each: tasgate's builds, then a peer run with no
    workload and as many snapshot builds as the first run made)."""
    out = [first]
    for _ in range(rounds - 1):
        ours = measure(lambda: Cluster.build("default", LEVELS, nodes), budget)
        doc = kueue_peer.document(cluster_doc, {}, build_repeats=first["kueue_repeats"])
        out.append(_round(ours, kueue_peer.run([doc])[0]["snapshot"]))
    return out


def build_entry(n: int, rounds: list[dict[str, Any]], fill_us: float) -> dict[str, Any]:
    """The snapshot build's figures: medians over the rounds, the ratio the median round ratio."""
    return {
        "benchmark": "snapshot_build",
        "nodes": n,
        "tasgate_median_us": statistics.median(r["tasgate_median_us"] for r in rounds),
        "tasgate_repeats": sum(r["tasgate_repeats"] for r in rounds),
        "kueue_median_us": statistics.median(r["kueue_median_us"] for r in rounds),
        "kueue_repeats": sum(r["kueue_repeats"] for r in rounds),
        "kueue_cache_fill_median_us": round(fill_us, 1),
        "ratio_kueue_over_tasgate": round(statistics.median(r["ratio"] for r in rounds), 2),
        "rounds": rounds,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run_size(n: int, budget: Budget, results: list[dict[str, Any]], rounds: int = 1) -> None:
    nodes = synthetic_nodes(n)
    build = measure(lambda: Cluster.build("default", LEVELS, nodes), budget)
    cluster = Cluster.build("default", LEVELS, nodes)
    started = time.perf_counter()
    cluster_doc = kueue_peer.cluster_document(LEVELS, nodes)
    peer = kueue_side(n, cluster_doc, budget)
    if peer["leaves"] != cluster.now.tree.n_leaves:
        print(
            f"  DISAGREE at {n} nodes: Kueue's snapshot has {peer['leaves']} leaves, tasgate's now view"
            f" {cluster.now.tree.n_leaves}",
            flush=True,
        )
    per_round = build_rounds(nodes, cluster_doc, _round(build, peer["snapshot"]), rounds, budget)
    print(
        f"  {n:>6} nodes: Kueue peer runs took {time.perf_counter() - started:.1f} s; build ratio per round"
        f" {[r['ratio'] for r in per_round]}",
        flush=True,
    )
    results.append(build_entry(n, per_round, peer["cacheFill"]["medianNs"] / 1000))
    answers = {w["name"]: w for w in peer["workloads"]}
    for shape, pod_sets in SHAPES.items():
        placements = cluster.now.place(pod_sets)
        samples = measure(functools.partial(cluster.now.place, pod_sets), budget)
        ours = kueue_peer.tasgate_outcomes(placements)
        theirs = kueue_peer.kueue_outcomes(answers[shape], pod_sets)
        diffs = kueue_peer.differences(ours, theirs)
        for line in diffs:
            print(f"  DISAGREE {shape} at {n} nodes: {line}", flush=True)
        kueue_us = answers[shape]["place"]["medianNs"] / 1000
        results.append(
            {
                "benchmark": shape,
                "nodes": n,
                "tasgate_median_us": round(_median_us(samples), 2),
                "tasgate_repeats": len(samples),
                "kueue_median_us": round(kueue_us, 2),
                "kueue_repeats": answers[shape]["place"]["repeats"],
                "ratio_kueue_over_tasgate": round(kueue_us / _median_us(samples), 1),
                "fits": all(p.fits for p in placements),
                "agree": not diffs,
            }
        )


def print_table(results: Sequence[dict[str, Any]]) -> None:
    head = f"{'benchmark':<28} {'nodes':>6} | {'tasgate med':>12} | {'Kueue med':>12} | {'Kueue/tasgate':>13}"
    print()
    print(head)
    print("-" * len(head))
    for r in results:
        note = "" if r.get("agree", True) else "  DISAGREE"
        note += "" if r.get("fits", True) else "  (does not fit)"
        print(
            f"{r['benchmark']:<28} {r['nodes']:>6} | {r['tasgate_median_us']:>10.1f}us"
            f" | {r['kueue_median_us']:>10.1f}us | {r['ratio_kueue_over_tasgate']:>12.1f}x{note}"
        )
    fills = [r for r in results if r["benchmark"] == "snapshot_build"]
    for r in fills:
        print(
            f"  (snapshot build at {r['nodes']} nodes: median of {len(r['rounds'])} interleaved rounds,"
            f" ratios {[x['ratio'] for x in r['rounds']]}, load average {r['load_average_1m']})"
        )
    for r in fills:
        print(
            f"  (Kueue at {r['nodes']} nodes: filling its TAS cache from Node and Pod objects, SyncNode and"
            f" Update, takes {r['kueue_cache_fill_median_us'] / 1000:.1f} ms more; not in the ratio)"
        )


def report_targets(results: Sequence[dict[str, Any]]) -> None:
    print("\nTargets (reported, never enforced):")
    for r in results:
        if r["benchmark"] == "snapshot_build":
            target, what = TARGET_BUILD_RATIO, "snapshot build (Cluster.build vs Kueue's flavor snapshot)"
        elif r["nodes"] == 10000:
            target, what = TARGET_PLACE_RATIO, f"placement {r['benchmark']}"
        else:
            continue
        verdict = "PASS" if r["ratio_kueue_over_tasgate"] >= target else "MISS"
        print(
            f"  [{verdict}] {what} at {r['nodes']} nodes: Kueue/tasgate"
            f" {r['ratio_kueue_over_tasgate']:.1f}x (target >= {target:.0f}x)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("peer.json"))
    parser.add_argument("--sizes", help="comma-separated node counts (default 1000,10000)")
    parser.add_argument("--with-50k", action="store_true", help="add 50,000 nodes (a minute more)")
    parser.add_argument("--quick", action="store_true", help="short budgets")
    parser.add_argument(
        "--build-rounds", type=int, default=3, help="interleaved snapshot-build rounds (median ratio)"
    )
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES
    if args.with_50k and 50000 not in sizes:
        sizes = (*sizes, 50000)
    budget = QUICK_BUDGET if args.quick else FULL_BUDGET
    started = time.perf_counter()
    print(
        f"tasgate vs Kueue {kueue_peer.kueue_version()} (Go, {kueue_peer.peer_binary()}): sizes {sizes},"
        f" budget {budget.seconds}s per measurement",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    for n in sizes:
        run_size(n, budget, results, max(1, args.build_rounds))
    print_table(results)
    report_targets(results)
    if not all(r.get("agree", True) for r in results):
        print("\nWARNING: tasgate's and Kueue's placements disagree (DISAGREE lines above)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"Wrote {args.out} ({len(results)} entries) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
