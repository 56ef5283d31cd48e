"""Every gang followed after admission, on the real parts: Kueue, kube-controller-manager, kwok, Coscheduling.

One world for the module: a control plane, the Cluster (kwok playing the kubelets, the job
controller creating Pods, the scheduler-plugins scheduler with Coscheduling), the real Kueue, and
``tasgate serve`` in live mode with ``partialStartAfter: 5s``. Nodes:

- rack ``b0-r0`` (n0, n1), ``b0-r1`` (n2, n3) and ``b0-r2`` (n4 … n7): 8-GPU kwok nodes of the TAS
  flavor ``gpu-flavor`` (``pool: gpu``, queue ``gpu-queue``);
- c0, c1: 2-CPU kwok nodes of a flavor without topology (``pool: cpu``, queue ``cpu-queue``).

Scenarios (each test waits for what it needs; they run in file order):

1. ``run``: 2 × 8 GPUs in one rack, PodGroup minMember 2 → Kueue admits it, TAS ungates the pods,
   Coscheduling binds both, kwok runs them: ``running``; tasgate's prediction agrees with Kueue's
   TopologyAssignment (``tasgate_predictions_total{result="agree"}``).
2. ``partial``: 4 pods × 2 CPUs on a queue without TAS, PodGroup minMember 2, nodes for 2 →
   Coscheduling lets 2 run and holds the rest Pending: ``partial_start`` after 5 s, one Event.
   (Kueue's TAS would not admit such a gang at all, so the honest way is a queue without TAS.)
3. ``wide``: 4 × 8 GPUs in one rack while a pod outside Kueue holds one node of the only 4-node
   rack → ``waiting_topology``; then that rack is cordoned and deleted → ``never_fits``
   (``CapacityLost``), one Event on the Job.

Then ``tasgate status`` lists each gang with its state, and ``/metrics`` carries the lifecycle
metrics; last, ``run``'s Workload is deactivated (``spec.active: false``) and Kueue evicts it:
``evicted`` with Kueue's reason ``Deactivated``. With ``TASGATE_CAPTURE_LIFECYCLE=1`` the objects
are written (normalised) to tests/webhook/manifests/lifecycle/ for the unit tests (before the
eviction). Missing binaries fail, never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster import POD_GROUP_LABEL, Cluster, find_cluster_binaries, pod_group
from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries, free_ports
from e2e.kueue import KUEUE_API_VERSION, Kueue, find_kueue
from e2e.kueue_scenario import BLOCK, LOCAL_QUEUE, NODE_POOL, QUEUE_LABEL, RACK, job, queue_objects
from e2e.nodes import GPU
from e2e.serving import TASGATE, serve_argv

pytestmark = pytest.mark.e2e_cluster

NS = "gangs"
RACKS = {"b0-r0": ("n0", "n1"), "b0-r1": ("n2", "n3"), "b0-r2": ("n4", "n5", "n6", "n7")}
GPU_NODE = {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "8"}
CPU_NODES, CPU_NODE = ("c0", "c1"), {"cpu": "2", "memory": "8Gi", "pods": "110"}
CPU_FLAVOR, CPU_CQ, CPU_QUEUE = "cpu-flavor", "cpu-cq", "cpu-queue"
PARTIAL_AFTER = 5.0
CAPTURE = Path(__file__).resolve().parents[1] / "webhook" / "manifests" / "lifecycle"


def _fail_if_missing() -> None:
    try:
        find_binaries()
        find_cluster_binaries()
        find_kueue()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)


class Tasgate:
    """``tasgate serve --kubeconfig`` with a policy file; its logs and metrics."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        policy = yaml.safe_load(Path("webhook/data/default-policy.yaml").read_text())
        policy["spec"]["partialStartAfter"] = f"{PARTIAL_AFTER:g}s"
        self.policy = workdir / "policy.yaml"
        self.policy.write_text(yaml.safe_dump(policy))
        self.port, self.metrics_port = free_ports(2)
        argv = serve_argv(cp.kubeconfig, self.port, self.metrics_port, workdir / "certs", "0")
        self.err = workdir / "tasgate.err"
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [*argv, "--policy", str(workdir / "policy.yaml")], stdout=subprocess.DEVNULL, stderr=err
            )

    def metrics(self) -> str:
        if self.proc.poll() is not None:
            raise AssertionError(f"tasgate exited {self.proc.returncode}:\n{self.err.read_text()[-3000:]}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def transitions(self, owner: str) -> list[str]:
        """The states the server logged for the Workload of Job ``owner``, in order."""
        found = []
        for line in self.err.read_text(errors="replace").splitlines():
            if f" gang {NS}/job-{owner}-" in line:
                found.append(line.split(" -> ", 1)[1].split(" ", 1)[0])
        return found

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class World:
    def __init__(self, cp: ControlPlane, cluster: Cluster, tasgate: Tasgate) -> None:
        self.cp, self.cluster, self.tasgate = cp, cluster, tasgate
        self.policy = tasgate.policy

    def create(self, *objects: dict[str, Any]) -> None:
        self.cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objects))

    def status(self) -> dict[str, dict[str, Any]]:
        """``tasgate status -o json`` against the cluster: gang name -> its item."""
        run = subprocess.run(
            [str(TASGATE), "status", "--kubeconfig", str(self.cp.kubeconfig), "-n", NS, "-o", "json",
             "--policy", str(self.policy)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        return {item["name"]: item for item in json.loads(run.stdout)["items"]}

    def wait_state(self, name: str, state: str, timeout: float = 60.0) -> dict[str, Any]:
        """Until the running server's metrics show ``name`` in ``state``; then tasgate status's item."""
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            self.cluster.check_alive()
            seen = "\n".join(
                line
                for line in self.tasgate.metrics().splitlines()
                if line.startswith("tasgate_gang_state_seconds{")
            )
            if f'name="{name}"' in seen and any(
                f'name="{name}"' in line and f'state="{state}"' in line for line in seen.splitlines()
            ):
                return self.status()[name]
            time.sleep(0.5)
        raise AssertionError(f"{name} not {state} after {timeout:g}s; tasgate says:\n{seen}\n{self.status()}")

    def events(self, name: str) -> list[dict[str, Any]]:
        items = self.cp.kubectl_json("get", "events.events.k8s.io", "-n", NS)["items"]
        return [
            e
            for e in items
            if e.get("reportingController") == "tasgate.io/lifecycle"
            and (e.get("regarding") or {}).get("name") == name
        ]


def _world_objects() -> list[dict[str, Any]]:
    cpu_flavor = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": CPU_FLAVOR},
        "spec": {"nodeLabels": {"pool": "cpu"}},
    }
    quota = [{"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "1Ti"}]
    cpu_cq = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": CPU_CQ},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": CPU_FLAVOR, "resources": quota}]}
            ],
        },
    }
    cpu_lq = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": CPU_QUEUE, "namespace": NS},
        "spec": {"clusterQueue": CPU_CQ},
    }
    return [*queue_objects(NS), cpu_flavor, cpu_cq, cpu_lq]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    _fail_if_missing()
    workdir = tmp_path_factory.mktemp("lifecycle")
    with ControlPlane() as cp, Cluster(cp) as cluster, Kueue(cp):
        for rack, names in RACKS.items():
            for name in names:
                cluster.add_node(name, GPU_NODE, {**NODE_POOL, BLOCK: "b0", RACK: rack})
        for name in CPU_NODES:
            cluster.add_node(name, CPU_NODE, {"pool": "cpu"})
        cluster.wait_nodes_ready([n for names in RACKS.values() for n in names] + list(CPU_NODES))
        cp.kubectl("create", "namespace", NS)
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(_world_objects()))
        tasgate = Tasgate(cp, workdir)
        try:
            _wait(lambda: "tasgate_gangs" in tasgate.metrics(), "tasgate's metrics", 60)
            yield World(cp, cluster, tasgate)
        finally:
            tasgate.stop()


