"""tasgate's verdict against a running Kueue: the world and the tools of tests/e2e/test_kueue_fidelity.py.

One control plane, the real Kueue manager (e2e/kueue.py, with its webhooks) and ``tasgate serve
--kubeconfig`` registered with **both** of its production webhook configurations
(manifests/webhooks/webhooks.yaml, only ``clientConfig`` rewired to a loopback URL + caBundle). The
configurations keep their production name ``tasgate``, which sorts after
``kueue-mutating-webhook-configuration``: the API server calls Kueue's mutating webhook first, then
tasgate's, then every validating webhook on the final object.

The cluster:

- 32 GPU nodes ``b<i>-r<j>-h<k>`` (2 blocks x 4 racks x 4 hosts, 8 GPUs, 64 CPUs, ``pool: gpu``)
  in a Topology block / rack / hostname, and 2 CPU nodes ``cpu-0``, ``cpu-1`` (128 CPUs, no GPU,
  ``pool: cpu``, in no topology);
- the TAS ResourceFlavor ``gpu-flavor`` and the plain ``cpu-flavor``;
- ClusterQueues ``tas-cq`` (TAS only, ample quota), ``mixed-cq`` (``gpu-flavor`` then
  ``cpu-flavor``) and ``quota-cq`` (``gpu-flavor`` with 16 GPUs of nominal quota), with a LocalQueue
  each (``tas-queue``, ``mixed-queue``, ``quota-queue``) in the workload namespace ``fidelity`` and in
  ``tasgate-system``.

``tasgate-system`` is excluded from both of tasgate's webhooks by their production
namespaceSelector, not from Kueue's: a workload tasgate refuses is created there to show what Kueue
alone does with it.

Usage pods are bound Pods (``spec.nodeName``), which both tasgate and Kueue's non-TAS usage cache
count. There is no kube-controller-manager: an admitted Job makes no pods, and what an admitted
Workload holds is its TopologyAssignment alone, which Kueue counts at once (and so must tasgate:
dumps include the Workloads). Kueue's cache is filled by a reconciler of its own, so
``Fidelity.sync_kueue_pods`` waits for its log line (Kueue runs at ``--zap-log-level=3``) rather
than sleeping.
"""

from __future__ import annotations

import contextlib
import json
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from e2e.controlplane import ControlPlane, free_ports
from e2e.kueue import KUEUE_API_VERSION, Kueue
from e2e.kueue_admission import condition_true, owned_workloads, wait_for, workload_admission
from e2e.nodes import GPU, HOSTNAME_LABEL, NOT_READY_TAINT, node_manifest, ready_status
from e2e.serving import TASGATE, serve_argv
from webhook.serve import certs

REPO_ROOT = Path(__file__).resolve().parents[1]
WEBHOOKS_MANIFEST = REPO_ROOT / "manifests" / "webhooks" / "webhooks.yaml"
SHARED_CRDS = REPO_ROOT.parent / "shared" / "crds"
PODGROUP_CRD = SHARED_CRDS / "scheduling.x-k8s.io_podgroups.yaml"

NS = "fidelity"
BYPASS_NS = "tasgate-system"  # excluded from tasgate's webhooks by their production namespaceSelector
MUTATE, VALIDATE = "mutate.tasgate.io", "validate.tasgate.io"

BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
HOST = HOSTNAME_LABEL
LEVELS = (BLOCK, RACK, HOST)
TOPOLOGY = "fidelity-topology"
GPU_FLAVOR, CPU_FLAVOR = "gpu-flavor", "cpu-flavor"
TAS_CQ, MIXED_CQ, QUOTA_CQ = "tas-cq", "mixed-cq", "quota-cq"
TAS_QUEUE, MIXED_QUEUE, QUOTA_QUEUE = "tas-queue", "mixed-queue", "quota-queue"
QUOTA_GPUS = 16
BLOCKS, RACKS_PER_BLOCK, HOSTS_PER_RACK = 2, 4, 4
GPU_ALLOCATABLE: Mapping[str, str] = {
    "cpu": "64",
    "memory": "512Gi",
    GPU: "8",
    "pods": "110",
    "ephemeral-storage": "1Ti",
}
CPU_ALLOCATABLE: Mapping[str, str] = {
    "cpu": "128",
    "memory": "1Ti",
    "pods": "110",
    "ephemeral-storage": "1Ti",
}
CPU_NODES = ("cpu-0", "cpu-1")

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"

