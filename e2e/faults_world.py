"""The fault suite's world: a few hundred GPU nodes, their usage, Kueue's objects, the webhooks.

Built once per suite on the real API server (e2e/scale.py makes the Nodes and bound Pods fast):
racks of 8-GPU hosts in which one rack (the *target*) is free and every other has a few free
hosts, so two probe Jobs have verdicts no fault may change:

- ``fits``: a rack-required gang of 4/5 of a rack fits now (in the target rack);
- ``never``: one pod more than a rack holds can never fit.

What a test changes to see whether tasgate still follows the cluster is a *marker*: a rack of its
own (block ``mk``) whose hosts carry a label only its marker Job selects, so adding or deleting one
of them flips that Job between fits and never-fits and moves nothing else.

Kueue itself does not run here (it would admit the suite's Jobs and move the probes' verdicts):
where a fault needs what Kueue writes, the harness writes it the way Kueue's job controller does
(`kueue_workload`: the Workload of a Job, owned by it), and says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import os
import ssl
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from e2e import scale
from e2e.controlplane import ControlPlane
from e2e.kueue import KUEUE_API_VERSION
from e2e.kueue_scenario import BLOCK, LOCAL_QUEUE, NODE_POOL, RACK, job, pod_template, setup_queues
from e2e.nodes import DEFAULT_ALLOCATABLE, node_manifest, ready_status
from e2e.shared import shared_dir

NS = "faults"
LEASE_NAMESPACE = "tasgate-system"
MARKER_LABEL = "faults.tasgate.io/marker"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# A few hundred nodes by default (2 shared cores); TASGATE_FAULTS_NODES / _PODS grow it, e.g. to
# FAULTS.md's 10,000 / 50,000 to look for what only a large state shows (the flood's stall).
SHAPE = scale.Shape(
    nodes=int(os.environ.get("TASGATE_FAULTS_NODES", "200")),
    pods=int(os.environ.get("TASGATE_FAULTS_PODS", "1000")),
    nodes_per_rack=10,
    racks_per_block=5,
    concurrency=16,
)
CRD_FILES = (
    "kueue.x-k8s.io_topologies.yaml",
    "kueue.x-k8s.io_resourceflavors.yaml",
    "kueue.x-k8s.io_clusterqueues.yaml",
    "kueue.x-k8s.io_localqueues.yaml",
    "kueue.x-k8s.io_workloads.yaml",
    "scheduling.x-k8s.io_podgroups.yaml",
    "jobset.x-k8s.io_jobsets.yaml",
)
JSON = "application/json"
# What a keep-alive connection the server has since closed (a restart) fails with on reuse.
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError)
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    warnings: tuple[str, ...]


class Api:
    """A blocking JSON client of the API server on one keep-alive connection (one per thread).

    As the harness admin by default (system:masters: exempt from API Priority and Fairness and
    RBAC), or as any client certificate ``cert``. An OSError leaves the connection closed for the
    next call to reopen, and is raised: a caller counting answers must see "no answer".
    """

    def __init__(self, cp: ControlPlane, cert: tuple[Any, Any] | None = None, timeout: float = 15.0) -> None:
        self.port, self.timeout = cp.apiserver_port, timeout
        self.context = ssl.create_default_context(cafile=str(cp.ca_path))
        self.context.load_cert_chain(*map(str, cert or cp.admin_cert))
        self._connection: http.client.HTTPSConnection | None = None

    def call(self, method: str, path: str, body: Any = None, content_type: str = JSON) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type, "Accept": JSON}
        reused = self._connection is not None
        try:
            response, raw = self._send(method, path, data, headers)
        except STALE:
            if not reused:  # a fresh connection that fails is a real "no answer"
                raise
            response, raw = self._send(method, path, data, headers)  # a keep-alive the server closed
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"message": raw[:500].decode(errors="replace")}
        warnings = tuple(_warning_text(w) for w in response.headers.get_all("Warning") or ())
        return Reply(response.status, parsed if isinstance(parsed, dict) else {}, warnings)

    def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        if self._connection is None:
            self._connection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, context=self.context, timeout=self.timeout
            )
        try:
            self._connection.request(method, path, body=data, headers=headers)
            response = self._connection.getresponse()
            return response, response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def ok(self, method: str, path: str, body: Any = None, content_type: str = JSON) -> dict[str, Any]:
        """``call`` that must succeed (2xx); AssertionError with the server's words otherwise."""
        reply = self.call(method, path, body, content_type)
        if not 200 <= reply.status < 300:
            raise AssertionError(f"{method} {path}: {reply.status} {reply.body.get('message', reply.body)}")
        return reply.body

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None


