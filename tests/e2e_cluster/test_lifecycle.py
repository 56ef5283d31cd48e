"""Every gang followed after admission, on the real parts: Kueue, kube-controller-manager, kwok, Coscheduling.

One world for the module: a control plane, the Cluster (kwok playing the kubelets, the job
controller creating Pods, the scheduler-plugins scheduler with Coscheduling and the
scheduler-plugins controller writing PodGroup status), the real Kueue, and ``tasgate serve`` in
live mode with ``partialStartAfter: 5s`` (tests/e2e_cluster/world.py). Nodes:

- rack ``b0-r0`` (n0, n1), ``b0-r1`` (n2, n3) and ``b0-r2`` (n4 … n7): 8-GPU kwok nodes of the TAS
  flavor ``gpu-flavor`` (``pool: gpu``, queue ``gpu-queue``);
- c0, c1: 2-CPU kwok nodes of a flavor without topology (``pool: cpu``, queue ``cpu-queue``).

Scenarios (each test waits for what it needs; they run in file order):

1. ``run``: 2 × 8 GPUs in one rack, PodGroup minMember 2 → Kueue admits it, TAS ungates the pods,
   Coscheduling binds both, kwok runs them: ``running``; tasgate's prediction agrees with Kueue's
   TopologyAssignment (``tasgate_predictions_total{result="agree"}``). The controller's PodGroup
   phase goes to ``Running`` with ``status.running`` 2, and tasgate's message says so.
2. ``partial``: 4 pods × 2 CPUs on a queue without TAS, PodGroup minMember 2, nodes for 2 →
   Coscheduling lets 2 run and holds the rest Pending: ``partial_start`` after 5 s, one Event.
   (Kueue's TAS would not admit such a gang at all, so the honest way is a queue without TAS.)
   Its PodGroup is ``Running`` too: minMember pods run, which is all the controller asks.
3. ``held``: 2 × 2 CPUs on the same queue, now full: admitted, no pod can bind → ``assembling``
   (``Scheduling``) with the PodGroup in phase ``Scheduling``, 0 running.
4. ``wide``: 4 × 8 GPUs in one rack while a pod outside Kueue holds one node of the only 4-node
   rack → ``waiting_topology`` (its PodGroup ``Pending``: the Job is suspended, no pods); then that
   rack is cordoned and deleted → ``never_fits`` (``CapacityLost``), one Event on the Job.

Then ``tasgate status`` lists each gang with its state, and ``/metrics`` carries the lifecycle
metrics; last, ``run``'s Workload is deactivated (``spec.active: false``) and Kueue evicts it:
``evicted`` with Kueue's reason ``Deactivated``, and its PodGroup drops back to ``Pending``. With
``TASGATE_CAPTURE_LIFECYCLE=1`` the objects are written (normalised) to
tests/webhook/manifests/lifecycle/ for the unit tests (before the eviction). Missing binaries
fail, never skip.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator

import pytest
import yaml

from e2e.cluster import Cluster, find_cluster_binaries, pod_group
from e2e.controlplane import ControlPlane, find_binaries
from e2e.kueue import Kueue, find_kueue
from e2e.kueue_scenario import BLOCK, LOCAL_QUEUE, NODE_POOL, RACK
from e2e.nodes import GPU
from e2e.serving import TASGATE

from .binaries import require
from .world import (
    CPU_NODE,
    CPU_NODES,
    CPU_QUEUE,
    GPU_NODE,
    NS,
    RACKS,
    Tasgate,
    World,
    capture,
    gang_job,
    metric,
    wait,
    world_objects,
)

pytestmark = pytest.mark.e2e_cluster


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require(find_binaries, find_cluster_binaries, find_kueue)
    workdir = tmp_path_factory.mktemp("lifecycle")
    with ControlPlane() as cp, Cluster(cp) as cluster, Kueue(cp):
        for rack, names in RACKS.items():
            for name in names:
                cluster.add_node(name, GPU_NODE, {**NODE_POOL, BLOCK: "b0", RACK: rack})
        for name in CPU_NODES:
            cluster.add_node(name, CPU_NODE, {"pool": "cpu"})
        cluster.wait_nodes_ready([n for names in RACKS.values() for n in names] + list(CPU_NODES))
        cp.kubectl("create", "namespace", NS)
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(world_objects()))
        tasgate = Tasgate(cp, workdir)
        try:
            wait(lambda: "tasgate_gangs" in tasgate.metrics(), "tasgate's metrics", 60)
            yield World(cp, cluster, tasgate)
        finally:
            tasgate.stop()


def test_a_gang_assembles_and_runs_where_tasgate_predicted(world: World) -> None:
    world.create(pod_group("run", NS, 2), gang_job("run", 2))
    item = world.wait_state("run", "running")
    assert (item["kind"], item["queue"], item["clusterQueue"]) == ("Job", LOCAL_QUEUE, "gpu-cq")
    assert item["pods"] == {"admitted": 2, "scheduled": 2, "running": 2, "pending": 0}, item
    assert item["podGroup"] == "run"
    metrics = world.tasgate.metrics()
    assert metric(metrics, "tasgate_predictions_total", result="agree", reason="none") == 1.0, metrics
    assert metric(metrics, "tasgate_gangs", state="running", cluster_queue="gpu-cq", namespace=NS) == 1.0
    assert world.events("run") == []  # nothing worth an operator's attention
    assert world.tasgate.transitions("run")[-2:] == ["assembling", "running"]
    # Where its pods are (one rack, two hosts) and how long each start-up phase took, once each.
    rack = {"level": RACK, "mode": "required"}
    assert metric(metrics, "tasgate_gang_domains_spanned_bucket", le="1.0", **rack) == 1.0, metrics
    assert metric(metrics, "tasgate_gang_domains_spanned_count", **rack) == 1.0
    assert metric(metrics, "tasgate_gang_domains_spanned_sum", level="kubernetes.io/hostname") == 2.0
    met = {"mode": "required", "result": "met", "level": RACK}
    assert metric(metrics, "tasgate_gang_topology_met_total", **met) == 1.0
    for phase in ("queued", "assembling", "starting"):
        assert metric(metrics, "tasgate_gang_phase_seconds_count", phase=phase, cluster_queue="gpu-cq") == 1.0
    assert metric(metrics, "tasgate_gang_partial_start_seconds_count", cluster_queue="gpu-cq") == 1.0


def test_the_controller_reports_the_running_gang_and_tasgate_shows_it(world: World) -> None:
    status = world.wait_pod_group("run", "Running", 2)
    assert status.get("occupiedBy") == f"{NS}/run", status  # the pods' owner: the Job
    item = world.wait_message("run", "(PodGroup run: minMember 2, phase Running, 2 running)")
    assert (item["state"], item["reason"]) == ("running", "AllRunning"), item
    assert item["message"].startswith("2 of 2 pods running"), item


def test_a_partial_start_is_reported_once(world: World) -> None:
    world.create(pod_group("partial", NS, 2), gang_job("partial", 4, queue=CPU_QUEUE, cpu="2"))
    item = world.wait_state("partial", "partial_start", timeout=90)
    assert item["reason"] == "PartialStart" and item["pods"]["running"] == 2, item
    assert item["pods"]["pending"] == 2 and "2 of 4 pods running" in item["message"], item
    time.sleep(3)  # several tracking rounds: still one Event for one state change
    events = world.events("partial")
    assert [(e["reason"], e["type"], e["regarding"]["kind"]) for e in events] == [
        ("PartialStart", "Warning", "Job")
    ]
    assert events[0]["related"]["kind"] == "Workload"
    # minMember of them run, so the controller calls the group Running; tasgate says both.
    world.wait_pod_group("partial", "Running", 2)
    item = world.wait_message("partial", "(PodGroup partial: minMember 2, phase Running, 2 running)")
    assert item["state"] == "partial_start", item


def test_an_admitted_gang_that_cannot_bind_assembles_in_phase_scheduling(world: World) -> None:
    world.create(pod_group("held", NS, 2), gang_job("held", 2, queue=CPU_QUEUE, cpu="2"))
    world.wait_pod_group("held", "Scheduling", 0)  # 2 pods exist (>= minMember), none runs
    item = world.wait_state("held", "assembling")
    assert item["reason"] == "Scheduling" and item["pods"]["pending"] == 2, item
    item = world.wait_message(
        "held", "0 of 2 pods scheduled, 0 running (PodGroup held: minMember 2, phase Scheduling, 0 running)"
    )
    assert item["state"] == "assembling", item


def test_a_waiting_gang_whose_rack_is_lost_never_fits_any_more(world: World) -> None:
    blocker = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "blocker", "namespace": NS},
        "spec": {
            "nodeName": "n4",
            "containers": [
                {"name": "c", "image": "busy", "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}
            ],
        },
    }
    world.create(blocker)

    def blocker_runs() -> bool:
        return bool(
            world.cp.kubectl_json("get", "pod", "blocker", "-n", NS)["status"].get("phase") == "Running"
        )

    wait(blocker_runs, "the blocker pod to run", 30)
    world.create(pod_group("wide", NS, 4), gang_job("wide", 4))
    item = world.wait_state("wide", "waiting_topology")
    assert item["reason"] == "WaitingForCapacity" and "has room for 3 of 4 pods now" in item["message"], item
    assert "Kueue: couldn't assign flavors" in item["message"], item  # Kueue's own numbers follow
    world.wait_pod_group("wide", "Pending", 0)  # queued: Kueue keeps the Job suspended, no pods
    for name in RACKS["b0-r2"]:
        world.cp.kubectl("cordon", name)
    world.cp.kubectl("delete", "node", *RACKS["b0-r2"], "--wait=true")
    item = world.wait_state("wide", "never_fits")
    assert world.tasgate.transitions("wide")[-2:] == ["waiting_topology", "never_fits"]
    assert "no longer fits any rack" in item["message"], item
    wait(lambda: len(world.events("wide")) == 1, "the capacity-loss Event on Job wide", 20)
    event = world.events("wide")[0]
    assert (event["reason"], event["regarding"]["kind"]) == ("CapacityLost", "Job"), event
    assert "capacity was lost" in event["note"], event
    # The Event is written once, at the first tracking round that saw the gang never fit; the 4
    # nodes are cordoned and deleted one by one, so that round may have seen 3 of them still usable
    # (a 12:37 run did: the note said 3) or all 4 gone, the largest rack then being a 2-node one.
    assert re.search(r"the largest rack holds [23] such pods even when empty", event["note"]), event


def test_tasgate_status_lists_every_gang_with_its_state(world: World) -> None:
    items = world.status()
    states = {name: item["state"] for name, item in items.items()}
    assert states == {
        "run": "running",
        "partial": "partial_start",
        "held": "assembling",
        "wide": "never_fits",
    }
    assert "phase Running, 2 running" in items["run"]["message"], items["run"]
    table = subprocess.run(
        [str(TASGATE), "status", "--kubeconfig", str(world.cp.kubeconfig), "--policy", str(world.policy)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert table[0].split() == ["NAMESPACE", "NAME", "KIND", "QUEUE", "STATE", "REASON", "AGE"]
    rows = {line.split()[1]: line.split() for line in table[1:]}
    assert rows["run"][2:5] == ["Job", LOCAL_QUEUE, "running"]
    assert rows["partial"][3:6] == [CPU_QUEUE, "partial_start", "PartialStart"]
    assert rows["held"][3:6] == [CPU_QUEUE, "assembling", "Scheduling"]
    assert rows["wide"][4] == "never_fits"
    wide = subprocess.run(
        [str(TASGATE), "status", "--kubeconfig", str(world.cp.kubeconfig), "--policy", str(world.policy),
         "-o", "wide"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    run_row = next(line for line in wide if line.split()[1] == "run")
    assert re.search(r"block=b0 rack=b0-r\d \(required met\)", run_row), wide
    metrics = world.tasgate.metrics()
    for name, state in states.items():
        uid = world.cp.kubectl_json("get", "job", name, "-n", NS)["metadata"]["uid"]
        assert metric(metrics, "tasgate_gang_state_seconds", name=name, uid=uid, state=state) is not None
    if os.environ.get("TASGATE_CAPTURE_LIFECYCLE"):
        capture(world)


def test_a_deactivated_gang_is_evicted_with_kueues_reason(world: World) -> None:
    (workload,) = [
        w["metadata"]["name"]
        for w in world.cp.kubectl_json("get", "workloads.kueue.x-k8s.io", "-n", NS)["items"]
        if w["metadata"]["ownerReferences"][0]["name"] == "run"
    ]
    world.cp.kubectl(
        "patch",
        "workloads.kueue.x-k8s.io",
        workload,
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"spec":{"active":false}}',
    )
    item = world.wait_state("run", "evicted")
    assert item["reason"] == "Deactivated", item  # Kueue's own Evicted reason, verbatim
    assert world.tasgate.transitions("run")[-1] == "evicted"
    # The suspended Job's pods go: below minMember, Pending. Its running count is whatever the
    # controller counted on the way down (0, 1 or 2 as runs go): it stops counting in Pending.
    world.wait_pod_group("run", "Pending", None)
