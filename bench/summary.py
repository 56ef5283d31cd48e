"""Every headline figure of `make bench` in one file, and the README's performance table from it.

    python bench/summary.py [--write-readme]

Reads what the benchmarks wrote in ``bench/`` (``peer.json``: tasgate beside Kueue's Go code;
``live.json``: the live path under churn; ``threads.json``; ``review.json``: a review's cost over
TLS beside a no-op responder; ``track.json``), writes ``bench/summary.json`` and prints the table.
``--write-readme`` puts the table in README.md between its ``perf`` markers;
tests/webhook/test_docs.py keeps the two equal. A missing input is an error naming the
benchmark that writes it: the summary never mixes today's figures with an older run's silently.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- perf:start -->", "<!-- perf:end -->"
SOURCES = {  # file -> the make target that writes it
    "peer.json": "make bench (bench_peer.py)",
    "live.json": "make bench-live",
    "threads.json": "make bench-threads",
    "review.json": "make bench-review",
    "track.json": "make bench-track",
}
SHAPES = {
    "block_64x8_required": "64 × 8 GPUs required block",
    "leader_plus_32_workers": "leader + 32 workers",
    "sliced_128_in_32_per_rack": "sliced 128 in 32 a rack",
}

Row = tuple[str, str, str, str]  # measure, tasgate, anchor, ratio or target


def load(directory: Path) -> dict[str, Any]:
    missing = [f"{name} ({target})" for name, target in SOURCES.items() if not (directory / name).exists()]
    if missing:
        raise SystemExit(f"bench/summary.py: missing {', '.join(missing)}: run those first")
    return {name.removesuffix(".json"): json.loads((directory / name).read_text()) for name in SOURCES}


def _ms(us: float) -> str:
    return f"{us / 1000:,.2f} ms" if us < 100_000 else f"{us / 1000:,.0f} ms"


def _k(nodes: int) -> str:
    return f"{nodes // 1000}k"


def peer_rows(peer: list[dict[str, Any]]) -> Iterable[Row]:
    for r in sorted(peer, key=lambda r: (r["benchmark"] != "snapshot_build", r["benchmark"], r["nodes"])):
        what = (
            "snapshot build"
            if r["benchmark"] == "snapshot_build"
            else SHAPES.get(r["benchmark"], r["benchmark"])
        )
        goal = "target ≥ 1×" if r["benchmark"] == "snapshot_build" else "target ≥ 20× at 10k"
        if "rounds" in r:  # the build: the median of interleaved rounds on a shared machine
            goal += f"; median of {len(r['rounds'])} rounds, load {r['load_average_1m']}"
        yield (
            f"{what}, {_k(r['nodes'])} nodes",
            _ms(r["tasgate_median_us"]),
            f"Kueue {_ms(r['kueue_median_us'])}",
            f"{r['ratio_kueue_over_tasgate']:g}× ({goal})",
        )


def live_rows(live: list[dict[str, Any]]) -> Iterable[Row]:
    for r in live:
        at = f"{_k(r['nodes'])} nodes, {r['events_per_s']:,} pod events/s"
        yield (
            f"live review p99 at rest / churn, {at}",
            f"{r['review_p99_ms_rest']} / {r['review_p99_ms_churn']} ms",
            f"RSS {r['rss_mib']} MiB",
            "",
        )
        host = r.get("host_max_oversleep_ms")  # the VM's own longest stall meanwhile (bench_live)
        yield (
            f"node change visible, longest loop stall, {at}",
            f"{r['node_visible_ms']} ms, {r['max_loop_stall_ms']} ms",
            "" if host is None else f"the VM's own longest stall {host} ms",
            "≤ 300 ms, ≤ 10 ms",
        )


def thread_rows(threads: dict[str, Any]) -> Iterable[Row]:
    yield (
        f"decisions/s, 1 / 2 threads, {_k(threads['nodes'])} nodes",
        f"{threads['decisions_per_s_1_thread']:,} / {threads['decisions_per_s_2_threads']:,}",
        f"load {threads['load_average_1m']}",
        f"{threads['speedup']}× (target ≥ 1.8×){_rounds(threads.get('speedup_per_round'))}"
        + _machine(threads)
        + _cpu_cost(threads)
        + _halves(threads),
    )
    if "decisions_per_s_2_processes" in threads:
        yield (
            f"decisions/s, 1 / 2 decision processes, {_k(threads['nodes'])} nodes",
            f"{threads['decisions_per_s_1_process']:,} / {threads['decisions_per_s_2_processes']:,}",
            f"load {threads['load_average_1m']}",
            f"{threads['speedup_2_processes_vs_1_process']}× one process, "
            f"{threads['speedup_2_processes_vs_1_thread']}× one thread",
        )


def _halves(threads: dict[str, Any]) -> str:
    """Each half of a decision alone on 2 threads over 1: which keeps two threads from 2x
    (`bench.threads_halves`)."""
    if "halves" not in threads:
        return ""
    place, python = threads["halves"]["placement"], threads["halves"]["python"]
    return (
        f"; alone on 2 threads, the placement {place['speedup']}× ({place['cpu_us_1_thread']} / "
        f"{place['cpu_us_2_threads']} µs CPU), the Python {python['speedup']}× "
        f"({python['cpu_us_1_thread']} / {python['cpu_us_2_threads']} µs; on one CPU "
        f"{python['cpu_us_2_threads_on_one_cpu']} µs)"
    )


def _machine(threads: dict[str, Any]) -> str:
    """What 2 forked copies made over 1 on the same work in the same rounds: the cores' ceiling."""
    if "speedup_of_the_machine" not in threads:
        return ""
    rounds = threads["speedup_of_the_machine_per_round"]
    return (
        f"; 2 forked processes {threads['speedup_of_the_machine']}× one (rounds "
        f"{min(rounds)}-{max(rounds)}×), the threads' share of it {threads['share_of_the_machine']}"
    )


