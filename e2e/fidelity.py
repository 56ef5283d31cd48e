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
from e2e.fidelity_audit import (
    AuditTail,
    live_summary,
    mutating_webhooks_called,
    tasgate_annotations,
    tasgate_called,
    tasgate_denial,
)
from e2e.fidelity_workloads import (
    RESOURCES,
    SUSPEND_PATHS,
    in_namespace,
    job,
    jobset,
    leader_worker_set,
    mpi_job,
    pod_template,
    pytorch_job,
    replicated_job,
    same_object,
    usage_pod,
)
from e2e.fidelity_world import (
    BLOCK,
    BLOCK0_FLAVOR,
    BLOCK1_FLAVOR,
    BYPASS_NS,
    CPU_FLAVOR,
    GPU_FLAVOR,
    GROUP_NAME,
    HOST,
    KUEUE_POD_RECONCILE,
    MIN_PARALLELISM,
    MIXED_QUEUE,
    MUTATE,
    NS,
    POD_INDEX_OFFSET,
    PODGROUP_CRD,
    PREFERRED,
    QUOTA_QUEUE,
    RACK,
    RACKS_PER_BLOCK,
    REQUIRED,
    SLICE_CONSTRAINTS,
    SLICE_REQUIRED,
    SLICE_SIZE,
    UNCONSTRAINED,
    WEBHOOKS_MANIFEST,
    WORKLOADS,
    add_nodes,
    cluster_queues_active,
    kueue_objects,
)
from e2e.kueue import Kueue
from e2e.kueue_admission import condition_true, owned_workloads, wait_for, workload_admission
from e2e.serving import TASGATE, serve_argv
from webhook.serve import certs

__all__ = [  # what the tests import from here; the parts live in e2e.fidelity_world, _workloads, _audit
    "BLOCK",
    "BLOCK0_FLAVOR",
    "BLOCK1_FLAVOR",
    "BYPASS_NS",
    "CPU_FLAVOR",
    "Fidelity",
    "GPU_FLAVOR",
    "GROUP_NAME",
    "HOST",
    "KueueOutcome",
    "MIN_PARALLELISM",
    "MIXED_QUEUE",
    "MUTATE",
    "NS",
    "POD_INDEX_OFFSET",
    "PREFERRED",
    "QUOTA_QUEUE",
    "RACK",
    "RACKS_PER_BLOCK",
    "REQUIRED",
    "RESOURCES",
    "SLICE_CONSTRAINTS",
    "SLICE_REQUIRED",
    "SLICE_SIZE",
    "TasgateServer",
    "UNCONSTRAINED",
    "WORKLOADS",
    "fidelity_world",
    "in_namespace",
    "job",
    "jobset",
    "leader_worker_set",
    "live_summary",
    "mpi_job",
    "mutating_webhooks_called",
    "pod_template",
    "predicted_podsets",
    "pytorch_job",
    "replicated_job",
    "same_object",
    "tasgate_annotations",
    "tasgate_called",
    "tasgate_denial",
]

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

    def __init__(
        self, cp: ControlPlane, workdir: Path, stale_after: float = 0, extra: Sequence[str] = ()
    ) -> None:
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
            [
                *serve_argv(cp.kubeconfig, self.port, self.metrics_port, self.certs, f"{stale_after:g}"),
                *extra,
            ],
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
        core = self.cp.kubectl("get", "nodes,pods,namespaces,priorityclasses", "-A", "-o", "yaml").stdout
        kinds = (
            "topologies,resourceflavors,clusterqueues,localqueues,cohorts,workloadpriorityclasses,"
            "admissionchecks,provisioningrequestconfigs"
        ) + (f",{WORKLOADS}" if workloads else "")
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
def fidelity_world(
    workdir: Path, cp: ControlPlane, kueue: Kueue, tasgate_args: Sequence[str] = ()
) -> Iterator[Fidelity]:
    """tasgate started against ``cp`` (after Kueue) with ``tasgate_args`` added, the world built;
    tasgate stopped on exit."""
    tasgate = TasgateServer(cp, workdir, extra=tasgate_args)
    try:
        world = Fidelity(cp, kueue, tasgate, workdir)
        world.build()
        yield world
    finally:
        tasgate.stop()