KUEUE_POD_RECONCILE = "Non-TAS usage cache reconciling"
WORKLOADS = "workloads.kueue.x-k8s.io"


# --- the world -------------------------------------------------------------------------------------


def gpu_node_names() -> list[str]:
    return [
        f"b{b}-r{r}-h{h}"
        for b in range(BLOCKS)
        for r in range(RACKS_PER_BLOCK)
        for h in range(HOSTS_PER_RACK)
    ]


def gpu_node_labels(name: str) -> dict[str, str]:
    block, rack, _ = name.split("-")
    return {"pool": "gpu", BLOCK: block, RACK: f"{block}-{rack}"}


def add_nodes(cp: ControlPlane) -> None:
    """Every node in one apply, each status in one patch, the not-ready taint lifted from all at once."""
    nodes = [(name, gpu_node_labels(name), GPU_ALLOCATABLE) for name in gpu_node_names()]
    nodes += [(name, {"pool": "cpu"}, CPU_ALLOCATABLE) for name in CPU_NODES]
    items = [node_manifest(name, labels) for name, labels, _ in nodes]
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    for name, _, allocatable in nodes:
        status = json.dumps(ready_status(allocatable))
        cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", status)
    cp.kubectl("taint", "nodes", "--all", f"{NOT_READY_TAINT}:NoSchedule-", check=False)


def _quota(cpu: str, memory: str, gpus: str) -> list[dict[str, str]]:
    return [
        {"name": "cpu", "nominalQuota": cpu},
        {"name": "memory", "nominalQuota": memory},
        {"name": GPU, "nominalQuota": gpus},
    ]


def _cluster_queue(name: str, flavors: Sequence[tuple[str, list[dict[str, str]]]]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [{"name": flavor, "resources": quota} for flavor, quota in flavors],
                }
            ],
        },
    }


def kueue_objects() -> list[dict[str, Any]]:
    """Topology, both ResourceFlavors, the three ClusterQueues and their LocalQueues in both namespaces."""
    ample = _quota("10000", "100Ti", "10000")
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "Topology",
            "metadata": {"name": TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in LEVELS]},
        },
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": GPU_FLAVOR},
            "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": TOPOLOGY},
        },
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": CPU_FLAVOR},
            "spec": {"nodeLabels": {"pool": "cpu"}},
        },
        _cluster_queue(TAS_CQ, [(GPU_FLAVOR, ample)]),
        _cluster_queue(MIXED_CQ, [(GPU_FLAVOR, ample), (CPU_FLAVOR, _quota("1000", "10Ti", "0"))]),
        _cluster_queue(QUOTA_CQ, [(GPU_FLAVOR, _quota("1000", "10Ti", str(QUOTA_GPUS)))]),
    ]
    for namespace in (NS, BYPASS_NS):
        for queue, cq in ((TAS_QUEUE, TAS_CQ), (MIXED_QUEUE, MIXED_CQ), (QUOTA_QUEUE, QUOTA_CQ)):
            objects.append(
                {
                    "apiVersion": KUEUE_API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": queue, "namespace": namespace},
                    "spec": {"clusterQueue": cq},
                }
            )
    return objects


def cluster_queues_active(cp: ControlPlane) -> bool:
    items = cp.kubectl_json("get", "clusterqueues.kueue.x-k8s.io")["items"]
    names = {item["metadata"]["name"] for item in items if condition_true(item, "Active")}
    return names >= {TAS_CQ, MIXED_CQ, QUOTA_CQ}


# --- workloads -------------------------------------------------------------------------------------


def pod_template(
    annotations: Mapping[str, str] | None = None,
    *,
    gpus: int = 8,
    cpu: str = "1",
    container: str = "train",
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod template of one container requesting ``cpu`` and ``gpus`` (plus ``extra`` requests)."""
    requests: dict[str, str] = {"cpu": cpu, **(extra or {})}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": container, "image": "trainer:latest", "resources": resources}],
        }
    }
    if annotations:
        template["metadata"] = {"annotations": dict(annotations)}
    return template


def _metadata(name: str, queue: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def job(
    name: str,
    pods: int,
    annotations: Mapping[str, str] | None = None,
    *,
    queue: str = TAS_QUEUE,
    job_annotations: Mapping[str, str] | None = None,
    **template: Any,
) -> dict[str, Any]:
    """An Indexed batch/v1 Job of ``pods`` pods (``pod_template`` keywords pass through)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(name, queue, job_annotations),
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "suspend": True,
            "template": pod_template(annotations, **template),
        },
    }


