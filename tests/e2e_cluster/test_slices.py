"""What Kueue and the cluster do with a slice size that does not divide the pod count (issue 18.6).

Kueue's Job webhook accepts ``podset-slice-size`` up to the pod count, and its TAS placement
(``findTopologyAssignment``) assigns whole slices only: ``count / sliceSize`` slices, so 5 pods in
slices of 2 get a TopologyAssignment for 4. This module runs that on the real parts (Kueue v0.19.2,
kube-controller-manager's Job controller creating the Pods, kwok running them, the Coscheduling
scheduler) and proves what tasgate's verdicts on it rely on:

1. Kueue admits the Workload with ``count`` 5 and a TopologyAssignment of 4 pods, both with a
   required and a preferred level;
2. its TopologyUngater ungates 4 pods onto the assigned hosts; the 5th keeps the
   ``kueue.x-k8s.io/topology`` scheduling gate, unbound, for as long as the 4 run;
3. only when one of the 4 ends (here: marked Succeeded) is the 5th ungated, onto the host the
   ended pod left (the ungater counts terminated pods out of a domain's ungated pods);
4. in a Coscheduling gang of the whole count (PodGroup minMember 5, the group tasgate's policy makes)
   none of the 5 ever runs: Coscheduling refuses the 4 ungated pods at PreFilter ("cannot proceed
   due to gated pods in the same PodGroup");
5. fidelity: ``tasgate check`` on a dump taken before each submission predicts the same pods per
   host as Kueue's TopologyAssignment, for 5/2, 7/3 and 3/2; it admits the Job as written (no
   gang: it runs, its leftover pods later) with a warning, and denies it as ``partial-slice``
   when its user made it a gang (point 4).

Kwok has no pod-complete stage here (e2e/cluster.py), so pods run until the test ends them.
Missing binaries fail, never skip.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster import POD_GROUP_LABEL, Cluster, find_cluster_binaries, pod_group
from e2e.controlplane import ControlPlane, find_binaries
from e2e.fidelity import kueue_outcome, predicted_podsets
from e2e.kueue import Kueue, find_kueue
from e2e.kueue_admission import owned_workloads, wait_admitted, wait_for
from e2e.kueue_scenario import BLOCK, LOCAL_QUEUE, NODE_POOL, QUEUE_LABEL, RACK, queue_objects
from e2e.nodes import GPU, HOSTNAME_LABEL
from e2e.serving import TASGATE

from .binaries import require

pytestmark = pytest.mark.e2e_cluster

NS = "slices"
GATE = "kueue.x-k8s.io/topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
SLICE_LEVEL = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
RACKS = {"r0": 3, "r1": 3, "r2": 3}  # hosts per rack; each 8-GPU host takes two 4-GPU pods
HELD = 12.0  # seconds a gated pod is watched staying gated: over a Permit timeout (10 s) and retry


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require(find_binaries, find_cluster_binaries, find_kueue)
    with ControlPlane() as plane, Cluster(plane) as cluster, Kueue(plane):
        names = []
        for rack, hosts in RACKS.items():
            for h in range(hosts):
                name = f"{rack}-h{h}"
                allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "8"}
                cluster.add_node(name, allocatable, {**NODE_POOL, BLOCK: "b0", RACK: rack})
                names.append(name)
        cluster.wait_nodes_ready(names)
        plane.kubectl("create", "namespace", NS)
        plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(queue_objects(NS)))
        yield plane


def sliced_job(name: str, pods: int, size: int, annotations: Mapping[str, str]) -> dict[str, Any]:
    """An Indexed, suspended Job of ``pods`` × 4 GPUs in slices of ``size`` (annotations: the levels)."""
    resources = {"requests": {"cpu": "1", GPU: "4"}, "limits": {GPU: "4"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "suspend": True,
            "template": {
                "metadata": {"annotations": {**annotations, SLICE_SIZE: str(size)}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "train", "image": "trainer:latest", "resources": resources}],
                },
            },
        },
    }


def pods_of(cp: ControlPlane, job: str) -> list[dict[str, Any]]:
    return list(cp.kubectl_json("get", "pods", "-n", NS, "-l", f"job-name={job}")["items"])


def gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or ())


def running(pod: Mapping[str, Any]) -> bool:
    return pod["status"].get("phase") == "Running" and bool(pod["spec"].get("nodeName"))


def census(cp: ControlPlane, job: str) -> dict[str, int]:
    """How many of the Job's live pods are gated, running, or ungated but unbound."""
    pods = [p for p in pods_of(cp, job) if p["status"].get("phase") not in ("Succeeded", "Failed")]
    return {
        "gated": sum(gated(p) for p in pods),
        "running": sum(running(p) for p in pods),
        "unbound": sum(not gated(p) and not p["spec"].get("nodeName") for p in pods),
    }