def _cpu_cost(threads: dict[str, Any]) -> str:
    """The best rounds' speed-up, and what the GIL leaves of 2x at equal CPU cost a decision."""
    if "speedup_at_equal_cpu_cost" not in threads:
        return ""
    cpu = threads["cpu_us_per_decision"]
    one_cpu = cpu.get("2_threads_on_one_cpu")
    return (
        f"; best rounds {threads['speedup_of_best_rounds']}×; CPU a decision {cpu['1_thread']} / "
        f"{cpu['2_threads']} µs"
        + ("" if one_cpu is None else f" (2 threads on one CPU: {one_cpu} µs)")
        + f", at equal CPU {threads['speedup_at_equal_cpu_cost']}×"
    )


def _rounds(speedups: list[float] | None) -> str:
    """The spread of the rounds behind a median speed-up, when the bench ran several."""
    if not speedups or len(speedups) < 2:
        return ""
    return f"; rounds {min(speedups)}-{max(speedups)}× (median of {len(speedups)})"


def _spread(rounds: list[float] | None) -> str:
    """`` (rounds a-b)`` behind a median of several rounds."""
    if not rounds or len(rounds) < 2:
        return ""
    return f" (rounds {min(rounds):,.0f}-{max(rounds):,.0f})"


def review_rows(review: dict[str, Any]) -> Iterable[Row]:
    """Concurrency 8 only (review.json has 1 and 32 too): the issue's operating point."""
    at = f"{_k(review['nodes'])} nodes"
    handoff = review.get("handoff")  # a no-op sent to a decision thread and back (bench_review)
    yield (
        f"decision / its placement, {at}",
        f"{review['decision_ms']} / {review['placement_ms']} ms",
        ""
        if handoff is None
        else f"a hand-over to a decision thread and back, doing nothing: "
        f"{handoff['cpu_us_per_round_trip']} µs CPU ({handoff['kernel_share']:.0%} in the kernel)",
        "",
    )
    for ours, noop, ratio in zip(review["tasgate"], review["noop"], review["ratios"], strict=True):
        if ours["concurrency"] != 8:
            continue
        yield (
            f"reviews/s over TLS at c=8, {at}",
            f"{ours['reviews_per_s']:,}{_spread(ours.get('rounds_reviews_per_s'))}",
            f"no-op responder {noop['reviews_per_s']:,}{_spread(noop.get('rounds_reviews_per_s'))}",
            f"{ratio['throughput_vs_noop']:.0%} of no-op (target ≥ 25%)",
        )
        yield (
            f"server CPU per review at c=8, {at}",
            f"{ours['server_cpu_ms_per_review']} ms" + _split(ours, review["decision_ms"]),
            f"no-op {noop['server_cpu_ms_per_review']} ms",
            f"{ratio['cpu_per_review_vs_placement']}× its placement (target ≤ 2×)" + _switches(ours, noop),
        )


def _split(ours: dict[str, Any], alone_ms: float) -> str:
    """The loop thread's share and the decision threads' (against the decision made alone)."""
    if "loop_thread_cpu_ms_per_review" not in ours:
        return ""
    return (
        f" (event loop {ours['loop_thread_cpu_ms_per_review']}, decision threads and audit writer "
        f"{ours['other_threads_cpu_ms_per_review']}; the decision alone {alone_ms})"
    )


def _switches(ours: dict[str, Any], noop: dict[str, Any]) -> str:
    if "context_switches_per_review" not in ours:
        return ""
    return (
        f"; context switches a review {ours['context_switches_per_review']} "
        f"(no-op {noop['context_switches_per_review']})"
    )


def track_rows(track: list[dict[str, Any]]) -> Iterable[Row]:
    rounds = [r for r in track if "gangs" in r and "round_ms_median" in r]
    for r in rounds[-1:]:
        yield (f"tracker round, {r['gangs']:,} gangs", f"{r['round_ms_median']} ms", "", "")


def rows(figures: dict[str, Any]) -> list[Row]:
    makers: list[tuple[str, Callable[[Any], Iterable[Row]]]] = [
        ("peer", peer_rows),
        ("live", live_rows),
        ("threads", thread_rows),
        ("review", review_rows),
        ("track", track_rows),
    ]
    return [row for key, make in makers for row in make(figures[key])]


def table(figures: dict[str, Any]) -> str:
    lines = ["| measure (2 cores) | tasgate | anchor | ratio / target |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows(figures)]
    return "\n".join(lines)


def with_table(readme: str, text: str) -> str:
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    if not rest or END not in rest:
        raise SystemExit(f"README.md has no {START} … {END} markers")
    return f"{head}{START}\n{text}\n{END}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--dir", type=Path, default=HERE)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    figures = load(args.dir)
    (args.dir / "summary.json").write_text(json.dumps(figures, indent=1) + "\n")
    text = table(figures)
    print(text)
    if args.write_readme:
        README.write_text(with_table(README.read_text(), text))


if __name__ == "__main__":
    sys.exit(main())
