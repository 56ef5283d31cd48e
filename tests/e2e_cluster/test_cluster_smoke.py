"""kwok Nodes become Ready; Coscheduling binds a complete gang of Job Pods and holds an incomplete one;
the scheduler-plugins controller writes each PodGroup's phase and counts.

Both gangs' PodGroups are named ``g`` (in two namespaces), which shows a trait of the v0.34.7
controller worth knowing: it lists a group's pods by label in every namespace (no namespace in
its List), so the short gang's PodGroup counts the other gang's pods.

One control plane and one Cluster for the module. Binaries must exist: a missing build fails
(``pytest.fail``), it is never skipped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.cluster import POD_GROUP_LABEL, Cluster, find_cluster_binaries, pod_group
from e2e.controlplane import ControlPlane, find_binaries

from .binaries import require

pytestmark = pytest.mark.e2e_cluster

NODES = ("kwok-0", "kwok-1")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    require(find_binaries, find_cluster_binaries)
    with ControlPlane() as cp, Cluster(cp) as running:
        for name in NODES:
            running.add_node(name)
        yield running


def _job(name: str, namespace: str, group: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {
                "metadata": {"labels": {POD_GROUP_LABEL: group}},
                "spec": {
                    "restartPolicy": "Never",
                    "schedulerName": "scheduler-plugins-scheduler",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "500m"}},
                        }
                    ],
                },
            },
        },
    }


def _job_pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.cp.kubectl_json(
        "get", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}"
    )["items"]
    return items


def _create(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objects))


def _pod_group_status(cluster: Cluster, namespace: str) -> dict[str, Any]:
    obj = cluster.cp.kubectl_json("get", "podgroups.scheduling.x-k8s.io", "g", "-n", namespace)
    return dict(obj.get("status") or {})


def _summary(pods: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(p["metadata"]["name"], p["status"].get("phase", ""), p["spec"].get("nodeName")) for p in pods]


def test_kwok_nodes_become_ready(cluster: Cluster) -> None:
    cluster.wait_nodes_ready(NODES)  # Ready from kwok, not-ready taint removed by node-lifecycle


def test_complete_gang_is_scheduled_and_running(cluster: Cluster) -> None:
    cluster.wait_nodes_ready(NODES)
    namespace = "gang-ok"
    cluster.cp.kubectl("create", "namespace", namespace)
    _create(cluster, pod_group("g", namespace, 2), _job("job", namespace, "g", 2))
    deadline = time.monotonic() + 60
    while True:
        cluster.check_alive()
        pods = _job_pods(cluster, namespace, "job")
        if len(pods) == 2 and all(
            p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods
        ):
            break
        assert time.monotonic() < deadline, f"gang of 2 not Running after 60 s: {_summary(pods)}"
        time.sleep(0.25)
    # The controller sees both pods run (it omits a count of 0): waited for, not slept on.
    deadline = time.monotonic() + 60
    while (status := _pod_group_status(cluster, namespace)).get("running") != 2:
        cluster.check_alive()
        assert time.monotonic() < deadline, f"the PodGroup controller never counted 2 running: {status}"
        time.sleep(0.25)
    assert status.get("phase") == "Running", status
    # pod-complete is not a kwok stage here, so the Pods stay Running and the Job active.
    assert all(p["status"].get("phase") == "Running" for p in _job_pods(cluster, namespace, "job"))


def test_incomplete_gang_stays_pending(cluster: Cluster) -> None:
    cluster.wait_nodes_ready(NODES)
    namespace = "gang-short"
    cluster.cp.kubectl("create", "namespace", namespace)
    _create(cluster, pod_group("g", namespace, 3), _job("job", namespace, "g", 2))
    deadline = time.monotonic() + 30
    while len(pods := _job_pods(cluster, namespace, "job")) < 2:
        assert time.monotonic() < deadline, f"the Job made only {len(pods)} Pods"
        time.sleep(0.25)
    created = time.monotonic()

    def tried() -> set[str]:
        """The pods the scheduler has tried and failed to place (a FailedScheduling for each)."""
        events = cluster.cp.kubectl_json("get", "events", "-n", namespace)["items"]
        return {e["involvedObject"]["name"] for e in events if e.get("reason") == "FailedScheduling"}

    # Pending proves something once the scheduler has tried both pods and the permit's wait
    # (permitWaitingTimeSeconds, 10 s) is over: both waited for (the 12 s a lower bound, which
    # a loaded machine only lengthens), then the pods are looked at.
    deadline = created + 90
    while len(tried()) < 2 or time.monotonic() - created < 12:
        cluster.check_alive()
        assert time.monotonic() < deadline, f"the scheduler tried only {sorted(tried())} in 90 s"
        time.sleep(0.5)
    pods = _job_pods(cluster, namespace, "job")
    assert len(pods) == 2
    assert all(not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending" for p in pods), (
        _summary(pods)
    )
    # 2 pods of minMember 3 would stay Pending, but the controller also counts gang-ok's 2 running
    # pods of a PodGroup "g": 4 >= 3 pods, 2 < 3 running, so Scheduling with running 2.
    status = _pod_group_status(cluster, namespace)
    assert (status.get("phase"), status.get("running")) == ("Scheduling", 2), status
    # occupiedBy is the owner of whichever pod that list returns first, in either namespace.
    assert status.get("occupiedBy") in ("gang-ok/job", f"{namespace}/job"), status
