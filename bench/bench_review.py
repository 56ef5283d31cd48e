"""What a review costs beyond its placement (a benchmark, never a test): `make bench-review`.

A review is parse, PodSet view, rules, policy, placement, patch, audit, metrics and encode. Only
the placement is the scorer's work; the rest should cost little more. This prints, side by side
in one run on one live state (10,000 nodes, 100,000 bound pods by default):

1. in process: a decision's median time and its placement's (``View.place`` and
   ``Cluster.place_now_and_never``, timed around the very calls the decision makes), and a
   profile of where the rest goes, by layer;
2. over TLS: ``tasgate``'s real app (the handlers, the audit writer, metrics) and a no-op aiohttp
   responder on the same TLS stack (``noop``: read the body, echo the uid, allow), each in its own
   process, both up at once and driven alternately (3 rounds of each at concurrency 1, 8 and 32;
   the median round, with every round's throughput) by a client process: reviews/s, the
   server's CPU per review (from ``/proc/<pid>/stat``, all its threads), its threads' voluntary
   context switches per review (the hand-overs: loop to decision thread and back, GIL waits,
   the audit writer) and the ratios (tasgate / no-op throughput, tasgate CPU per review /
   placement).

The client shares the machine's cores with the server: read the load average it prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_live import _review_body
from bench.bench_threads import live_state
from scorer import Cluster, snapshot
from webhook.decide.decision import decide
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.live import heap
from webhook.serve import certs
from webhook.serve.app import create_app
from webhook.serve.audit import line_writer
from webhook.serve.keys import STATE, Settings, StateSource
from webhook.serve.tls import server_context
from webhook.state.cluster import ClusterState

CONCURRENCY = (1, 8, 32)
LAYERS = (  # profile rows are summed by the first prefix their module path matches
    ("placement (scorer)", "/scorer/"),
    ("workload model", "/webhook/model/"),
    ("rules", "/webhook/rules/"),
    ("decision", "/webhook/decide/"),
    ("state", "/webhook/state/"),
    ("serve (handlers, audit, metrics)", "/webhook/serve/"),
    ("wire (parse, encode)", "/webhook/wire/"),
    ("aiohttp", "/aiohttp/"),
)


def _review_object() -> dict[str, Any]:
    return orjson.loads(_review_body())["request"]["object"]  # type: ignore[no-any-return]


@contextmanager
def _timed_place(spent: list[float]) -> Iterator[None]:
    """Time every placement the decision makes (the placement, nothing else): each
    ``View.place`` and ``Cluster.place_now_and_never`` call, the outermost only (the pair may
    place view by view)."""
    originals = [(snapshot.View, "place"), (Cluster, "place_now_and_never")]
    saved = [getattr(owner, name) for owner, name in originals]
    depth = [0]

    def timed(original: Callable[..., Any]) -> Callable[..., Any]:
        def place(self: object, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    spent.append(time.perf_counter() - started)

        return place

    for (owner, name), original in zip(originals, saved, strict=True):
        setattr(owner, name, timed(original))
    try:
        yield
    finally:
        for (owner, name), original in zip(originals, saved, strict=True):
            setattr(owner, name, original)


def in_process(nodes: int, pods: int, repeats: int) -> dict[str, Any]:
    state, policy, obj = live_state(nodes, pods), load_policy("default"), _review_object()

    def once() -> None:
        decide(Review(obj, "team"), state, policy)

    for _ in range(20):
        once()
    totals, places = [], []
    for _ in range(repeats):
        spent: list[float] = []
        with _timed_place(spent):
            started = time.perf_counter()
            once()
            totals.append(time.perf_counter() - started)
        places.append(sum(spent))
    return {
        "decision_ms": round(statistics.median(totals) * 1000, 3),
        "placement_ms": round(statistics.median(places) * 1000, 3),
        "profile": _profile(once, repeats),
        "handoff": asyncio.run(_handoff_cost(Settings(policy=policy).decision_threads)),
    }


async def _handoff_cost(threads: int, trips: int = 5000) -> dict[str, float]:
    """What a hand-over to a decision thread and back costs with nothing to decide: a no-op sent
    as the server sends a decision (``run_in_executor`` under ``wait_for``, `serve.deciding`) to
    a pool of the server's size. The process's CPU a round trip and the kernel's part of it (the
    two thread wake-ups; in a VM each is an exit to the hypervisor)."""
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(200):
            await loop.run_in_executor(pool, int)
        before = os.times()
        for _ in range(trips):
            await asyncio.wait_for(loop.run_in_executor(pool, int), 10)
        after = os.times()
    user, system = after.user - before.user, after.system - before.system
    return {
        "cpu_us_per_round_trip": round(1e6 * (user + system) / trips, 1),
        "kernel_share": round(system / max(user + system, 1e-9), 2),
    }


def _profile(work: Callable[[], None], repeats: int) -> dict[str, float]:
    """Own time per layer, as a share of the profiled total (the profiler inflates Python calls:
    read the shares as where to look, and the timings above as the cost)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        work()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    own: dict[str, float] = {}
    for (path, _line, _name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        layer = next((name for name, prefix in LAYERS if prefix in path), "other (stdlib, orjson, C)")
        own[layer] = own.get(layer, 0.0) + tottime
    total = sum(own.values()) or 1.0
    return {layer: round(100 * spent / total, 1) for layer, spent in sorted(own.items(), key=lambda i: -i[1])}


# --- the servers, each in a process of its own -----------------------------------------------------


async def _noop(request: web.Request) -> web.Response:
    review = orjson.loads(await request.read())
    answer = {"uid": review["request"]["uid"], "allowed": True}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _server_app(state: ClusterState | None) -> web.Application:
    if state is None:
        app = web.Application()
        app.router.add_post("/validate", _noop)
        return app
    audit = line_writer(open(os.devnull, "w"))  # noqa: SIM115  (the real writer thread, lines discarded)
    app = create_app(Settings(policy=load_policy("default")), audit, StateSource())
    app[STATE].publish(state)
    return app


async def _serve(state: ClusterState | None, workdir: Path, port_file: Path) -> None:
    files = certs.generate(workdir, ["localhost"], ["127.0.0.1"], days=1)
    runner = web.AppRunner(_server_app(state), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(files.cert, files.key))
    await site.start()
    port_file.write_text(f"{runner.addresses[0][1]} {files.ca_cert}")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


def _cpu_seconds(pid: int, task: int | None = None) -> float:
    """CPU seconds of process ``pid`` (all its threads), or of its thread ``task`` alone."""
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def _load(url: str, ca: str, concurrency: int, seconds: float, body: bytes) -> int:
    """``concurrency`` clients posting the review back to back for ``seconds``; answers counted."""
    context = ssl.create_default_context(cafile=ca)
    done = 0
    until = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=concurrency)) as s:

        async def client() -> None:
            nonlocal done
            while time.perf_counter() < until:
                async with s.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                    answer = await r.read()
                if r.status != 200 or b'"allowed"' not in answer:
                    raise RuntimeError(f"bad answer {r.status}: {answer[:200]!r}")
                done += 1

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return done