def replicated_job(name: str, replicas: int, pods: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "completionMode": "Indexed",
                "template": template,
            }
        },
    }


def jobset(name: str, replicated: Sequence[dict[str, Any]], *, queue: str = TAS_QUEUE) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _metadata(name, queue),
        "spec": {"suspend": True, "replicatedJobs": list(replicated)},
    }


def pytorch_job(
    name: str, workers: int, annotations: Mapping[str, str], *, queue: str = TAS_QUEUE
) -> dict[str, Any]:
    def spec(replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": pod_template(annotations, container="pytorch"),
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": _metadata(name, queue),
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(workers)},
        },
    }


def mpi_job(
    name: str, workers: int, annotations: Mapping[str, str], *, queue: str = TAS_QUEUE
) -> dict[str, Any]:
    """An MPIJob whose launcher works too (``runLauncherAsWorker``): Kueue writes the pod index offset."""
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": _metadata(name, queue),
        "spec": {
            "slotsPerWorker": 1,
            "runLauncherAsWorker": True,
            "runPolicy": {"suspend": True},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod_template(annotations, container="launcher")},
                "Worker": {"replicas": workers, "template": pod_template(annotations, container="worker")},
            },
        },
    }


def leader_worker_set(
    name: str, size: int, annotations: Mapping[str, str], *, queue: str = TAS_QUEUE
) -> dict[str, Any]:
    """One LWS group: a leader and ``size - 1`` workers. ``rolloutStrategy.type`` is set by hand
    (the LWS controller's defaulting webhook is absent, and Kueue rejects an empty type)."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(name, queue),
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate"},
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod_template(annotations),
                "workerTemplate": pod_template(annotations),
            },
        },
    }


RESOURCES: Mapping[str, str] = {
    "Job": "jobs.batch",
    "JobSet": "jobsets.jobset.x-k8s.io",
    "PyTorchJob": "pytorchjobs.kubeflow.org",
    "MPIJob": "mpijobs.kubeflow.org",
    "LeaderWorkerSet": "leaderworkersets.leaderworkerset.x-k8s.io",
}


def same_object(event: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether an audit event's objectRef is ``obj`` (resource, group, namespace and name)."""
    ref = event.get("objectRef") or {}
    resource, _, group = RESOURCES[obj["kind"]].partition(".")
    return (
        ref.get("resource") == resource
        and (ref.get("apiGroup") or "") == group
        and ref.get("namespace") == obj["metadata"]["namespace"]
        and ref.get("name") == obj["metadata"]["name"]
    )


# Where each kind keeps its suspend flag (LeaderWorkerSet has none: Kueue gates its pods instead).
SUSPEND_PATHS: Mapping[str, tuple[str, ...]] = {
    "Job": ("spec", "suspend"),
    "JobSet": ("spec", "suspend"),
    "PyTorchJob": ("spec", "runPolicy", "suspend"),
    "MPIJob": ("spec", "runPolicy", "suspend"),
}


def in_namespace(obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    copy["metadata"]["namespace"] = namespace
    return copy


def usage_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A bound Pod (no scheduler here) using ``gpus`` GPUs of ``node``; not Kueue's, not queued."""
    resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"fidelity.tasgate.io/usage": "true"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busy", "resources": resources}]},
    }


# --- reading what Kueue decided --------------------------------------------------------------------


@dataclass(frozen=True)
class KueueOutcome:
    """One Workload: admitted or not, PodSet name -> (flavor, count, pods per host), and its message."""

    name: str
    admitted: bool
    reserved: bool
    message: str
    podsets: Mapping[str, tuple[str | None, int, Mapping[str, int]]]


