"""tasgate in live mode on a cluster-sized world on the real API server (issue 10, "On a real API server").

5,000 Nodes and 50,000 bound Pods (e2e/scale.py; ``TASGATE_SCALE_*`` shrinks them) are created
through kube-apiserver, then ``tasgate serve --kubeconfig`` starts against it. The scenario prints
its figures and writes them to ``$TASGATE_SCALE_OUT`` (default ``~/.cache/tasgate/e2e-scale.json``):
creation time, time to ready, RSS, review latency at rest and under Pod churn, and the time from
deleting the one rack a gang fits in now to tasgate's verdict changing. It asserts what the
verdicts are, never how fast anything was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from e2e import scale
from e2e.controlplane import ControlPlane
from e2e.kueue_scenario import job, setup_queues
from e2e.shared import shared_dir
from tests.e2e_scale.churn import Churn
from tests.e2e_scale.probe import Tasgate, Verdict, memory_mib, percentiles_ms, review_body

pytestmark = pytest.mark.e2e_scale

CRDS = shared_dir() / "crds"
GANG_NAMESPACE = "scale"
SAMPLE_S = float(os.environ.get("TASGATE_SCALE_SAMPLE_S", "20"))  # review sampling, at rest and in churn
VERDICT_TIMEOUT_S = 300.0  # only so that a verdict that never changes fails instead of hanging


def figures_path() -> Path:
    cache = Path(os.environ.get("TASGATE_CACHE", Path.home() / ".cache" / "tasgate"))
    return Path(os.environ.get("TASGATE_SCALE_OUT", cache / "e2e-scale.json"))


def install_kueue_objects(cp: ControlPlane) -> None:
    """Kueue's CRDs and Coscheduling's PodGroup (../shared/crds: tasgate then adds gang labels), and
    the Topology / flavor / queues of e2e/kueue_scenario.py."""
    crds = [*sorted(CRDS.glob("kueue.x-k8s.io_*.yaml")), CRDS / "scheduling.x-k8s.io_podgroups.yaml"]
    assert len(crds) > 1, f"no Kueue CRDs in {CRDS}"
    cp.kubectl("apply", "--server-side", *(a for c in crds for a in ("-f", str(c))))
    names = ["crd/{1}.{0}".format(*c.stem.split("_")) for c in crds]
    cp.kubectl("wait", "--for", "condition=established", "--timeout=60s", *names)
    setup_queues(cp, GANG_NAMESPACE)
    cp.kubectl("create", "namespace", scale.USAGE_NAMESPACE)


async def poll_verdict(
    tasgate: Tasgate, body: bytes, until: Callable[[Verdict], bool], started: float
) -> tuple[Verdict, float]:
    """Poll ``/validate`` until ``until(verdict)``: that verdict, and seconds since ``started``."""
    verdict = await tasgate.verdict(body)
    while not until(verdict):
        if time.perf_counter() - started > VERDICT_TIMEOUT_S:
            raise AssertionError(f"after {VERDICT_TIMEOUT_S:.0f}s the verdict is still {verdict}")
        await asyncio.sleep(0.05)
        verdict = await tasgate.verdict(body)
    return verdict, time.perf_counter() - started


def settled(shape: scale.Shape) -> Callable[[Verdict], bool]:
    """True once a verdict counts none of the target rack: the best rack left is a busy one.

    While the rack's Nodes go one by one, tasgate may first see part of them gone ("room for 35
    of 40"); the settled verdict is the one that names what the busy racks have.
    """
    room = f"room for {shape.free_per_busy_rack} of {shape.gang_pods} pods now"
    return lambda verdict: any(room in warning for warning in verdict.warnings)


async def scenario(cp: ControlPlane, shape: scale.Shape, workdir: Path, figures: dict[str, Any]) -> None:
    api = scale.Api(cp, shape.concurrency)
    try:
        figures["create_nodes_s"] = round(await scale.add_nodes(api, shape), 1)
        figures["create_pods_s"] = round(await scale.add_pods(api, shape), 1)
        tasgate = Tasgate(cp, workdir)
        try:
            await measure(api, tasgate, shape, figures)
        finally:
            await tasgate.stop()
    finally:
        await api.close()


async def measure(api: scale.Api, tasgate: Tasgate, shape: scale.Shape, figures: dict[str, Any]) -> None:
    figures["tasgate_ready_s"] = round(await tasgate.wait_ready(), 2)
    figures["memory_at_ready"] = memory_mib(tasgate.proc.pid)
    figures["tasgate_nodes_at_ready"] = await tasgate.gauge("tasgate_topology_nodes")
    gang = await tasgate.mutated(job("gang", GANG_NAMESPACE, pods=shape.gang_pods))
    body = review_body(gang)
    figures["before"] = before = await tasgate.verdict(body)
    figures["review_rest"], figures["verdicts_rest"] = await sample_reviews(tasgate, body)
    async with Churn(api, shape).running() as churn:
        await asyncio.sleep(churn.lifetime_s)  # until deletes keep pace with creates
        events, began = churn.events, time.perf_counter()
        figures["review_churn"], figures["verdicts_churn"] = await sample_reviews(tasgate, body)
        rate = (churn.events - events) / (time.perf_counter() - began)
        await lose_the_rack(api, tasgate, shape, body, before, figures)
    figures["churn"] = {
        "target_events_per_s": shape.churn_per_s,
        "events_per_s_while_sampling": round(rate, 1),
        "events_per_s_overall": round(churn.events_per_s, 1),
        "creates": churn.creates,
        "deletes": churn.deletes,
        "errors": len(churn.errors),
    }
    figures["memory_at_end"] = memory_mib(tasgate.proc.pid)
    assert not churn.errors, churn.errors[:5]


async def sample_reviews(tasgate: Tasgate, body: bytes) -> tuple[dict[str, float], set[Verdict]]:
    """Latency percentiles of ``SAMPLE_S`` seconds of reviews, and the verdicts they gave."""
    seconds, verdicts = await tasgate.latencies(body, SAMPLE_S)
    return percentiles_ms(seconds), verdicts


async def lose_the_rack(
    api: scale.Api,
    tasgate: Tasgate,
    shape: scale.Shape,
    body: bytes,
    before: Verdict,
    figures: dict[str, Any],
) -> None:
    """Delete the target rack's Nodes; time the first changed verdict and the settled one."""
    started = time.perf_counter()
    await scale.delete_nodes(api, scale.target_nodes(shape), shape.concurrency)
    figures["rack_deleted_s"] = round(time.perf_counter() - started, 3)
    changed, changed_s = await poll_verdict(tasgate, body, lambda v: v != before, started)
    figures["first_changed"], figures["verdict_changed_s"] = changed, round(changed_s, 3)
    figures["after"], settled_s = await poll_verdict(tasgate, body, settled(shape), started)
    figures["verdict_settled_s"] = round(settled_s, 3)
    figures["tasgate_nodes_after"] = await tasgate.gauge("tasgate_topology_nodes")


