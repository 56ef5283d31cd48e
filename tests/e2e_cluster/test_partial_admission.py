"""A gang Kueue admits partially starts: its PodGroup asks for the pods Kueue admits, not all.

On the real parts (Kueue v0.19.2, kube-controller-manager's Job controller, kwok, the
scheduler-plugins scheduler with Coscheduling and its PodGroup controller) and ``tasgate serve``
in live mode with the default policy (``gpu-gangs``: a Coscheduling gang). One rack of three
8-GPU nodes; a Job of 4 × 8 GPUs that requires one rack, with
``kueue.x-k8s.io/job-min-parallelism: 2``, labelled by its user for PodGroup ``elastic`` (the
PodGroup itself is tasgate's to make):

1. Kueue's partial admission (``PodSetReducer``) admits it with 3 pods
   (``status.admission.podSetAssignments[0].count``) and sets the Job's ``parallelism`` to 3;
2. tasgate's reconciler made the PodGroup when Kueue created the Workload — before the
   admission, with Kueue's minimum, 2 — and sizes it to the admitted 3 once the admission is
   seen (or makes it with 3 at once, when the admission came first): minMember 3, minResources
   3 × (1 cpu, 8 GPUs);
3. the Job controller creates 3 pods, Kueue's TopologyUngater ungates them, Coscheduling binds
   them (quorum 3 of 3) and kwok runs them: 3 pods bound and Running, on 3 hosts.

Before tasgate read the admission, the PodGroup asked for 4 and no pod ever bound (Coscheduling:
"cannot find enough sibling pods"). With ``TASGATE_CAPTURE_PARTIAL=1`` the Workload, Job and
PodGroup are written (normalised) to tests/webhook/manifests/partial/ for the unit tests.
Missing binaries fail, never skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster import POD_GROUP_LABEL, Cluster, find_cluster_binaries
from e2e.controlplane import ControlPlane, find_binaries
from e2e.kueue import Kueue, find_kueue
from e2e.kueue_admission import owned_workloads, wait_admitted
from e2e.kueue_scenario import BLOCK, NODE_POOL, RACK, job, queue_objects
from e2e.nodes import GPU

from .binaries import require
from .world import GPU_NODE, NS, Tasgate, normalise, wait

pytestmark = pytest.mark.e2e_cluster

NAME = "elastic"
HOSTS = ("n0", "n1", "n2")  # one rack: room for 3 of the Job's 4 pods
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
CAPTURE = Path(__file__).resolve().parents[1] / "webhook" / "manifests" / "partial"
HEADER = (
    "# {what} of tests/e2e_cluster/test_partial_admission.py, as Kueue v0.19.2, the Job\n"
    "# controller, kwok, Coscheduling and tasgate's reconciler left them once the 3 pods ran.\n"
    "# Normalised: managedFields dropped. Regenerate with\n"
    "# TASGATE_CAPTURE_PARTIAL=1 make e2e-cluster; do not edit by hand.\n"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require(find_binaries, find_cluster_binaries, find_kueue)
    workdir = tmp_path_factory.mktemp("partial")
    with ControlPlane() as cp, Cluster(cp) as nodes, Kueue(cp):
        for name in HOSTS:
            nodes.add_node(name, GPU_NODE, {**NODE_POOL, BLOCK: "b0", RACK: "b0-r0"})
        nodes.wait_nodes_ready(list(HOSTS))
        cp.kubectl("create", "namespace", NS)
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(queue_objects(NS)))
        tasgate = Tasgate(cp, workdir)
        try:
            wait(lambda: "tasgate_podgroups" in tasgate.metrics(), "tasgate's metrics", 60)
            yield cp
        finally:
            tasgate.stop()


def elastic_job() -> dict[str, Any]:
    obj = job(NAME, NS, pods=4)
    obj["metadata"]["annotations"] = {MIN_PARALLELISM: "2"}
    obj["spec"]["template"].setdefault("metadata", {})["labels"] = {POD_GROUP_LABEL: NAME}
    return obj


def running_pods(cp: ControlPlane) -> list[dict[str, Any]]:
    pods = cp.kubectl_json("get", "pods", "-n", NS, "-l", f"job-name={NAME}")["items"]
    return [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]


def pod_group(cp: ControlPlane) -> dict[str, Any] | None:
    found = cp.kubectl("get", "podgroups.scheduling.x-k8s.io", NAME, "-n", NS, "-o", "json", check=False)
    return yaml.safe_load(found.stdout) if found.returncode == 0 else None


def test_a_partially_admitted_gang_gets_the_admitted_quorum_and_runs(cluster: ControlPlane) -> None:
    cp = cluster
    cp.kubectl("create", "-f", "-", input=yaml.safe_dump(elastic_job()))
    (workload,) = wait_admitted(cp, NS, "Job", NAME)
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 3, workload["status"]["admission"]
    assert workload["spec"]["podSets"][0]["minCount"] == 2, workload["spec"]
    wait(lambda: len(running_pods(cp)) == 3, "3 pods of Job elastic bound and Running", 90)
    assert sorted(p["spec"]["nodeName"] for p in running_pods(cp)) == list(HOSTS)
    group = pod_group(cp)
    assert group is not None and group["spec"]["minMember"] == 3, group
    assert group["spec"]["minResources"] == {"cpu": "3", GPU: "24"}, group["spec"]
    assert group["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tasgate", group["metadata"]
    stored = cp.kubectl_json("get", "job", NAME, "-n", NS)
    assert stored["spec"]["parallelism"] == 3, stored["spec"]  # Kueue ran the Job with what it admitted
    if os.environ.get("TASGATE_CAPTURE_PARTIAL"):
        capture(cp, stored)


def capture(cp: ControlPlane, stored: dict[str, Any]) -> None:
    """The Workload, Job and PodGroup as the real components left them (normalised)."""
    CAPTURE.mkdir(parents=True, exist_ok=True)
    (workload,) = owned_workloads(cp, NS, "Job", NAME)
    group = cp.kubectl_json("get", "podgroups.scheduling.x-k8s.io", NAME, "-n", NS)
    for what, obj, file in (("The Workload", workload, "workload.yaml"), ("The Job", stored, "job.yaml"),
                            ("The PodGroup", group, "podgroup.yaml")):  # fmt: skip
        (CAPTURE / file).write_text(HEADER.format(what=what) + yaml.safe_dump(normalise(obj), sort_keys=True))
