"""MultiKueue on the e2e stack: a manager and a worker control plane, each with the real Kueue v0.19.2.

Why two: a MultiKueue ClusterQueue's gang is placed by the worker's Kueue on the worker's nodes,
never by the manager (Kueue delays TAS there: ``HasMultiKueueAdmissionCheck`` in
``flavorassigner/tas_flavorassigner.go``), so only a real worker shows whether tasgate's judgement
on it (``check --worker``, ``serve --multikueue-workers``) is Kueue's. Both Kueues run the Job
integration only.

The worker: 8 GPU nodes ``b<i>-r<j>-h<k>`` (2 blocks x 2 racks x 2 hosts of 8 GPUs: a block holds
4 eight-GPU pods), the fidelity Topology, ``gpu-flavor``, ClusterQueue ``mk-cq`` and LocalQueue
``mk-queue`` in ``fidelity`` and ``tasgate-system`` (the manager's Kueue creates the remote Workload
and Job in the job's namespace and queue; it creates neither). The manager: **no GPU node** (one
CPU node, so a dump is a cluster), the same Topology, flavor, quota and queue names, the queue
behind AdmissionCheck ``mk-check`` (``kueue.x-k8s.io/multikueue``) -> MultiKueueConfig ``mk-config``
-> MultiKueueCluster ``worker1`` -> Secret ``worker1-kubeconfig`` (key ``kubeconfig``) in Kueue's
namespace: the worker's loopback URL, its CA and admin client certificate embedded as data (Kueue
refuses a CA *file*: ``validateKubeconfig``, reason ``InsecureKubeConfig``; tasgate could not read
the harness's files either).
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import fidelity_world as fw
from e2e.controlplane import Binaries, ControlPlane, free_ports
from e2e.fidelity import TasgateServer
from e2e.kueue import KUEUE_API_VERSION, KUEUE_NAMESPACE, Kueue
from e2e.kueue_admission import condition_true, owned_workloads, wait_for
from e2e.nodes import add_node
from e2e.serving import TASGATE, serve_argv

WORKER = "worker1"
MK_CHECK, MK_CONFIG, MK_CQ, MK_QUEUE = "mk-check", "mk-config", "mk-cq", "mk-queue"
MK_CONTROLLER = "kueue.x-k8s.io/multikueue"
SECRET = f"{WORKER}-kubeconfig"
WORKER_NODES = tuple(f"b{b}-r{r}-h{h}" for b in range(2) for r in range(2) for h in range(2))
MANAGER_NODE = "manager-cpu-0"
DUMP_KINDS = (  # the documented dump (README "tasgate check in CI"), Kueue's Workloads included
    "nodes,pods,namespaces,priorityclasses,limitranges,runtimeclasses",
    "topologies,resourceflavors,clusterqueues,localqueues,cohorts,admissionchecks,"
    f"provisioningrequestconfigs,{fw.WORKLOADS},workloadpriorityclasses",
)
MK_KINDS = "multikueueconfigs.kueue.x-k8s.io,multikueueclusters.kueue.x-k8s.io"
MANAGER_ACTIVE = (("multikueueclusters", WORKER), ("admissionchecks", MK_CHECK), ("clusterqueues", MK_CQ))


def _kueue(kind: str, name: str, spec: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": KUEUE_API_VERSION, "kind": kind, "metadata": meta, "spec": dict(spec)}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def queue_objects(checks: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Topology, ``gpu-flavor``, ``mk-cq`` (behind ``checks``) and ``mk-queue`` in both namespaces."""
    cq = fw.cluster_queue(MK_CQ, [(fw.GPU_FLAVOR, fw.quota("10000", "100Ti", "10000"))])
    if checks:
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return [
        _kueue("Topology", fw.TOPOLOGY, {"levels": [{"nodeLabel": label} for label in fw.LEVELS]}),
        _kueue("ResourceFlavor", fw.GPU_FLAVOR, {"nodeLabels": {"pool": "gpu"}, "topologyName": fw.TOPOLOGY}),
        cq,
        *(_kueue("LocalQueue", MK_QUEUE, {"clusterQueue": MK_CQ}, ns) for ns in (fw.NS, fw.BYPASS_NS)),
    ]