def _warning_text(header: str) -> str:
    """``299 - "text"`` (RFC 7234, as the API server writes admission warnings) -> ``text``."""
    _, _, rest = header.partition('"')
    return rest.rsplit('"', 1)[0] if rest else header


def jobs_path(namespace: str = NS) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs"


# --- building it ---------------------------------------------------------------------------------


def build(cp: ControlPlane) -> None:
    """CRDs, namespaces, the nodes and usage pods of `SHAPE`, the Kueue queue objects."""
    crds = [shared_dir() / "crds" / name for name in CRD_FILES]
    cp.kubectl("apply", "--server-side", *(a for c in crds for a in ("-f", str(c))))
    names = [f"crd/{yaml.safe_load(c.read_text())['metadata']['name']}" for c in crds]
    cp.kubectl("wait", "--for", "condition=established", "--timeout=60s", *names)
    for namespace in (scale.USAGE_NAMESPACE, LEASE_NAMESPACE):
        cp.kubectl("create", "namespace", namespace)
    setup_queues(cp, NS)

    async def fill() -> None:
        api = scale.Api(cp, SHAPE.concurrency)
        try:
            await scale.add_nodes(api, SHAPE)
            await scale.add_pods(api, SHAPE)
        finally:
            await api.close()

    asyncio.run(fill())


def webhook_configurations(port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """tasgate's two webhooks on batch Jobs, at ``https://localhost:<port>``, failurePolicy Fail:
    when tasgate cannot be reached the API server refuses the Job (never admits it unchecked)."""
    common = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 10,
        "failurePolicy": "Fail",
        "rules": [
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": ["batch"],
                "apiVersions": ["v1"],
                "resources": ["jobs"],
            }
        ],
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
            ]
        },
    }
    api = "admissionregistration.k8s.io/v1"

    def hook(name: str, path: str) -> dict[str, Any]:
        client = {"url": f"https://localhost:{port}{path}", "caBundle": ca_bundle}
        return {"name": name, "clientConfig": client, **common}

    mutating = {**hook("mutate.tasgate.io", "/mutate"), "reinvocationPolicy": "IfNeeded"}
    return [
        {
            "apiVersion": api,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "tasgate-faults"},
            "webhooks": [mutating],
        },
        {
            "apiVersion": api,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "tasgate-faults"},
            "webhooks": [hook("validate.tasgate.io", "/validate")],
        },
    ]


# --- what is asked ---------------------------------------------------------------------------------


def fits_job(name: str = "probe-fits", namespace: str = NS) -> dict[str, Any]:
    """Fits now in the target rack, and only there."""
    return job(name, namespace, pods=SHAPE.gang_pods)


def never_job(name: str = "probe-never", namespace: str = NS) -> dict[str, Any]:
    """One pod more than any rack has hosts: never fits."""
    return job(name, namespace, pods=SHAPE.nodes_per_rack + 1)


def review_body(obj: Mapping[str, Any], operation: str = "CREATE") -> bytes:
    """The AdmissionReview the API server would send for ``obj`` (a batch/v1 Job or a JobSet)."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = str(obj["kind"])
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
        "object": obj,
        "userInfo": {"username": "faults-user"},
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


class Marker:
    """A rack of its own whose hosts only its marker Job selects: one node deleted or added flips
    that Job between fits and never-fits, and no other verdict moves."""

    def __init__(self, api: Api, name: str, hosts: int = 3) -> None:
        self.api, self.name, self.hosts = api, name, hosts
        self.present: set[str] = set()

    def node(self, i: int) -> str:
        return f"mk-{self.name}-{i}"

    def create(self) -> Marker:
        for i in range(self.hosts):
            self.add(i)
        return self

    def add(self, i: int) -> None:
        name = self.node(i)
        labels = {**NODE_POOL, BLOCK: "mk", RACK: f"mk-{self.name}", MARKER_LABEL: self.name}
        self.api.ok("POST", "/api/v1/nodes", node_manifest(name, labels))
        self.api.ok("PATCH", f"/api/v1/nodes/{name}/status", ready_status(DEFAULT_ALLOCATABLE), MERGE)
        self.api.ok("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, MERGE)
        self.present.add(name)

    def delete(self, i: int) -> None:
        self.api.ok("DELETE", f"/api/v1/nodes/{self.node(i)}")
        self.present.discard(self.node(i))

    @property
    def fits(self) -> bool:
        """What a correct, current verdict on `job` is now."""
        return len(self.present) >= self.hosts

    def job(self) -> dict[str, Any]:
        """``hosts`` whole-host pods in one rack, on this marker's hosts only."""
        obj = job(f"marker-{self.name}", NS, pods=self.hosts)
        obj["spec"]["template"]["spec"]["nodeSelector"] = {MARKER_LABEL: self.name}
        return obj