def plain(value: object) -> object:
    """JSON for the figures' verdicts (one, or the set a sampling window saw)."""
    if isinstance(value, set):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, Verdict):
        return dataclasses.asdict(value)
    raise TypeError(type(value).__name__)


def report(figures: dict[str, Any]) -> None:
    """Print the figures and write them as JSON (outside the repository)."""
    text = json.dumps(figures, indent=2, default=plain)
    print(f"\n== e2e-scale figures ==\n{text}")
    path = figures_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    print(f"written to {path}")


def test_deleting_the_only_fitting_rack_changes_the_verdict(tmp_path: Path) -> None:
    shape = scale.Shape.from_env()
    figures: dict[str, Any] = {
        "nodes": shape.nodes,
        "pods": shape.nodes * shape.pods_per_node,
        "racks": shape.racks,
        "nodes_per_rack": shape.nodes_per_rack,
        "gang": f"{shape.gang_pods}x8 GPUs, one rack required",
        "target_rack": scale.rack_name(shape, shape.target_rack),
    }
    try:
        with ControlPlane(apiserver_args=scale.apiserver_args(tmp_path)) as cp:
            install_kueue_objects(cp)
            asyncio.run(scenario(cp, shape, tmp_path, figures))
    finally:
        report(figures)
    before, changed, after = figures["before"], figures["first_changed"], figures["after"]
    # Before: the target rack holds the whole gang now.
    # tasgate saw every Node of the world, and then the rack go.
    assert figures["tasgate_nodes_at_ready"] == shape.nodes, figures
    assert figures["tasgate_nodes_after"] == shape.nodes - shape.nodes_per_rack, figures
    assert (before.allowed, before.reason, before.fits_now, before.warnings) == (True, "fits", "true", ()), (
        before
    )
    # Pod churn on busy hosts never moved the verdict: every review before the rack went agreed.
    assert figures["verdicts_rest"] == figures["verdicts_churn"] == {before}, figures
    # The first change already is the cause (a rack short of room now), not an error or a denial.
    assert (changed.allowed, changed.reason, changed.fits_now) == (True, "waits", "false"), changed
    # After: every remaining rack still holds it when empty, none now; tasgate says so, in numbers.
    assert (after.allowed, after.reason, after.fits_now) == (True, "waits", "false"), after
    (warning,) = (w for w in after.warnings if "must wait" in w)
    short = shape.gang_pods - shape.free_per_busy_rack
    expected = (
        f"the best rack has room for {shape.free_per_busy_rack} of {shape.gang_pods} pods now ({short} short)"
    )
    assert "must wait" in warning and expected in warning, warning
