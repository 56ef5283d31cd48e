"""Lifecycle tracking at scale (a benchmark, never a test): `make bench-track`.

Clones the captured gangs of tests/webhook/manifests/lifecycle (real Kueue, kwok, Coscheduling
objects) into G running gangs of 8 pods each plus Q queued ones, feeds them to the real
``Ledger`` as a list would, then measures what the tracker does: one pod watch event
(``put_pod``), one classification round over every gang (``tracked``, what runs every second),
and the assessment of every queued Workload on a 2-block cluster (``assess_queued``, what runs
when the cluster state changes). Then, at cluster scale, the state a prediction for a just-admitted
Workload is made on (``ClusterState.without_workload`` and its snapshots). Prints the figures and
writes ``bench/track.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.webhook.conftest import HOST, kueue_objects, node
from webhook.files.policy import load_policy
from webhook.state.cluster import build_state
from webhook.state.workloads import AssignedUse
from webhook.track.ledger import Ledger

CAPTURE = Path(__file__).resolve().parents[1] / "tests" / "webhook" / "manifests" / "lifecycle"
BLOCK, RACK = "topology.example.com/block", "topology.example.com/rack"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((CAPTURE / name).read_text()) if d]


def _owner(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["ownerReferences"][0]["name"])


def world(gangs: int, queued: int, pods_per_gang: int = 8) -> tuple[list[Any], list[Any]]:
    """``gangs`` copies of the running gang ``run`` and ``queued`` of the queued ``wide``."""
    workloads = {_owner(w): w for w in _docs("workloads.yaml")}
    run_pod = next(p for p in _docs("pods.yaml") if p["metadata"]["name"].startswith("run-"))
    out_w, out_p = [], []
    for i in range(gangs):
        w = copy.deepcopy(workloads["run"])
        w["metadata"]["name"], w["metadata"]["namespace"] = f"wl-{i}", f"ns-{i % 50}"
        out_w.append(w)
        for j in range(pods_per_gang):
            p = copy.deepcopy(run_pod)
            p["metadata"].update(name=f"p-{i}-{j}", namespace=f"ns-{i % 50}")
            p["metadata"]["annotations"]["kueue.x-k8s.io/workload"] = f"wl-{i}"
            out_p.append(p)
    for i in range(queued):
        w = copy.deepcopy(workloads["wide"])
        w["metadata"]["name"], w["metadata"]["namespace"] = f"queued-{i}", "gangs"
        out_w.append(w)
    return out_w, out_p


def cluster(blocks: int = 2, racks: int = 4, hosts: int = 4) -> Any:
    nodes = [
        node(f"n{b}-{r}-{h}", {"pool": "gpu", BLOCK: f"b{b}", RACK: f"b{b}-r{r}"})
        for b in range(blocks)
        for r in range(racks)
        for h in range(hosts)
    ]
    queues = kueue_objects(
        (BLOCK, RACK, HOST), {"gpu-flavor": {"pool": "gpu"}}, "gpu-topology", "gpu-queue", "gangs", "gpu-cq"
    )
    return build_state([*nodes, *queues], generation=1)


def _timed(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def run(gangs: int, queued: int) -> dict[str, Any]:
    workloads, pods = world(gangs, queued)
    ledger = Ledger()
    ledger.replace("workloads", workloads)
    ledger.replace("pods", pods)
    one = pods[len(pods) // 2]
    event = _timed(lambda: ledger.put_pod(one), 2000)
    rounds = _timed(lambda: ledger.tracked(time.time(), 300.0), 5)
    state, policy = cluster(), load_policy("default")
    start = time.perf_counter()
    ledger.assess_queued(state, policy)
    assess = time.perf_counter() - start
    return {
        "gangs": gangs + queued,
        "pods": len(pods),
        "pod_event_us_median": round(statistics.median(event) * 1e6, 1),
        "round_ms_median": round(statistics.median(rounds) * 1e3, 1),
        "assess_queued_ms_per_gang": round(assess * 1e3 / max(queued, 1), 2),
    }


def without_figure(nodes: int, admitted: int = 500, repeat: int = 5) -> dict[str, Any]:
    """``without_workload`` of one of ``admitted`` 8-pod gangs on ``nodes`` hosts, then every
    snapshot of the result built (what the tracker's prediction reads), median of ``repeat``."""
    hosts = [
        node(f"h{i}", {"pool": "gpu", BLOCK: f"b{i // 1000}", RACK: f"r{i // 50}"}) for i in range(nodes)
    ]
    queues = kueue_objects(
        (BLOCK, RACK, HOST), {"gpu-flavor": {"pool": "gpu"}}, "gpu-topology", "gpu-queue", "gangs", "gpu-cq"
    )
    each = (("nvidia.com/gpu", 1), ("pods", 1))
    assigned = tuple(
        AssignedUse("gpu-flavor", (HOST,), (f"h{(w * 8 + j) % nodes}",), each, ("gangs", f"wl-{w}"))
        for w in range(admitted)
        for j in range(8)
    )
    state = build_state([*hosts, *queues], generation=1, assigned=assigned).prepare()
    times = _timed(lambda: state.without_workload(("gangs", "wl-1")).prepare(), repeat)
    return {"nodes": nodes, "without_workload_ms_median": round(statistics.median(times) * 1e3, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gangs", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--queued", type=int, default=200)
    parser.add_argument("--without-nodes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    for gangs in args.gangs:
        found = run(gangs, args.queued)
        results.append(found)
        print(
            f"{found['gangs']:>6} gangs {found['pods']:>7} pods: "
            f"pod event {found['pod_event_us_median']} µs, "
            f"classification round {found['round_ms_median']} ms, "
            f"assessing a queued gang {found['assess_queued_ms_per_gang']} ms",
            flush=True,
        )
    for nodes in args.without_nodes:
        found = without_figure(nodes)
        results.append(found)
        print(
            f"{nodes:>6} nodes: the state without a just-admitted gang, snapshots ready, "
            f"{found['without_workload_ms_median']} ms",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