# --- what Kueue would write, and what tasgate wrote ---------------------------------------------


def kueue_workload(stored_job: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload Kueue's job controller creates for a queued Job, owned by it (name, owner
    reference, queue and PodSet as v0.19.2 writes them): the trigger tasgate's PodGroup
    reconciler follows besides the pods (Kueue is not running here; see the module docstring)."""
    meta, spec = stored_job["metadata"], stored_job["spec"]
    digest = hashlib.sha256(str(meta["uid"]).encode()).hexdigest()[:5]
    count = min(int(spec.get("parallelism", 1)), int(spec.get("completions", spec.get("parallelism", 1))))
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": f"job-{meta['name']}-{digest}",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": {
            "active": True,
            "queueName": meta.get("labels", {}).get("kueue.x-k8s.io/queue-name", LOCAL_QUEUE),
            "podSets": [{"name": "main", "count": count, "template": spec["template"]}],
        },
    }  # fmt: skip


def never_fitting_workload(name: str, namespace: str = NS) -> dict[str, Any]:
    """A queued Workload that can never fit (one pod more than a rack): tasgate's tracker must say
    so with exactly one ``NeverFits`` Event (whichever replica leads, however often it retries)."""
    pods = SHAPE.nodes_per_rack + 1
    template = pod_template(annotations={"kueue.x-k8s.io/podset-required-topology": RACK})
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "active": True,
            "queueName": LOCAL_QUEUE,
            "podSets": [{"name": "main", "count": pods, "template": template}],
        },
    }


def podgroups_by_owner(api: Api, namespace: str = NS) -> Counter[str]:
    """PodGroups (scheduling.x-k8s.io) per owner uid."""
    body = api.ok("GET", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups")
    owners: Counter[str] = Counter()
    for item in body.get("items") or []:
        for ref in item["metadata"].get("ownerReferences") or []:
            owners[str(ref.get("uid"))] += 1
    return owners


def missing_or_extra(api: Api, owners: Sequence[str], namespace: str = NS) -> dict[str, int]:
    """The owner uids among ``owners`` that do not have exactly one PodGroup, with their count."""
    found = podgroups_by_owner(api, namespace)
    return {uid: found.get(uid, 0) for uid in owners if found.get(uid, 0) != 1}


def events(api: Api, namespace: str = NS) -> list[dict[str, Any]]:
    """Every Event of ``namespace`` as events.k8s.io/v1 shows it (core Events included)."""
    return list(api.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").get("items") or [])


def event_key(event: Mapping[str, Any]) -> tuple[str, str]:
    """One occurrence: what it is about (uid, else kind/name) and its reason. The suite's gangs
    enter each state once, so a second Event with the same key is a duplicate."""
    about = event.get("regarding") or {}
    subject = str(about.get("uid") or f"{about.get('kind')}/{about.get('name')}")
    return subject, str(event.get("reason"))


def duplicate_events(items: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Occurrences posted more than once (as separate Event objects, or counted up by a series)."""
    seen: Counter[tuple[str, str]] = Counter()
    for event in items:
        series = event.get("series") or {}
        seen[event_key(event)] += max(int(series.get("count") or 1), int(event.get("deprecatedCount") or 1))
    return {key: n for key, n in seen.items() if n > 1}


def large_jobset(name: str, replicated_jobs: int = 8000, namespace: str = NS) -> dict[str, Any]:
    """A JobSet of ``replicated_jobs`` one-pod replicatedJobs: about 2 MB as an AdmissionReview
    (FAULTS.md's flood). The API server's schema refuses it long before a webhook would see it,
    so the flood is POSTed straight to tasgate: what anyone who reaches its port can send."""
    container = {
        "name": "worker",
        "image": "registry.example/train:1",
        "resources": {"requests": {"cpu": "1"}},
    }
    pod = {
        "metadata": {"labels": {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    jobs = [
        {"name": f"replicated-job-{i:05d}", "replicas": 1,
         "template": {"spec": {"parallelism": 1, "completions": 1, "template": pod}}}
        for i in range(replicated_jobs)
    ]  # fmt: skip
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE},
        },
        "spec": {"replicatedJobs": jobs},
    }
