"""The topology picture and fragmentation gauges of a live tasgate, against a real API server.

The module's own world (``tests.e2e.test_e2e.world``: a real kube-apiserver + etcd, 2 blocks x 2
racks x 2 hosts of 8-GPU Nodes, bound Pods using three hosts, Kueue's objects, tasgate serving
both webhooks from its list+watch state). A Job that must wait goes in through kubectl; then the
metrics port's `/topology` is fetched, drawn by headless Chromium, and held to what the harness
created — and followed when a busy Pod is deleted.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from e2e.controlplane import ControlPlane
from tests.e2e.test_e2e import BLOCK, NS, Tasgate, apply, job, wait_for, world  # noqa: F401 (world: fixture)
from tests.webhook.chromium import domain_group, render, rgb
from tests.webhook.conftest import tasgate
from webhook.present.html import LEVEL_FILLS

pytestmark = pytest.mark.e2e

BUSY_HOSTS = {"b1-r1-h1", "b1-r1-h2", "b2-r1-h1"}  # what ``world`` binds its 8-GPU usage pods to
HOSTS = [f"{b}-{r}-{h}" for b in ("b1", "b2") for r in ("r1", "r2") for h in ("h1", "h2")]


def side(tasgate: Tasgate, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{tasgate.metrics_port}{path}", timeout=10) as r:
        body: str = r.read().decode()
        return body


def free_of(block: str) -> int:
    return sum(8 for h in HOSTS if h.startswith(block + "-") and h not in BUSY_HOSTS)


def test_live_topology_page_draws_the_cluster_and_the_waiting_gang(
    world: tuple[ControlPlane, Tasgate],  # noqa: F811
    tmp_path: Path,
) -> None:
    cp, tasgate = world
    result = apply(cp, job("topo-wait", 4, 8, {"kueue.x-k8s.io/podset-required-topology": BLOCK}))
    assert result.returncode == 0 and "must wait" in result.stderr, result.stderr
    page = side(tasgate, "/topology")
    assert '<meta http-equiv="refresh"' in page and "state generation " in page
    image, dom = render(page, tmp_path)
    for depth, expected in enumerate((2, 4, 8)):
        regions = image.regions(rgb(LEVEL_FILLS[depth]), 300)
        assert len(regions) == expected, (depth, len(regions))
    for block in ("b1", "b2"):
        assert f">free {free_of(block)}/32<" in domain_group(dom, block)
    assert "Job e2e/topo-wait" in dom and ">W1<" in dom
    labels = f'{{domain="b1",flavor="gpu-flavor",level="{BLOCK}",topology="gpu"}}'
    assert f"tasgate_domain_free_accelerators{labels} {float(free_of('b1'))}" in side(tasgate, "/metrics")


def test_live_topology_follows_the_watch(world: tuple[ControlPlane, Tasgate]) -> None:  # noqa: F811
    cp, tasgate = world
    assert "b2 24/32" in side(tasgate, "/topology?format=text")
    # No kubelet to confirm the end of a bound Pod: delete it the way a node's loss would.
    cp.kubectl("delete", "pod", "busy-b2-r1-h1", "-n", NS, "--grace-period=0", "--force")
    wait_for(
        "the page to show b2 fully free",
        lambda: "b2 32/32" in side(tasgate, "/topology?format=text"),
        timeout=30,
    )


def test_tasgate_map_reads_the_live_cluster(world: tuple[ControlPlane, Tasgate]) -> None:  # noqa: F811
    """`tasgate map --kubeconfig`: the same kinds live mode watches, listed once, the same figures."""
    cp, _ = world
    run = tasgate("map", "--kubeconfig", str(cp.kubeconfig))
    assert run.code == 0, run.err
    assert "topology gpu · flavor gpu-flavor · nvidia.com/gpu free/total" in run.out
    assert f"b1 {free_of('b1')}/32" in run.out
    assert "hosts: b1-r1-h1 0/8, b1-r1-h2 0/8" in run.out