def worker_kubeconfig(worker: ControlPlane) -> str:
    """A kubeconfig for ``worker``'s loopback URL, its CA and admin client certificate as data."""
    cert, key = (_b64(path.read_bytes()) for path in worker.admin_cert)
    cluster = {"server": worker.server, "certificate-authority-data": _b64(worker.ca_path.read_bytes())}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": WORKER, "cluster": cluster}],
        "users": [{"name": WORKER, "user": {"client-certificate-data": cert, "client-key-data": key}}],
        "contexts": [{"name": WORKER, "context": {"cluster": WORKER, "user": WORKER}}],
        "current-context": WORKER,
    }
    return yaml.safe_dump(config, sort_keys=False)


def manager_objects(kubeconfig: str) -> list[dict[str, Any]]:
    """The Secret, MultiKueueCluster, MultiKueueConfig, AdmissionCheck, and the queues behind it."""
    meta = {"name": SECRET, "namespace": KUEUE_NAMESPACE}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "data": {"kubeconfig": _b64(kubeconfig.encode())},
    }
    source = {"kubeConfig": {"locationType": "Secret", "location": SECRET}}
    parameters = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MK_CONFIG}
    return [
        secret,
        _kueue("MultiKueueCluster", WORKER, {"clusterSource": source}),
        _kueue("MultiKueueConfig", MK_CONFIG, {"clusters": [WORKER]}),
        _kueue("AdmissionCheck", MK_CHECK, {"controllerName": MK_CONTROLLER, "parameters": parameters}),
        *queue_objects([MK_CHECK]),
    ]


def active(cp: ControlPlane, resource: str, name: str) -> bool:
    items = cp.kubectl_json("get", f"{resource}.kueue.x-k8s.io")["items"]
    return any(i["metadata"]["name"] == name and condition_true(i, "Active") for i in items)


def apply(cp: ControlPlane, objects: Sequence[Mapping[str, Any]]) -> None:
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(list(objects)))


def dump(cp: ControlPlane, directory: Path, *, multikueue: bool = False) -> Path:
    """The documented dump of ``cp``; the manager's (``multikueue``) also with its MultiKueue objects."""
    directory.mkdir(parents=True)
    for index, kinds in enumerate((*DUMP_KINDS, MK_KINDS) if multikueue else DUMP_KINDS):
        (directory / f"{index}.yaml").write_text(cp.kubectl("get", kinds, "-A", "-o", "yaml").stdout)
    return directory


def _conditions(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((obj or {}).get("status") or {}).get("conditions") or ())


@dataclass(frozen=True)
class Dispatch:
    """A job's Workload on the manager, its remote Workload on the worker and its Job there (None: absent)."""

    local: dict[str, Any] | None
    remote: dict[str, Any] | None
    job: dict[str, Any] | None

    @property
    def check_state(self) -> Mapping[str, Any]:
        """The MultiKueue check's state on the manager's Workload (``{}`` before Kueue lists it)."""
        states = ((self.local or {}).get("status") or {}).get("admissionChecks") or ()
        return next((s for s in states if s.get("name") == MK_CHECK), {})

    @property
    def check(self) -> str:
        return str(self.check_state.get("state", ""))

    @property
    def worker_admitted(self) -> bool:
        return self.remote is not None and condition_true(self.remote, "Admitted")

    @property
    def worker_message(self) -> str:
        """The remote Workload's QuotaReserved message while it is False (Kueue's reason it waits)."""
        reserved = next((c for c in _conditions(self.remote) if c.get("type") == "QuotaReserved"), {})
        return "" if reserved.get("status") != "False" else str(reserved.get("message", ""))

    @property
    def dispatched(self) -> bool:
        """Admitted on the worker, the manager's check Ready and its Workload Admitted there, Job created."""
        local = self.local or {}
        on_worker = (local.get("status") or {}).get("clusterName") == WORKER
        admitted = bool(local) and condition_true(local, "Admitted") and self.check == "Ready"
        return self.worker_admitted and admitted and on_worker and self.job is not None

    def describe(self) -> str:
        def said(obj: Mapping[str, Any] | None) -> str:
            found = [f"{c.get('type')}={c.get('status')} ({c.get('message', '')})" for c in _conditions(obj)]
            return str(found) if obj else "absent"

        return (
            f"manager Workload {said(self.local)}, check {self.check or 'unset'} "
            f"({self.check_state.get('message', '')}); worker Workload {said(self.remote)}; "
            f"worker Job {'present' if self.job else 'absent'}"
        )


