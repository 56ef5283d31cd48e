#!/usr/bin/env python3
"""Benchmark the fragmentation figures and the topology picture on bench_scorer's synthetic clusters.

    python bench/bench_fragmentation.py [--sizes 1000,10000,50000] [--out FILE]

What a scrape pays once per state generation (``flavor_figures`` as /metrics calls it, without
per-domain fits or the host level: one engine run per gang shape, plus the per-domain sums),
what `/topology` and `tasgate map` pay (per-domain fits: one engine run per domain and pod
size, up to 512 domains; then the collapse of large levels, the layout and the HTML). Not a
test: it prints numbers, it never fails on a slow one. Median of a few runs, garbage collector
off while the clock runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_scorer import LEVELS, synthetic_nodes
from scorer import IMPLEMENTATION, Cluster
from webhook.decide.policy import DEFAULT_GANG_SHAPES, DEFAULT_GPU_RESOURCES
from webhook.figures.fragmentation import flavor_figures
from webhook.present.html import render_html
from webhook.present.stamp import Stamp
from webhook.present.text import render_text

STAMP = Stamp(1, "2026-01-01 00:00:00 UTC", 30)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(repeats):
        gc.disable()
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
        gc.enable()
    return statistics.median(samples) / 1e6


def run(n: int, repeats: int) -> dict[str, Any]:
    cluster = Cluster.build("synthetic", LEVELS, synthetic_nodes(n))

    def scrape() -> object:
        return flavor_figures(
            cluster, "synthetic", "gpu", DEFAULT_GPU_RESOURCES, DEFAULT_GANG_SHAPES, hosts=False
        )

    def picture_figures() -> object:
        return flavor_figures(
            cluster, "synthetic", "gpu", DEFAULT_GPU_RESOURCES, DEFAULT_GANG_SHAPES, per_domain=True
        )

    figures = flavor_figures(
        cluster, "synthetic", "gpu", DEFAULT_GPU_RESOURCES, DEFAULT_GANG_SHAPES, per_domain=True
    )
    html = render_html([figures], [], "bench", STAMP)
    return {
        "nodes": n,
        "domains": len(figures.domains),
        "per_domain_fits": not any(n.startswith("per-domain") for n in figures.notes),
        "scrape_figures_ms": median_ms(scrape, repeats),
        "picture_figures_ms": median_ms(picture_figures, repeats),
        "html_ms": median_ms(lambda: render_html([figures], [], "bench", STAMP), repeats),
        "text_ms": median_ms(lambda: render_text([figures], []), repeats),
        "html_kib": len(html.encode()) / 1024,
        "boxes": html.count("<g class="),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    results = [run(int(n), args.repeats) for n in args.sizes.split(",")]
    print(f"engine: {IMPLEMENTATION}; shapes: {', '.join(s.text for s in DEFAULT_GANG_SHAPES)}")
    head = (
        "nodes",
        "domains",
        "scrape ms",
        "picture figures ms",
        "per-domain",
        "html ms",
        "text ms",
        "html KiB",
        "boxes",
    )
    print("".join(f"{h:>20}" for h in head))
    for r in results:
        cells = (
            r["nodes"],
            r["domains"],
            f"{r['scrape_figures_ms']:.1f}",
            f"{r['picture_figures_ms']:.1f}",
            "yes" if r["per_domain_fits"] else "no (>512)",
            f"{r['html_ms']:.1f}",
            f"{r['text_ms']:.1f}",
            f"{r['html_kib']:.0f}",
            r["boxes"],
        )
        print("".join(f"{c:>20}" for c in cells))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