def kueue_outcome(workload: Mapping[str, Any]) -> KueueOutcome:
    conditions = (workload.get("status") or {}).get("conditions") or ()
    reserved: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "QuotaReserved"), {})
    podsets: dict[str, tuple[str | None, int, Mapping[str, int]]] = {}
    for name, admission in (workload_admission(workload) or {}).items():
        flavors = set(admission.flavors.values())
        flavor = flavors.pop() if len(flavors) == 1 else None
        hosts = admission.pods_at(HOST) if admission.domains else {}
        podsets[name] = (flavor, admission.count, hosts)
    return KueueOutcome(
        name=str(workload["metadata"]["name"]),
        admitted=condition_true(workload, "Admitted"),
        reserved=reserved.get("status") == "True",
        message=str(reserved.get("message", "")),
        podsets=podsets,
    )


# --- tasgate ---------------------------------------------------------------------------------------


class TasgateServer:
    """``tasgate serve --kubeconfig`` (default policy), its own audit lines on stdout.

    ``stale_after`` is passed as ``--stale-after`` (0: never stale). The fidelity world uses 0: its
    subject is the verdict, and tasgate's staleness is tested on its own
    (test_live_state_stays_fresh_while_its_watches_are_healthy).
    """

    def __init__(self, cp: ControlPlane, workdir: Path, stale_after: float = 0) -> None:
        self.cp = cp
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.metrics_port = free_ports(2)
        self.certs = workdir / "tasgate-certs"
        self.stdout_path = workdir / "tasgate.out"
        self.stderr_path = workdir / "tasgate.err"
        self._stdout: IO[bytes] = self.stdout_path.open("wb")
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            serve_argv(cp.kubeconfig, self.port, self.metrics_port, self.certs, f"{stale_after:g}"),
            stdout=self._stdout,
            stderr=self._stderr,
        )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"tasgate serve exited {self.proc.returncode}:\n{self.log()[-3000:]}")
        if not (self.certs / "ca.crt").is_file():
            return False  # not written yet
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        try:
            with urllib.request.urlopen(
                f"https://localhost:{self.port}/readyz", context=context, timeout=5
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def ca_bundle(self) -> str:
        return certs.ca_bundle(self.certs / "ca.crt")

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def audit(self) -> list[dict[str, Any]]:
        lines = self.stdout_path.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stdout.close()
        self._stderr.close()


def tasgate_webhook_configurations(port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """manifests/webhooks/webhooks.yaml as shipped, each ``clientConfig`` a loopback URL + caBundle."""
    documents = [doc for doc in yaml.safe_load_all(WEBHOOKS_MANIFEST.read_text()) if doc]
    for doc in documents:
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://localhost:{port}{path}", "caBundle": ca_bundle}
    return documents


# --- the API server's audit log --------------------------------------------------------------------


class AuditTail:
    """Reads cp.audit_log incrementally; keeps every event seen (the log only grows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.events: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        """Events appended since the last call (they are also added to ``events``)."""
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                chunk = log.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        fresh = [json.loads(line) for line in lines if line.strip()]
        self.events.extend(fresh)
        return fresh

    def all(self) -> list[dict[str, Any]]:
        self.read()
        return self.events


def tasgate_annotations(event: Mapping[str, Any], webhook: str = MUTATE) -> dict[str, str]:
    """The audit annotations tasgate's ``webhook`` returned for this request (prefix stripped)."""
    prefix = f"{webhook}/"
    notes = event.get("annotations") or {}
    return {key[len(prefix) :]: str(value) for key, value in notes.items() if key.startswith(prefix)}


def mutating_webhooks_called(event: Mapping[str, Any]) -> list[str]:
    """The mutating webhooks the API server called for this request, in call order (round, index).

    From its own ``mutation.webhook.admission.k8s.io/round_<r>_index_<i>`` audit annotations.
    """
    calls: list[tuple[int, int, str]] = []
    for key, value in (event.get("annotations") or {}).items():
        prefix, _, position = key.partition("/")
        if prefix != "mutation.webhook.admission.k8s.io" or not position.startswith("round_"):
            continue
        _, round_number, _, index = position.split("_")
        with contextlib.suppress(ValueError, AttributeError):
            calls.append((int(round_number), int(index), str(json.loads(value).get("webhook"))))
    return [name for _, _, name in sorted(calls)]


def tasgate_called(event: Mapping[str, Any]) -> bool:
    """Whether the API server called tasgate's mutating webhook for this request."""
    return MUTATE in mutating_webhooks_called(event)


def live_summary(notes: Mapping[str, str]) -> str:
    """``allow/fits``: tasgate's decision and reason code from its audit annotations."""
    return f"{notes.get('decision')}/{notes.get('reason')}"


def tasgate_denial(event: Mapping[str, Any]) -> str | None:
    """The message when one of tasgate's webhooks denied this request, else None."""
    status = event.get("responseStatus") or {}
    message = str(status.get("message") or "")
    for webhook in (MUTATE, VALIDATE):
        if f'admission webhook "{webhook}" denied' in message:
            return message
    return None


# --- the whole world -------------------------------------------------------------------------------


@dataclass
class Fidelity:
    """The control plane, Kueue and tasgate, plus the per-case tools the fidelity test uses."""

    cp: ControlPlane
    kueue: Kueue
    tasgate: TasgateServer
    workdir: Path
    audit: AuditTail = field(init=False)
    _dumps: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.audit = AuditTail(self.cp.audit_log)

    # -- set-up --

    def build(self, timeout: float = 60.0) -> None:
        """Nodes, Kueue objects, tasgate synced and both of its webhooks answering."""
        cp = self.cp
        for namespace in (NS, BYPASS_NS):
            cp.kubectl("create", "namespace", namespace)
        if PODGROUP_CRD.is_file():  # the default policy's Coscheduling PodGroups
            cp.kubectl("apply", "--server-side", "-f", str(PODGROUP_CRD))
        add_nodes(cp)
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(kueue_objects()))
        wait_for("Kueue to activate the ClusterQueues", lambda: cluster_queues_active(cp), timeout, every=0.3)
        wait_for("tasgate to sync and report ready", self.tasgate.ready, timeout, every=0.3)
        configurations = tasgate_webhook_configurations(self.tasgate.port, self.tasgate.ca_bundle())
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(configurations))
        wait_for(
            "the API server to call both of tasgate's webhooks", self._webhooks_answer, timeout, every=0.3
        )

    def _webhooks_answer(self) -> bool:
        probe = job("tasgate-webhook-probe", 1, gpus=1)
        result = self.cp.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
        )
        if result.returncode != 0:
            return False
        endpoints = {
            line.get("endpoint")
            for line in self.tasgate.audit()
            if line.get("name") == "tasgate-webhook-probe"
        }
        return endpoints >= {"mutate", "validate"}

    # -- tasgate's prediction --

    def dump(self, *, workloads: bool = True) -> Path:
        """``kubectl get`` of nodes, pods, namespaces and Kueue's objects now: the documented dump,
        with Kueue's Workloads (whose admitted assignments are usage) unless ``workloads=False``."""
        self._dumps += 1
        directory = self.workdir / f"dump-{self._dumps:03d}"
        directory.mkdir()
        core = self.cp.kubectl("get", "nodes,pods,namespaces", "-A", "-o", "yaml").stdout
        kinds = "topologies,resourceflavors,clusterqueues,localqueues" + (
            f",{WORKLOADS}" if workloads else ""
        )
        kueue = self.cp.kubectl("get", kinds, "-A", "-o", "yaml").stdout
        (directory / "core.yaml").write_text(core)
        (directory / "kueue.yaml").write_text(kueue)
        return directory

    def check(self, obj: Mapping[str, Any], dump: Path | None = None) -> dict[str, Any]:
        """``tasgate check -o json --cluster <dump> -f <manifest>`` of ``obj``: its one verdict."""
        directory = dump or self.dump()
        with tempfile.NamedTemporaryFile(
            "w", suffix=".yaml", dir=self.workdir, prefix="manifest-", delete=False
        ) as manifest:
            yaml.safe_dump(dict(obj), manifest)
        result = subprocess.run(
            [str(TASGATE), "check", "-o", "json", "--cluster", str(directory), "-f", manifest.name],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode not in (0, 1):
            raise AssertionError(f"tasgate check exited {result.returncode}: {result.stderr}{result.stdout}")
        verdicts = json.loads(result.stdout)["results"]  # the versioned CheckReport's results
        if len(verdicts) != 1:
            raise AssertionError(f"tasgate check gave {len(verdicts)} verdicts for one object: {verdicts}")
        verdict: dict[str, Any] = verdicts[0]
        return verdict

    # -- the live webhook --

    def live_verdict(self, obj: Mapping[str, Any]) -> tuple[dict[str, str], subprocess.CompletedProcess[str]]:
        """A server-side dry-run create of ``obj``: the audit annotations of tasgate's mutating
        webhook (``decision`` allow/deny, ``reason`` the code, ...) and kubectl's result."""
        self.audit.read()
        result = self.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)
        for event in reversed(self.audit.read()):
            if same_object(event, obj) and event.get("verb") == "create":
                notes = tasgate_annotations(event)
                if notes:
                    return notes, result
        return {}, result

    def sync_live(self, obj: Mapping[str, Any], verdict: Mapping[str, Any], timeout: float = 15.0) -> None:
        """Wait until live tasgate decides ``obj`` as the offline check did (its mirror lags the API)."""
        want = live_summary(
            {"decision": "allow" if verdict["allowed"] else "deny", "reason": verdict["reason"]}
        )
        seen: list[str] = []

        def same() -> bool:
            notes, _ = self.live_verdict(obj)
            seen.append(live_summary(notes))
            return seen[-1] == want

        try:
            wait_for(f"live tasgate to decide {want}", same, timeout, every=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; it decided {seen[-5:]} (offline check: {want})") from None

    def create_event(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The audit event of the last real (not dry-run) create of ``obj``."""
        for event in reversed(self.audit.all()):
            if (
                event.get("verb") == "create"
                and same_object(event, obj)
                and event.get("stage") == "ResponseComplete"
                and "dryRun" not in str(event.get("requestURI", ""))
            ):
                found: dict[str, Any] = event
                return found
        return None

    # -- applying and reading back --

    def apply(self, obj: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl("apply", "-o", "json", "-f", "-", input=json.dumps(obj), check=False)

    def workloads(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        return owned_workloads(self.cp, obj["metadata"]["namespace"], obj["kind"], obj["metadata"]["name"])

    def outcomes(self, obj: Mapping[str, Any]) -> list[KueueOutcome]:
        return [kueue_outcome(w) for w in self.workloads(obj)]

    def wait_outcome(
        self, obj: Mapping[str, Any], *, admitted: bool, timeout: float = 30.0
    ) -> list[KueueOutcome]:
        """Poll until Kueue made a decision: every Workload admitted, or (admitted=False) every one
        tried and left without quota (a QuotaReserved=False message)."""
        seen: list[KueueOutcome] = []

        def decided() -> bool:
            nonlocal seen
            seen = self.outcomes(obj)
            if not seen:
                return False
            if admitted:
                return all(o.admitted for o in seen)
            return all(o.admitted or (not o.reserved and o.message) for o in seen)

        what = "admitted" if admitted else "pending with a message"
        try:
            wait_for(f"Kueue: {obj['kind']} {obj['metadata']['name']} {what}", decided, timeout, every=0.3)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; Workloads: {seen}") from None
        return seen

    def stays_pending(self, obj: Mapping[str, Any], seconds: float = 4.0) -> list[KueueOutcome]:
        """Kueue tried the Workloads and keeps them without quota for ``seconds``; the last outcomes."""
        outcomes = self.wait_outcome(obj, admitted=False)
        deadline = time.monotonic() + seconds
        while True:
            admitted = [o for o in outcomes if o.admitted or o.reserved]
            if admitted:
                raise AssertionError(f"Kueue admitted {obj['kind']} {obj['metadata']['name']}: {admitted}")
            if time.monotonic() > deadline:
                return outcomes
            time.sleep(0.5)
            outcomes = self.outcomes(obj)

    def stored(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind, meta = obj["kind"], obj["metadata"]
        result: dict[str, Any] = self.cp.kubectl_json(
            "get", RESOURCES[kind], meta["name"], "-n", meta["namespace"]
        )
        return result

    def suspended(self, obj: Mapping[str, Any]) -> bool | None:
        """The kind's suspend flag as stored now (None for kinds without one)."""
        path = SUSPEND_PATHS.get(obj["kind"])
        if path is None:
            return None
        node: Any = self.stored(obj)
        for part in path:
            node = (node or {}).get(part)
        return bool(node)

    # -- usage pods --

    def kueue_reconciles(self, pods: Iterable[str]) -> dict[str, int]:
        """How often Kueue's non-TAS usage reconciler logged each pod so far."""
        names = list(pods)
        counts = dict.fromkeys(names, 0)
        text = self.kueue.log_path.read_text(errors="replace")
        for line in text.splitlines():
            if KUEUE_POD_RECONCILE not in line:
                continue
            for name in names:
                if f'"name":"{name}"' in line and f'"namespace":"{NS}"' in line:
                    counts[name] += 1
        return counts

    def sync_kueue_pods(self, before: Mapping[str, int], timeout: float = 20.0) -> None:
        """Wait until Kueue's usage reconciler logged every pod once more than in ``before``."""

        def done() -> bool:
            now = self.kueue_reconciles(before)
            return all(now[name] > count for name, count in before.items())

        wait_for(f"Kueue's non-TAS usage cache to see pods {sorted(before)}", done, timeout, every=0.2)

    def add_usage(self, usage: Mapping[str, int]) -> list[str]:
        """One bound usage Pod per node of ``usage`` (node -> GPUs); waits until Kueue counted them."""
        pods = {f"usage-{node}": usage_pod(f"usage-{node}", node, gpus) for node, gpus in usage.items()}
        if not pods:
            return []
        before = self.kueue_reconciles(pods)
        self.cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(list(pods.values())))
        self.sync_kueue_pods(before)
        return sorted(pods)

    def remove_usage(self, pods: Sequence[str]) -> None:
        """Force-delete usage Pods (no kubelet confirms a graceful delete); waits for Kueue to see it."""
        if not pods:
            return
        before = self.kueue_reconciles(pods)
        self.cp.kubectl("delete", "pod", "-n", NS, "--grace-period=0", "--force", "--ignore-not-found", *pods)
        self.sync_kueue_pods(before)

    # -- clean-up --

    def delete(self, obj: Mapping[str, Any]) -> None:
        """The workload, then its Workloads (there is no garbage collector); waits until they are gone."""
        kind, meta = obj["kind"], obj["metadata"]
        namespace = meta["namespace"]
        workloads = [w["metadata"]["name"] for w in self.workloads(obj)]
        self.cp.kubectl("delete", RESOURCES[kind], meta["name"], "-n", namespace, "--ignore-not-found")
        if workloads:
            self.cp.kubectl(
                "delete", WORKLOADS, "-n", namespace, "--ignore-not-found", "--wait=false", *workloads
            )

        def gone() -> bool:
            return not self.workloads(obj)

        wait_for(f"the Workloads of {kind} {meta['name']} to be deleted", gone, 30, every=0.3)

    def cleanup(self, objects: Sequence[Mapping[str, Any]], pods: Sequence[str], *, strict: bool) -> None:
        """Delete ``objects`` (and their Workloads) and the usage ``pods``; after a failure
        (``strict=False``) a clean-up error is logged, not raised over the failure itself."""
        steps: list[tuple[str, Any]] = [(o["metadata"]["name"], lambda o=o: self.delete(o)) for o in objects]
        steps.append(("usage pods", lambda: self.remove_usage(pods)))
        for what, step in steps:
            try:
                step()
            except Exception as exc:
                if strict:
                    raise
                print(f"clean-up of {what} failed after the case failed: {exc}", file=sys.stderr)

    def no_workloads_left(self) -> bool:
        return all(
            not self.cp.kubectl_json("get", WORKLOADS, "-n", namespace)["items"]
            for namespace in (NS, BYPASS_NS)
        )


def predicted_podsets(verdict: Mapping[str, Any]) -> dict[str, tuple[str | None, dict[str, int]]]:
    """tasgate's PodSet name -> (flavor, pods per hostname) of its ``now`` placement.

    Assignment values are mapped to their lowest level (the hostname): the last value.
    """
    result: dict[str, tuple[str | None, dict[str, int]]] = {}
    for podset in verdict.get("podSets") or ():
        now = podset.get("now") or {}
        hosts: dict[str, int] = {}
        for entry in now.get("assignment") or ():
            host = str(entry["values"][-1])
            hosts[host] = hosts.get(host, 0) + int(entry["count"])
        flavor = podset.get("flavor")
        result[str(podset["name"])] = (None if flavor is None else str(flavor), hosts)
    return result


@contextlib.contextmanager
def fidelity_world(workdir: Path, cp: ControlPlane, kueue: Kueue) -> Iterator[Fidelity]:
    """tasgate started against ``cp`` (after Kueue), the world built; tasgate stopped on exit."""
    tasgate = TasgateServer(cp, workdir)
    try:
        world = Fidelity(cp, kueue, tasgate, workdir)
        world.build()
        yield world
    finally:
        tasgate.stop()