@dataclass
class MultiKueueWorld:
    """Manager and worker, each a control plane with its Kueue; the tools the MultiKueue test uses."""

    manager: ControlPlane
    manager_kueue: Kueue
    worker: ControlPlane
    worker_kueue: Kueue
    workdir: Path
    _dumps: int = 0

    def build(self, timeout: float = 90.0) -> None:
        """Namespaces, nodes and queues on both; wait until the manager's check can dispatch."""
        for cp in (self.manager, self.worker):
            for namespace in (fw.NS, fw.BYPASS_NS):
                cp.kubectl("create", "namespace", namespace)
        for name in WORKER_NODES:
            add_node(self.worker, name, fw.gpu_node_labels(name), fw.GPU_ALLOCATABLE)
        add_node(self.manager, MANAGER_NODE, {"pool": "cpu"}, fw.CPU_ALLOCATABLE)
        if fw.PODGROUP_CRD.is_file():  # the default policy's Coscheduling PodGroups (live test)
            self.manager.kubectl("apply", "--server-side", "-f", str(fw.PODGROUP_CRD))
        apply(self.worker, queue_objects())
        apply(self.manager, manager_objects(worker_kubeconfig(self.worker)))
        try:
            wait_for("the check, its cluster and the queues Active", self.active, timeout, every=0.3)
        except AssertionError as exc:
            cluster = self.manager.kubectl_json("get", "multikueueclusters.kueue.x-k8s.io", WORKER)
            raise AssertionError(f"{exc}; MultiKueueCluster {WORKER}: {_conditions(cluster)}") from None

    def active(self) -> bool:
        """The worker's queue; the manager's MultiKueueCluster (connected), check and queue."""
        found = active(self.worker, "clusterqueues", MK_CQ)
        return found and all(active(self.manager, resource, name) for resource, name in MANAGER_ACTIVE)

    def check(self, obj: Mapping[str, Any], *, workers: bool = True) -> dict[str, Any]:
        """``tasgate check -o json --cluster <manager dump> [--worker worker1=<worker dump>] -f <obj>``."""
        self._dumps += 1
        base = self.workdir / f"dump-{self._dumps:03d}"
        manager = dump(self.manager, base / "manager", multikueue=True)
        worker = dump(self.worker, base / WORKER)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=base, delete=False) as manifest:
            yaml.safe_dump(dict(obj), manifest)
        argv = [str(TASGATE), "check", "-o", "json", "--cluster", str(manager), "-f", manifest.name]
        argv += ["--worker", f"{WORKER}={worker}"] if workers else []
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode not in (0, 1):
            raise AssertionError(f"tasgate check exited {result.returncode}: {result.stderr}{result.stdout}")
        (verdict,) = json.loads(result.stdout)["results"]
        return dict(verdict)

    def apply(self, obj: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
        """``kubectl apply`` on the manager (kubectl prints webhook warnings on stderr)."""
        return self.manager.kubectl("apply", "-f", "-", input=json.dumps(obj), check=False)

    def manager_workload(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = obj["metadata"]
        found = owned_workloads(self.manager, meta["namespace"], obj["kind"], meta["name"])
        return found[0] if found else None

    def on_worker(self, resource: str, name: str, namespace: str) -> dict[str, Any] | None:
        got = self.worker.kubectl("get", resource, name, "-n", namespace, "-o", "json", check=False)
        return json.loads(got.stdout) if got.returncode == 0 else None

    def state(self, obj: Mapping[str, Any]) -> Dispatch:
        """Where ``obj`` is on both clusters: the remote Workload has the manager Workload's name."""
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        local = self.manager_workload(obj)
        remote = self.on_worker(fw.WORKLOADS, local["metadata"]["name"], namespace) if local else None
        return Dispatch(local, remote, self.on_worker("job", name, namespace))

    def wait(self, obj: Mapping[str, Any], what: str, done: Callable[[Dispatch], bool]) -> Dispatch:
        """Poll ``state(obj)`` until ``done``; on timeout, say where it got to on both clusters."""
        seen = [Dispatch(None, None, None)]

        def check() -> bool:
            seen[0] = self.state(obj)
            return done(seen[0])

        try:
            wait_for(f"{obj['metadata']['name']}: {what}", check, 60.0, every=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {seen[0].describe()}") from None
        return seen[0]

    def wait_dispatched(self, obj: Mapping[str, Any]) -> Dispatch:
        return self.wait(obj, f"dispatched to and admitted on {WORKER}", lambda now: now.dispatched)

    def stays_pending(self, obj: Mapping[str, Any], message: str, seconds: float = 5.0) -> Dispatch:
        """Until the worker's Kueue tried the remote Workload and left it without quota with ``message``;
        then, for ``seconds``, nothing admits it on either cluster."""
        tried = self.wait(obj, f"left pending by {WORKER}'s Kueue", lambda now: message in now.worker_message)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # a bounded watch of "never", not a wait for a result
            now = self.state(obj)
            if now.worker_admitted or now.check == "Ready" or now.job is not None:
                raise AssertionError(f"{obj['metadata']['name']} was admitted after all: {now.describe()}")
            time.sleep(0.5)
        return tried


class WorkerAwareTasgate(TasgateServer):
    """``tasgate serve --kubeconfig <manager> --multikueue-workers``: TasgateServer's start plus the
    opt-in flag that makes it read the MultiKueueClusters and their Secrets and watch each worker."""

    def __init__(self, cp: ControlPlane, workdir: Path, stale_after: float = 0) -> None:
        self.cp, self.workdir = cp, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.metrics_port = free_ports(2)
        self.certs = workdir / "tasgate-certs"
        self.stdout_path, self.stderr_path = workdir / "tasgate.out", workdir / "tasgate.err"
        self._stdout, self._stderr = self.stdout_path.open("wb"), self.stderr_path.open("wb")
        argv = serve_argv(cp.kubeconfig, self.port, self.metrics_port, self.certs, f"{stale_after:g}")
        argv += ["--multikueue-workers", "--kueue-namespace", KUEUE_NAMESPACE]
        self.proc = subprocess.Popen(argv, stdout=self._stdout, stderr=self._stderr)


@contextlib.contextmanager
def multikueue_world(workdir: Path, binaries: Binaries, kueue_binary: Path) -> Iterator[MultiKueueWorld]:
    """The worker (control plane + Kueue) first, then the manager pointed at it; built, stopped on exit."""
    with (
        ControlPlane(binaries=binaries) as worker,
        Kueue(worker, binary=kueue_binary, frameworks=("batch/job",)) as worker_kueue,
        ControlPlane(binaries=binaries) as manager,
        Kueue(manager, binary=kueue_binary, frameworks=("batch/job",)) as manager_kueue,
    ):
        world = MultiKueueWorld(manager, manager_kueue, worker, worker_kueue, workdir)
        world.build()
        yield world