def wait_census(cp: ControlPlane, job: str, want: Mapping[str, int], timeout: float = 60.0) -> None:
    seen: dict[str, int] = {}

    def reached() -> bool:
        nonlocal seen
        seen = census(cp, job)
        return seen == dict(want)

    try:
        wait_for(f"pods of {job} at {want}", reached, timeout, every=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; seen {seen}") from None


def holds(cp: ControlPlane, job: str, want: Mapping[str, int], seconds: float = HELD) -> None:
    """The census stays ``want`` for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert census(cp, job) == dict(want), f"{job} left {want}: {census(cp, job)}"
        time.sleep(1.0)


def dump(cp: ControlPlane, directory: Path) -> Path:
    """The documented `tasgate check --state` dump: core objects and Kueue's, as kubectl prints them."""
    directory.mkdir(parents=True, exist_ok=True)
    core = cp.kubectl("get", "nodes,pods,namespaces", "-A", "-o", "yaml").stdout
    kinds = "topologies,resourceflavors,clusterqueues,localqueues,cohorts,workloads.kueue.x-k8s.io"
    (directory / "core.yaml").write_text(core)
    (directory / "kueue.yaml").write_text(cp.kubectl("get", kinds, "-A", "-o", "yaml").stdout)
    return directory


def check(obj: Mapping[str, Any], state: Path) -> dict[str, Any]:
    """``tasgate check -o json`` of ``obj`` on the dump ``state``: its one verdict."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=state, delete=False) as manifest:
        yaml.safe_dump(dict(obj), manifest)
    argv = [str(TASGATE), "check", "-o", "json", "--state", str(state), "-f", manifest.name]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode in (0, 1), run.stderr + run.stdout
    (verdict,) = json.loads(run.stdout)["results"]
    return dict(verdict)


def admitted(cp: ControlPlane, job: str) -> dict[str, Any]:
    (workload,) = wait_admitted(cp, NS, "Job", job)
    return workload


def delete(cp: ControlPlane, job: str) -> None:
    cp.kubectl("delete", "job", job, "-n", NS, "--cascade=foreground", "--wait=true")
    wait_for(f"pods of {job} gone", lambda: not pods_of(cp, job), 60)
    wait_for(f"Workload of {job} gone", lambda: not owned_workloads(cp, NS, "Job", job), 60)


def assigned_pods(workload: Mapping[str, Any]) -> tuple[int, int]:
    """(the PodSet count Kueue admitted, the pods its TopologyAssignment places)."""
    outcome = kueue_outcome(workload)
    ((_, count, hosts),) = outcome.podsets.values()
    return count, sum(hosts.values())


@pytest.mark.parametrize(
    "mode", [{REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL}, {PREFERRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL}],
    ids=["required", "preferred"],
)  # fmt: skip
def test_the_pod_outside_whole_slices_stays_gated_while_the_others_run(
    cp: ControlPlane, mode: Mapping[str, str]
) -> None:
    name = "five-" + ("req" if REQUIRED in mode else "pref")
    cp.kubectl("create", "-f", "-", input=json.dumps(sliced_job(name, 5, 2, mode)))
    try:
        workload = admitted(cp, name)
        assert assigned_pods(workload) == (5, 4), workload["status"]["admission"]
        wait_census(cp, name, {"gated": 1, "running": 4, "unbound": 0})
        holds(cp, name, {"gated": 1, "running": 4, "unbound": 0})
        (left,) = [p for p in pods_of(cp, name) if gated(p)]
        assert not left["spec"].get("nodeName") and left["status"]["phase"] == "Pending", left
    finally:
        delete(cp, name)


def test_the_left_over_pod_takes_the_place_of_one_that_ends(cp: ControlPlane) -> None:
    name = "five-ends"
    cp.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(sliced_job(name, 5, 2, {REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL})),
    )
    try:
        admitted(cp, name)
        wait_census(cp, name, {"gated": 1, "running": 4, "unbound": 0})
        ended = next(p for p in pods_of(cp, name) if running(p))
        host = ended["spec"]["nodeName"]
        status = {"status": {"phase": "Succeeded"}}
        cp.kubectl(
            "patch", "pod", ended["metadata"]["name"], "-n", NS, "--subresource=status", "--type=merge",
            "-p", json.dumps(status),
        )  # fmt: skip
        wait_census(cp, name, {"gated": 0, "running": 4, "unbound": 0})
        late = [p for p in pods_of(cp, name) if p["metadata"]["name"] != ended["metadata"]["name"]]
        hosts = {p["spec"]["nodeName"] for p in late}
        assert host in hosts, (host, hosts)  # the ended pod's host, the only one with room in the assignment
    finally:
        delete(cp, name)


def test_in_a_gang_of_the_whole_count_no_pod_ever_runs(cp: ControlPlane) -> None:
    name = "five-gang"
    obj = sliced_job(name, 5, 2, {REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL})
    obj["spec"]["template"]["metadata"]["labels"] = {POD_GROUP_LABEL: name}
    cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all([pod_group(name, NS, 5), obj]))
    try:
        workload = admitted(cp, name)
        assert assigned_pods(workload) == (5, 4)
        wait_census(cp, name, {"gated": 1, "running": 0, "unbound": 4})
        holds(cp, name, {"gated": 1, "running": 0, "unbound": 4})
        events = cp.kubectl_json("get", "events", "-n", NS, "--field-selector", "reason=FailedScheduling")
        said = {e["involvedObject"]["name"]: e["message"] for e in events["items"]}
        ungated = [p["metadata"]["name"] for p in pods_of(cp, name) if not gated(p)]
        assert all("gated pods in the same PodGroup" in said.get(pod, "") for pod in ungated), said
    finally:
        delete(cp, name)
        cp.kubectl("delete", "podgroups.scheduling.x-k8s.io", name, "-n", NS)


def with_gang_label(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with its user's own Coscheduling gang label on the pod template."""
    gang = json.loads(json.dumps(obj))
    meta = gang["spec"]["template"].setdefault("metadata", {})
    meta.setdefault("labels", {})["scheduling.x-k8s.io/pod-group"] = f"{obj['metadata']['name']}-gang"
    return dict(gang)


@pytest.mark.parametrize(
    ("pods", "size", "mode"),
    [
        (5, 2, {REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL}),
        (7, 3, {REQUIRED: BLOCK, SLICE_LEVEL: RACK}),
        (3, 2, {PREFERRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL}),
    ],
    ids=["5/2", "7/3", "3/2"],
)
def test_tasgate_predicts_what_kueue_places_and_judges_it(
    cp: ControlPlane, tmp_path: Path, pods: int, size: int, mode: Mapping[str, str]
) -> None:
    name = f"fid-{pods}-{size}"
    obj = sliced_job(name, pods, size, mode)
    verdict = check(obj, dump(cp, tmp_path / "state"))
    cp.kubectl("create", "-f", "-", input=json.dumps(obj))
    try:
        workload = admitted(cp, name)
        placed = pods // size * size
        assert assigned_pods(workload) == (pods, placed)
        ((_, hosts),) = predicted_podsets(verdict).values()
        ((_, _, kueue_hosts),) = kueue_outcome(workload).podsets.values()
        assert hosts == dict(kueue_hosts), (verdict, kueue_hosts)
        # No gang as written: it runs (the leftover pods later), so it is admitted with a warning
        # and the policy adds no gang; made a gang by its user, it never runs and is denied.
        assert verdict["allowed"] and verdict["reason"] in ("fits", "waits"), verdict
        (warning,) = [w for w in verdict["warnings"] if "stay gated until a placed pod ends" in w]
        assert f"{placed} of {pods} pods" in warning and not verdict["podGroups"], verdict
        gang = check(with_gang_label(obj), tmp_path / "state")
        assert (gang["allowed"], gang["reason"]) == (False, "partial-slice"), gang
        assert f"{placed} of {pods} pods" in gang["message"], gang["message"]
        wait_census(cp, name, {"gated": pods - placed, "running": placed, "unbound": 0})
    finally:
        delete(cp, name)
