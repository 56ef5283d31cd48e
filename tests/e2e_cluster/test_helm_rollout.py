"""The chart's defaults roll out, upgrade and drain on one node and on two (``make e2e-cluster``).

Two replicas with *required* anti-affinity and the default RollingUpdate hung: on one node the
second replica never scheduled (``rollout status`` never finished), on two nodes every upgrade's
surge pod had no node (and 25% of 2 replicas may be unavailable: none), and a PodDisruptionBudget
of ``minAvailable: 1`` with one replica blocked every drain of its node for good. Here
``helm install --wait`` and ``helm upgrade --wait`` (a changed pod template: a real rollout)
must finish with one kwok node and again with two, and ``kubectl drain`` must finish: the only
replica on one node, and the node holding replicas of two (they move to the other).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster import Cluster, find_cluster_binaries
from e2e.controlplane import ControlPlane, find_binaries
from e2e.helm import CHART, Helm, find_helm, value_flags
from tests.e2e.install_image import IMAGE_VALUES

from .binaries import require
from .test_helm_install import RolloutCluster

pytestmark = pytest.mark.e2e_cluster

FIRST, SECOND = "kwok-rollout-0", "kwok-rollout-1"
NS = "tasgate-system"
WAIT = ("--wait", "--timeout=120s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Cluster, Helm]]:
    """One kwok Node to begin with; the two-node test adds the second."""
    require(find_binaries, find_cluster_binaries, find_helm)
    with ControlPlane() as cp, RolloutCluster(cp) as running:
        running.add_node(FIRST)
        running.wait_nodes_ready([FIRST])
        yield cp, running, Helm(tmp_path_factory.mktemp("helm"), kubeconfig=cp.kubeconfig)


def helm_release(helm: Helm, verb: str, *flags: str) -> None:
    done = helm.run(verb, "tasgate", str(CHART), "-n", NS, *value_flags(IMAGE_VALUES), *flags, *WAIT,
                    check=False, timeout=200)  # fmt: skip
    assert done.returncode == 0 and "STATUS: deployed" in done.stdout, f"helm {verb}: {done.stderr}"


def pods(cp: ControlPlane) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cp.kubectl_json(
        "get", "pods", "-n", NS, "-l", "app.kubernetes.io/name=tasgate"
    )["items"]
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def rolled_out(cp: ControlPlane, replicas: int) -> dict[str, Any]:
    """The Deployment after --wait: every replica updated and ready, none left of the old template."""
    deployment: dict[str, Any] = cp.kubectl_json("get", "deployment", "tasgate", "-n", NS)
    status = deployment["status"]
    assert status.get("updatedReplicas") == status.get("readyReplicas") == replicas, status
    assert status.get("replicas") == replicas, status
    return deployment


def template_hashes(cp: ControlPlane) -> set[str]:
    return {p["metadata"]["labels"]["pod-template-hash"] for p in pods(cp)}


def drain(cp: ControlPlane, node: str) -> None:
    done = cp.kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s",
                      check=False, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"drain {node} blocked:\n{done.stdout}\n{done.stderr}"


def test_on_one_node_install_and_upgrade_finish_and_a_drain_evicts_a_single_replica(
    cluster: tuple[ControlPlane, Cluster, Helm],
) -> None:
    cp, _, helm = cluster
    assert [n["metadata"]["name"] for n in cp.kubectl_json("get", "nodes")["items"]] == [FIRST]
    try:
        helm_release(helm, "install", "--create-namespace")
        rolled_out(cp, 2)
        assert {p["spec"]["nodeName"] for p in pods(cp)} == {FIRST}, "both replicas on the one node"
        before = template_hashes(cp)
        helm_release(helm, "upgrade", "--set", "onTimeout=allow")  # new pod template: a rollout
        rolled_out(cp, 2)
        assert template_hashes(cp).isdisjoint(before), "every replica replaced"
        # One replica (what a one-node cluster should run): its PodDisruptionBudget lets a drain evict it.
        helm_release(helm, "upgrade", "--set", "replicas=1")
        rolled_out(cp, 1)
        drain(cp, FIRST)
    finally:
        cp.kubectl("uncordon", FIRST, check=False)
        helm.run("uninstall", "tasgate", "-n", NS, "--wait", check=False)


def test_on_two_nodes_upgrades_finish_and_a_drain_moves_the_replicas(
    cluster: tuple[ControlPlane, Cluster, Helm],
) -> None:
    cp, running, helm = cluster
    running.add_node(SECOND)
    running.wait_nodes_ready([FIRST, SECOND])
    try:
        helm_release(helm, "install", "--create-namespace")
        rolled_out(cp, 2)
        assert {p["spec"]["nodeName"] for p in pods(cp)} == {FIRST, SECOND}, "spread where it can be"
        for on_timeout in ("allow", "deny"):  # two upgrades: each a rollout with every node occupied
            before = template_hashes(cp)
            helm_release(helm, "upgrade", "--set", f"onTimeout={on_timeout}")
            rolled_out(cp, 2)
            assert template_hashes(cp).isdisjoint(before)
        busiest = max((FIRST, SECOND), key=lambda n: sum(p["spec"]["nodeName"] == n for p in pods(cp)))
        drain(cp, busiest)
        other = SECOND if busiest == FIRST else FIRST
        rolled_out(cp, 2)
        assert {p["spec"]["nodeName"] for p in pods(cp)} == {other}, "the replicas moved to the other node"
    finally:
        for node in (FIRST, SECOND):
            cp.kubectl("uncordon", node, check=False)
        helm.run("uninstall", "tasgate", "-n", NS, "--wait", check=False)