def over_tls(nodes: int, pods: int, seconds: float, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Both servers up at once, measured alternately ``rounds`` times at each concurrency: the
    median round of each, with every round's throughput (the host's load drifts; alternating
    puts both under the same drift, and one 5-second round is not a figure)."""
    with _server("noop", nodes, pods) as noop, _server("tasgate", nodes, pods) as ours:
        found: dict[str, list[dict[str, Any]]] = {"noop": [], "tasgate": []}
        for concurrency in CONCURRENCY:
            runs: dict[str, list[dict[str, Any]]] = {"noop": [], "tasgate": []}
            for _ in range(rounds):
                for kind, (pid, url, ca) in (("noop", noop), ("tasgate", ours)):
                    runs[kind].append(_measure(pid, url, ca, concurrency, seconds))
            for kind, rows in runs.items():
                median = sorted(rows, key=lambda row: row["reviews_per_s"])[len(rows) // 2]
                found[kind].append({**median, "rounds_reviews_per_s": [row["reviews_per_s"] for row in rows]})
    return found


@contextmanager
def _server(kind: str, nodes: int, pods: int) -> Iterator[tuple[int, str, str]]:
    """A server process of ``kind``, up and warm: its pid, URL and CA file."""
    with tempfile.TemporaryDirectory() as workdir:
        port_file = Path(workdir) / "port"
        argv = [sys.executable, __file__, "--serve", kind, "--workdir", workdir]
        argv += ["--nodes", str(nodes), "--pods", str(pods)]
        server = subprocess.Popen(argv)
        try:
            while not port_file.exists() or not port_file.read_text():
                if server.poll() is not None:
                    raise RuntimeError(f"{kind} server exited with {server.returncode}")
                time.sleep(0.1)
            port, ca = port_file.read_text().split(" ", 1)
            url = f"https://127.0.0.1:{port}/validate?timeout=10s"
            asyncio.run(_load(url, ca, 4, 1.0, _review_body()))  # warm: connections, caches
            yield server.pid, url, ca
        finally:
            server.terminate()
            server.wait(30)


def _context_switches(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid`` so far: each is a thread blocking
    (a GIL wait, a queue, a wake-up), the hand-overs a review costs beyond its own work."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def _measure(pid: int, url: str, ca: str, concurrency: int, seconds: float) -> dict[str, Any]:
    """One round. The server's CPU is split between its main thread (the event loop: TLS, HTTP,
    parse, audit, metrics, the hand-over) and the rest (the decision threads, the audit writer):
    a decision on a thread costs more than the same decision alone (`in_process`)."""
    cpu, loop, switches = _cpu_seconds(pid), _cpu_seconds(pid, pid), _context_switches(pid)
    started = time.perf_counter()
    done = asyncio.run(_load(url, ca, concurrency, seconds, _review_body()))
    wall, cpu, loop = time.perf_counter() - started, _cpu_seconds(pid) - cpu, _cpu_seconds(pid, pid) - loop
    per = 1000 / max(done, 1)
    return {
        "concurrency": concurrency,
        "reviews_per_s": round(done / wall, 1),
        "server_cpu_ms_per_review": round(cpu * per, 3),
        "loop_thread_cpu_ms_per_review": round(loop * per, 3),
        "other_threads_cpu_ms_per_review": round((cpu - loop) * per, 3),
        "context_switches_per_review": round((_context_switches(pid) - switches) / max(done, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=5.0, help="per concurrency level")
    parser.add_argument("--repeats", type=int, default=200, help="in-process decisions")
    parser.add_argument("--rounds", type=int, default=3, help="per server and concurrency, alternating")
    parser.add_argument("--out", default=str(Path(__file__).with_name("review.json")))
    parser.add_argument("--serve", choices=("tasgate", "noop"), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        workdir = Path(args.workdir)
        state = None
        if args.serve == "tasgate":
            heap.share_the_gil()  # as `tasgate serve` does (serve.main)
            state = live_state(args.nodes, args.pods)
        asyncio.run(_serve(state, workdir, workdir / "port"))
        return
    report = run(args.nodes, args.pods, args.seconds, args.repeats, args.rounds)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


def run(nodes: int, pods: int, seconds: float, repeats: int, rounds: int) -> dict[str, Any]:
    inner = in_process(nodes, pods, repeats)
    print(json.dumps(inner), flush=True)
    servers = over_tls(nodes, pods, seconds, rounds)
    ratios = []
    for ours, noop in zip(servers["tasgate"], servers["noop"], strict=True):
        ratios.append(
            {
                "concurrency": ours["concurrency"],
                "throughput_vs_noop": round(ours["reviews_per_s"] / noop["reviews_per_s"], 3),
                "cpu_per_review_vs_placement": round(
                    ours["server_cpu_ms_per_review"] / inner["placement_ms"], 2
                ),
            }
        )
    return {
        "nodes": nodes,
        "pods": pods,
        **inner,
        **servers,
        "ratios": ratios,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    main()