def _wait(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.5)


def _gang_job(name: str, pods: int, *, queue: str = LOCAL_QUEUE, cpu: str | None = None) -> dict[str, Any]:
    """The scenario Job (rack-required, 8 GPUs per pod; ``cpu``: CPU-only pods), in PodGroup ``name``."""
    obj = job(name, NS, pods=pods)
    obj["metadata"]["labels"][QUEUE_LABEL] = queue
    template = obj["spec"]["template"]
    template.setdefault("metadata", {})["labels"] = {POD_GROUP_LABEL: name}
    if cpu is not None:
        template["metadata"].pop("annotations", None)
        template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return obj


def _metric(text: str, metric: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(metric + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_gang_assembles_and_runs_where_tasgate_predicted(world: World) -> None:
    world.create(pod_group("run", NS, 2), _gang_job("run", 2))
    item = world.wait_state("run", "running")
    assert (item["kind"], item["queue"], item["clusterQueue"]) == ("Job", LOCAL_QUEUE, "gpu-cq")
    assert item["pods"] == {"admitted": 2, "scheduled": 2, "running": 2, "pending": 0}, item
    assert item["podGroup"] == "run"
    metrics = world.tasgate.metrics()
    assert _metric(metrics, "tasgate_predictions_total", result="agree", reason="none") == 1.0, metrics
    assert _metric(metrics, "tasgate_gangs", state="running", cluster_queue="gpu-cq", namespace=NS) == 1.0
    assert world.events("run") == []  # nothing worth an operator's attention
    assert world.tasgate.transitions("run")[-2:] == ["assembling", "running"]


def test_a_partial_start_is_reported_once(world: World) -> None:
    world.create(pod_group("partial", NS, 2), _gang_job("partial", 4, queue=CPU_QUEUE, cpu="2"))
    item = world.wait_state("partial", "partial_start", timeout=90)
    assert item["reason"] == "PartialStart" and item["pods"]["running"] == 2, item
    assert item["pods"]["pending"] == 2 and "2 of 4 pods running" in item["message"], item
    time.sleep(3)  # several tracking rounds: still one Event for one state change
    events = world.events("partial")
    assert [(e["reason"], e["type"], e["regarding"]["kind"]) for e in events] == [
        ("PartialStart", "Warning", "Job")
    ]
    assert events[0]["related"]["kind"] == "Workload"


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

    _wait(blocker_runs, "the blocker pod to run", 30)
    world.create(pod_group("wide", NS, 4), _gang_job("wide", 4))
    item = world.wait_state("wide", "waiting_topology")
    assert item["reason"] == "WaitingForCapacity" and "has room for 3 of 4 pods now" in item["message"], item
    assert "Kueue: couldn't assign flavors" in item["message"], item  # Kueue's own numbers follow
    for name in RACKS["b0-r2"]:
        world.cp.kubectl("cordon", name)
    world.cp.kubectl("delete", "node", *RACKS["b0-r2"], "--wait=true")
    item = world.wait_state("wide", "never_fits")
    assert world.tasgate.transitions("wide")[-2:] == ["waiting_topology", "never_fits"]
    assert "no longer fits any rack" in item["message"], item
    _wait(lambda: len(world.events("wide")) == 1, "the capacity-loss Event on Job wide", 20)
    event = world.events("wide")[0]
    assert (event["reason"], event["regarding"]["kind"]) == ("CapacityLost", "Job"), event
    assert "capacity was lost" in event["note"] and "holds 2 such pods" in event["note"], event


def test_tasgate_status_lists_every_gang_with_its_state(world: World) -> None:
    states = {name: item["state"] for name, item in world.status().items()}
    assert states == {"run": "running", "partial": "partial_start", "wide": "never_fits"}
    table = subprocess.run(
        [str(TASGATE), "status", "--kubeconfig", str(world.cp.kubeconfig), "--policy", str(world.policy)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert table[0].split() == ["NAMESPACE", "NAME", "KIND", "QUEUE", "STATE", "REASON", "AGE"]
    rows = {line.split()[1]: line.split() for line in table[1:]}
    assert rows["run"][2:5] == ["Job", LOCAL_QUEUE, "running"]
    assert rows["partial"][3:6] == [CPU_QUEUE, "partial_start", "PartialStart"]
    assert rows["wide"][4] == "never_fits"
    metrics = world.tasgate.metrics()
    for name, state in states.items():
        uid = world.cp.kubectl_json("get", "job", name, "-n", NS)["metadata"]["uid"]
        assert _metric(metrics, "tasgate_gang_state_seconds", name=name, uid=uid, state=state) is not None
    if os.environ.get("TASGATE_CAPTURE_LIFECYCLE"):
        _capture(world)


def _capture(world: World) -> None:
    """The Workloads, Pods and PodGroups as the real components left them (normalised)."""
    CAPTURE.mkdir(parents=True, exist_ok=True)
    for kind, file in (("workloads.kueue.x-k8s.io", "workloads.yaml"), ("pods", "pods.yaml"),
                       ("podgroups.scheduling.x-k8s.io", "podgroups.yaml")):  # fmt: skip
        items = [_normalise(o) for o in world.cp.kubectl_json("get", kind, "-n", NS)["items"]]
        items = [o for o in items if o["metadata"]["name"] != "blocker"]
        header = (
            f"# {kind} of tests/e2e_cluster/test_lifecycle.py, as Kueue v0.19.2,\n"
            "# kube-controller-manager, kwok and the Coscheduling scheduler left them at the end of the\n"
            "# run. Normalised: managedFields dropped. Regenerate with\n"
            "# TASGATE_CAPTURE_LIFECYCLE=1 make e2e-cluster; do not edit by hand.\n"
        )
        (CAPTURE / file).write_text(header + yaml.safe_dump_all(items, sort_keys=True))


def _normalise(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].pop("managedFields", None)
    return obj


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
