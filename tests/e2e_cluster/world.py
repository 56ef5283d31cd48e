"""The world of tests/e2e_cluster/test_lifecycle.py: tasgate serving live, and how the tests look at it.

Kept apart from the tests so that module reads as the scenarios it runs. Everything here drives
or reads the real components (``kubectl``, ``tasgate status``, tasgate's ``/metrics`` and log).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster import POD_GROUP_LABEL, Cluster
from e2e.controlplane import ControlPlane, free_ports
from e2e.kueue import KUEUE_API_VERSION
from e2e.kueue_scenario import LOCAL_QUEUE, QUEUE_LABEL, job, queue_objects
from e2e.nodes import GPU
from e2e.processes import stop_process
from e2e.serving import TASGATE, serve_argv

NS = "gangs"
RACKS = {"b0-r0": ("n0", "n1"), "b0-r1": ("n2", "n3"), "b0-r2": ("n4", "n5", "n6", "n7")}
GPU_NODE = {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "8"}
CPU_NODES, CPU_NODE = ("c0", "c1"), {"cpu": "2", "memory": "8Gi", "pods": "110"}
CPU_FLAVOR, CPU_CQ, CPU_QUEUE = "cpu-flavor", "cpu-cq", "cpu-queue"
PARTIAL_AFTER = 5.0
CAPTURE = Path(__file__).resolve().parents[1] / "webhook" / "manifests" / "lifecycle"


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
        stop_process(self.proc, 20)


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

    def pod_group_status(self, name: str) -> dict[str, Any]:
        """PodGroup ``name``'s status, as the scheduler-plugins controller wrote it."""
        obj = self.cp.kubectl_json("get", "podgroups.scheduling.x-k8s.io", name, "-n", NS)
        return dict(obj.get("status") or {})

    def wait_pod_group(
        self, name: str, phase: str, running: int | None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Until the controller has written ``phase`` and ``running`` (it omits a 0 count; None:
        any count, for Pending after pods went, where it leaves the last count it made)."""
        seen: dict[str, Any] = {}

        def written() -> bool:
            nonlocal seen
            seen = self.pod_group_status(name)
            return seen.get("phase") == phase and running in (None, seen.get("running", 0))

        try:
            wait(written, f"PodGroup {name} phase {phase} with {running} running", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its status: {seen}") from None
        return seen

    def wait_message(self, name: str, text: str, timeout: float = 30.0) -> dict[str, Any]:
        """Until ``tasgate status`` has ``text`` in gang ``name``'s message; then its item."""
        item: dict[str, Any] = {}

        def shown() -> bool:
            nonlocal item
            item = self.status()[name]
            return text in str(item["message"])

        try:
            wait(shown, f"{text!r} in tasgate status' message for {name}", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its item: {item}") from None
        return item

    def events(self, name: str) -> list[dict[str, Any]]:
        items = self.cp.kubectl_json("get", "events.events.k8s.io", "-n", NS)["items"]
        return [
            e
            for e in items
            if e.get("reportingController") == "tasgate.io/lifecycle"
            and (e.get("regarding") or {}).get("name") == name
        ]


def world_objects() -> list[dict[str, Any]]:
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


def wait(check: Callable[[], bool], what: str, timeout: float) -> None:
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


def gang_job(name: str, pods: int, *, queue: str = LOCAL_QUEUE, cpu: str | None = None) -> dict[str, Any]:
    """The scenario Job (rack-required, 8 GPUs per pod; ``cpu``: CPU-only pods), in PodGroup ``name``."""
    obj = job(name, NS, pods=pods)
    obj["metadata"]["labels"][QUEUE_LABEL] = queue
    template = obj["spec"]["template"]
    template.setdefault("metadata", {})["labels"] = {POD_GROUP_LABEL: name}
    if cpu is not None:
        template["metadata"].pop("annotations", None)
        template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return obj


def metric(text: str, series: str, /, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(series + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


# Gangs captured into a file of their own (Workload, Pods and PodGroup together), so the unit tests
# of the first three gangs (tests/webhook/test_track.py, test_tracker.py) keep their world.
CAPTURED_APART = {"held": "assembling.yaml"}
CAPTURE_HEADER = (
    "# {what} of tests/e2e_cluster/test_lifecycle.py, as Kueue v0.19.2,\n"
    "# kube-controller-manager, kwok, the Coscheduling scheduler and the scheduler-plugins\n"
    "# controller (PodGroup status) left them at the end of the run. Normalised: managedFields\n"
    "# dropped. Regenerate with\n"
    "# TASGATE_CAPTURE_LIFECYCLE=1 make e2e-cluster; do not edit by hand.\n"
)


def capture(world: World) -> None:
    """The Workloads, Pods and PodGroups as the real components left them (normalised)."""
    CAPTURE.mkdir(parents=True, exist_ok=True)
    apart: dict[str, list[dict[str, Any]]] = {gang: [] for gang in CAPTURED_APART}
    for kind, file in (("workloads.kueue.x-k8s.io", "workloads.yaml"), ("pods", "pods.yaml"),
                       ("podgroups.scheduling.x-k8s.io", "podgroups.yaml")):  # fmt: skip
        items = [normalise(o) for o in world.cp.kubectl_json("get", kind, "-n", NS)["items"]]
        items = [o for o in items if o["metadata"]["name"] != "blocker"]
        for obj in items:
            apart.get(gang_of(obj), []).append(obj)
        items = [o for o in items if gang_of(o) not in apart]
        (CAPTURE / file).write_text(
            CAPTURE_HEADER.format(what=kind) + yaml.safe_dump_all(items, sort_keys=True)
        )
    for gang, file in CAPTURED_APART.items():
        what = f"Gang {gang}'s Workload, Pods and PodGroup"
        (CAPTURE / file).write_text(
            CAPTURE_HEADER.format(what=what) + yaml.safe_dump_all(apart[gang], sort_keys=True)
        )


def gang_of(obj: dict[str, Any]) -> str:
    """The gang (Job and PodGroup name) a captured Workload, Pod or PodGroup belongs to."""
    meta = obj["metadata"]
    if obj.get("kind") == "PodGroup":
        return str(meta["name"])
    if obj.get("kind") == "Pod":
        return str((meta.get("labels") or {}).get(POD_GROUP_LABEL, ""))
    owners = meta.get("ownerReferences") or [{}]
    return str(owners[0].get("name", ""))


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].pop("managedFields", None)
    return obj
