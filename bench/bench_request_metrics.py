"""Cost of the request metrics (a benchmark, never a test): `.venv/bin/python bench/bench_request_metrics.py`.

Per webhook call ``Metrics.count_review`` updates the latency histogram, the per-endpoint counter
and, on the call that is the verdict, the decision counters. This times it over a realistic
label mix (both endpoints, dry runs, 40 queues in 20 namespaces, every reason), then the scrape:
/metrics size and ``generate_latest`` time with every series those reviews create.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

from prometheus_client import generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webhook.decide.reasons import Reason
from webhook.serve.handlers import is_final
from webhook.serve.metrics import Metrics, RequestLabels


def label_mix() -> list[tuple[RequestLabels, bool, str, bool]]:
    mix = []
    queues = [(f"team-{i % 20}", f"lq-{i}", f"cq-{i % 8}") for i in range(40)]
    shapes = itertools.product(("mutate", "validate"), ("CREATE", "UPDATE"), ("Job", "JobSet", "PyTorchJob"))
    combos = itertools.product(shapes, queues, Reason)
    for i, ((endpoint, operation, kind), (namespace, lq, cq), reason) in enumerate(combos):
        allowed = not reason.value.startswith(("never", "over", "invalid", "mutation", "internal"))
        labels = RequestLabels(endpoint, operation, kind, cq, lq, namespace)
        mix.append((labels, allowed, reason.value, i % 10 == 0))
    return mix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    metrics = Metrics(lambda: (None, None))
    mix = label_mix()
    per_call = []
    for _ in range(args.rounds):
        started = time.perf_counter_ns()
        for i in range(args.calls):
            labels, allowed, reason, dry_run = mix[i % len(mix)]
            final = is_final(labels.endpoint, allowed)
            metrics.count_review(labels, allowed, reason, dry_run, final, 0.0004)
        per_call.append((time.perf_counter_ns() - started) / args.calls)
    started = time.perf_counter()
    body = generate_latest(metrics.registry)
    scrape = time.perf_counter() - started
    series = sum(len(f.samples) for f in metrics.registry.collect())
    print(
        f"count_review: median {statistics.median(per_call) / 1000:.2f} µs/call",
        f"({args.rounds} rounds of {args.calls} calls)",
    )
    print(f"label combinations exercised: {len(mix)}; series on /metrics: {series}")
    print(f"/metrics: {len(body) / 1024:.0f} KiB, generate_latest {scrape * 1000:.1f} ms")


if __name__ == "__main__":
    main()
