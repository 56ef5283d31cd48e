"""tasgate in live mode against a real kube-apiserver + etcd, driven by a real kubectl.

One control plane and one `tasgate serve --kubeconfig` for the module: the real CRDs, a small
GPU cluster of Node objects (2 blocks x 2 racks x 2 hosts, 8 GPUs each) with bound Pods for
usage, Kueue's Topology/ResourceFlavor/ClusterQueue/LocalQueue, and both webhooks registered
with `clientConfig.url` + `caBundle`. Every scenario asserts on what the API server stored or
answered, and on its audit log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e import nodes, prometheus_operator
from e2e.controlplane import ControlPlane, free_ports
from e2e.kueue import install_crds
from e2e.prometheus import APISERVER_JOB, Prometheus, apiserver_job
from e2e.serving import serve_argv
from e2e.shared import shared_dir
from tests.e2e.install_image import IMAGE
from tests.webhook import overlay, promql
from tests.webhook.monitoring import external_metrics
from webhook.serve import certs

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRDS = shared_dir() / "crds"
BLOCK, RACK, HOST = "topology.example.com/block", "topology.example.com/rack", "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
NS = "e2e"
BLOCKS, RACKS, HOSTS = ("b1", "b2"), ("r1", "r2"), ("h1", "h2")  # the world's nodes, block-rack-host


def rack_holds(gpus: int) -> int:
    """Pods of ``gpus`` GPUs one rack of the world holds when empty: its hosts, times each host's
    GPUs over the pod's. Counted from the layout, not read from what tasgate says."""
    return len(HOSTS) * int(nodes.DEFAULT_ALLOCATABLE[GPU]) // gpus


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0, every: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def add_node(cp: ControlPlane, name: str, block: str, rack: str) -> None:
    """A Ready 8-GPU node in ``block``/``rack`` (e2e.nodes lifts the API server's not-ready taint)."""
    nodes.add_node(cp, name, {BLOCK: block, RACK: rack, "pool": "gpu"})


def usage_pod(name: str, node_name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "c",
                    "image": "busy",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
        },
    }


def kueue_objects() -> list[dict[str, Any]]:
    api = "kueue.x-k8s.io/v1beta2"
    return [
        {
            "apiVersion": api,
            "kind": "Topology",
            "metadata": {"name": "gpu"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
        },
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu-flavor"},
            "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": "gpu"},
        },
        {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": "gpu-cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", GPU],
                        "flavors": [
                            {
                                "name": "gpu-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 1000},
                                    {"name": "memory", "nominalQuota": "10Ti"},
                                    {"name": GPU, "nominalQuota": 1000},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": api,
            "kind": "LocalQueue",
            "metadata": {"name": "gpu-queue", "namespace": NS},
            "spec": {"clusterQueue": "gpu-cq"},
        },
    ]


def job(name: str, pods: int, gpus: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "train",
                    "image": "trainer",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
        }
    }
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "gpu-queue"}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": True, "template": template},
    }


class Tasgate:
    def __init__(
        self,
        cp: ControlPlane,
        workdir: Path,
        stale_after: str = "60",
        name: str = "tasgate",
        processes: int = 0,
    ) -> None:
        self.cp = cp
        self.port, self.metrics_port = free_ports(2)
        self.certs = workdir / f"{name}-certs"
        self.name = name
        self.stdout = (workdir / f"{name}.out").open("wb")
        self.stderr = (workdir / f"{name}.err").open("wb")
        self.workdir = workdir
        self.proc = subprocess.Popen(
            [
                *serve_argv(cp.kubeconfig, self.port, self.metrics_port, self.certs, stale_after),
                *(["--decision-processes", str(processes)] if processes else []),
            ],
            stdout=self.stdout,
            stderr=self.stderr,
        )

    def get(self, path: str) -> tuple[int, str]:
        if self.proc.poll() is not None:
            raise AssertionError(f"tasgate serve exited {self.proc.returncode}:\n{self.log()[-3000:]}")
        try:
            context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
            url = f"https://localhost:{self.port}{path}"
            with urllib.request.urlopen(url, context=context, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def log(self) -> str:
        return (self.workdir / f"{self.name}.err").read_text()

    def audit(self) -> list[dict[str, Any]]:
        text = (self.workdir / f"{self.name}.out").read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.stdout.close()
        self.stderr.close()


def webhook_configurations(port: int, ca_bundle: str) -> str:
    rules = [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
        },
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["jobset.x-k8s.io"],
            "apiVersions": ["v1alpha2"],
            "resources": ["jobsets"],
        },
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["v1"],
            "resources": ["pytorchjobs"],
        },
        {
            "operations": ["UPDATE"],
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["v1"],
            "resources": ["pytorchjobs/scale"],
        },
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["v2beta1"],
            "resources": ["mpijobs"],
        },
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["leaderworkersets"],
        },
    ]
    common = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 10,
        "failurePolicy": "Fail",
        "rules": rules,
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
            ]
        },
    }
    docs = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "tasgate-e2e"},
            "webhooks": [
                {
                    "name": "mutate.tasgate.io",
                    "reinvocationPolicy": "IfNeeded",
                    "clientConfig": {"url": f"https://localhost:{port}/mutate", "caBundle": ca_bundle},
                    **common,
                }
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "tasgate-e2e"},
            "webhooks": [
                {
                    "name": "validate.tasgate.io",
                    "clientConfig": {"url": f"https://localhost:{port}/validate", "caBundle": ca_bundle},
                    **common,
                }
            ],
        },
    ]
    return yaml.safe_dump_all(docs)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Tasgate]]:
    workdir = tmp_path_factory.mktemp("e2e")
    with ControlPlane() as cp:
        crds = sorted(CRDS.glob("*.yaml"))
        assert crds, f"no CRDs in {CRDS}"
        for crd in crds:
            cp.kubectl("apply", "--server-side", "-f", str(crd))
        names = [yaml.safe_load(c.read_text())["metadata"]["name"] for c in crds]
        cp.kubectl("wait", "--for", "condition=established", "--timeout=60s", *(f"crd/{n}" for n in names))
        cp.kubectl("create", "namespace", NS)
        for b in BLOCKS:
            for r in RACKS:
                for h in HOSTS:
                    add_node(cp, f"{b}-{r}-{h}", b, f"{b}-{r}")
        busy = [usage_pod(f"busy-{n}", n, 8) for n in ("b1-r1-h1", "b1-r1-h2", "b2-r1-h1")]
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(busy + kueue_objects()))
        tasgate = Tasgate(cp, workdir, processes=2)  # as a replica on a many-core node runs
        try:
            wait_for("tasgate to sync and report ready", lambda: tasgate.get("/readyz")[0] == 200, 60)
            ca_bundle = certs.ca_bundle(tasgate.certs / "ca.crt")
            cp.kubectl("apply", "-f", "-", input=webhook_configurations(tasgate.port, ca_bundle))
            probe = yaml.safe_dump(job("probe", 8, 8, {"kueue.x-k8s.io/podset-required-topology": RACK}))

            def answering() -> bool:
                result = cp.kubectl("create", "--dry-run=server", "-f", "-", input=probe, check=False)
                return "tasgate.io" in result.stderr

            wait_for("the API server to call tasgate", answering, 60)
            yield cp, tasgate
        finally:
            tasgate.stop()


def stored(cp: ControlPlane, kind: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = cp.kubectl_json("get", kind, name, "-n", NS)
    return result


def apply(cp: ControlPlane, obj: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(obj), check=False)


def test_unannotated_job_gets_tas_annotation_and_gang_label(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, _ = world
    result = apply(cp, job("two-racks", 2, 8))
    assert result.returncode == 0, result.stderr
    template = stored(cp, "job", "two-racks")["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == RACK
    assert template["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "two-racks"


def test_never_fitting_gang_is_refused_with_tasgates_message(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, _ = world
    result = apply(cp, job("too-big", 3, 8, {"kueue.x-k8s.io/podset-required-topology": RACK}))
    assert result.returncode != 0
    assert 'admission webhook "mutate.tasgate.io" denied the request' in result.stderr
    assert f"the largest rack holds {rack_holds(8)} such pods even when empty" in result.stderr
    assert cp.kubectl("get", "job", "too-big", "-n", NS, check=False).returncode != 0


def test_gang_that_must_wait_is_admitted_with_a_warning(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, _ = world
    # A block holds 4 such pods when empty; b1 has 2 free hosts now and b2 has 3.
    result = apply(cp, job("must-wait", 4, 8, {"kueue.x-k8s.io/podset-required-topology": BLOCK}))
    assert result.returncode == 0, result.stderr
    assert "Warning:" in result.stderr and "must wait" in result.stderr


def pod_group_exists(cp: ControlPlane, name: str) -> bool:
    return cp.kubectl("get", "podgroups.scheduling.x-k8s.io", name, "-n", NS, check=False).returncode == 0


def test_dry_run_stores_nothing_and_creates_no_podgroup(world: tuple[ControlPlane, Tasgate]) -> None:
    """A dry run is judged, never handed to the PodGroup reconciler: no Job, no PodGroup, and
    tasgate never even looks the Job up (a hint would GET it at once). An absence proves
    something only once the reconciler is known to be alive and to have had its chance: a real
    Job created right after the dry run gets its PodGroup first (the reconciler runs, leads, and
    has acted on a hint given after the dry run's review). Only then are the absences asserted,
    the last from the API server's audit log, which records every request (tasgate's are the
    ones not from kubectl)."""
    cp, _ = world
    result = apply(cp, job("dry", 2, 8), "--dry-run=server")
    assert result.returncode == 0, result.stderr
    try:
        assert apply(cp, job("dry-control", 2, 8)).returncode == 0
        wait_for("the control Job's PodGroup", lambda: pod_group_exists(cp, "dry-control"), 60)
        assert cp.kubectl("get", "job", "dry", "-n", NS, check=False).returncode != 0
        assert not pod_group_exists(cp, "dry")
        looked = [
            (event["verb"], event.get("userAgent"))
            for event in cp.audit_events()
            if (event.get("objectRef") or {}).get("resource") == "jobs"
            and (event.get("objectRef") or {}).get("name") == "dry"
            and not str(event.get("userAgent", "")).startswith("kubectl")
        ]
        assert looked == [], "a dry run is never hinted to the reconciler"
    finally:  # the control leaves the world as it was for the tests after
        cp.kubectl("delete", "podgroups.scheduling.x-k8s.io,job", "dry-control", "-n", NS, check=False)


def test_podgroup_appears_with_min_member_and_owner(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, _ = world
    assert apply(cp, job("gang", 2, 8)).returncode == 0
    owner_uid = stored(cp, "job", "gang")["metadata"]["uid"]

    def found() -> bool:
        args = ("get", "podgroups.scheduling.x-k8s.io", "gang", "-n", NS)
        return cp.kubectl(*args, check=False).returncode == 0

    wait_for("the PodGroup", found, 30)
    pod_group = cp.kubectl_json("get", "podgroups.scheduling.x-k8s.io", "gang", "-n", NS)
    assert pod_group["spec"]["minMember"] == 2
    assert pod_group["spec"]["minResources"][GPU] == "16"
    (ref,) = pod_group["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("Job", "gang", owner_uid)


def test_each_kind_is_mutated_in_the_stored_object(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, _ = world
    examples = {
        "jobset": ("jobset.jobset.x-k8s.io", ("spec", "replicatedJobs", 0, "template", "spec", "template")),
        "pytorchjob": ("pytorchjob.kubeflow.org", ("spec", "pytorchReplicaSpecs", "Worker", "template")),
        "mpijob": ("mpijob.kubeflow.org", ("spec", "mpiReplicaSpecs", "Worker", "template")),
        "lws": (
            "leaderworkerset.leaderworkerset.x-k8s.io",
            ("spec", "leaderWorkerTemplate", "workerTemplate"),
        ),
    }
    manifests = {name: _kind_manifest(name) for name in examples}
    for name, (resource, path) in examples.items():
        result = apply(cp, manifests[name])
        assert result.returncode == 0, f"{name}: {result.stderr}"
        node: Any = stored(cp, resource, manifests[name]["metadata"]["name"])
        for part in path:
            node = node[part]
        annotations = node["metadata"]["annotations"]
        assert any(k.startswith("kueue.x-k8s.io/podset-") for k in annotations), (name, annotations)


def _kind_manifest(name: str) -> dict[str, Any]:
    container = {"name": "c", "image": "trainer", "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}
    pod = {"spec": {"containers": [container], "restartPolicy": "Never"}}
    queue = {"kueue.x-k8s.io/queue-name": "gpu-queue"}
    if name == "jobset":
        return {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js", "namespace": NS, "labels": queue},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 1,
                        "template": {"spec": {"parallelism": 2, "completions": 2, "template": pod}},
                    }
                ]
            },
        }
    if name == "pytorchjob":
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": NS, "labels": queue},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [dict(container, name="pytorch")]}},
                    },
                    "Worker": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [dict(container, name="pytorch")]}},
                    },
                }
            },
        }
    if name == "mpijob":
        launcher = {
            "spec": {"containers": [{"name": "l", "image": "mpi", "resources": {"requests": {"cpu": "1"}}}]}
        }
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "mpi", "namespace": NS, "labels": queue},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": launcher},
                    "Worker": {"replicas": 2, "template": pod},
                }
            },
        }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": NS, "labels": queue},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "leaderTemplate": pod, "workerTemplate": pod},
        },
    }


def placed(tasgate: Tasgate) -> dict[str, float]:
    """``tasgate_decisions_placed_total`` by place (process, server)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{tasgate.metrics_port}/metrics", timeout=5) as r:
        families = text_string_to_metric_families(r.read().decode())
    samples = [s for f in families if f.name == "tasgate_decisions_placed" for s in f.samples]
    return {s.labels["place"]: s.value for s in samples if s.name.endswith("_total")}


def test_the_decision_processes_decide_on_their_own_watches(world: tuple[ControlPlane, Tasgate]) -> None:
    """The suite's tasgate decides in two decision processes, each watching the API server itself
    (the rest of the suite's verdicts, node changes included, come from them): once they are up,
    a review the API server sends is decided there, not in the server."""
    cp, tasgate = world
    probe = job("in-a-process", 1, 8, {"kueue.x-k8s.io/podset-required-topology": RACK})

    def answered_by_a_process() -> bool:
        return apply(cp, probe, "--dry-run=server").returncode == 0 and placed(tasgate).get("process", 0) > 0

    wait_for("a decision process to answer", answered_by_a_process, 60, every=0.5)
    before = placed(tasgate)
    wide = job("wide-block-procs", 5, 8, {"kueue.x-k8s.io/podset-required-topology": BLOCK})
    refused = apply(cp, wide, "--dry-run=server")
    assert refused.returncode != 0 and "tasgate" in refused.stderr, refused.stderr
    after = placed(tasgate)
    assert after.get("server", 0) == before.get("server", 0), (before, after)
    assert after["process"] >= before["process"] + 1, (before, after)  # a /mutate denial ends the request
    for trouble in ("exited with code", "went away", "decision failed"):
        assert trouble not in tasgate.log(), tasgate.log()[-3000:]


def test_added_nodes_turn_a_refusal_into_an_admission(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, _ = world
    wide = job("wide-rack", 3, 8, {"kueue.x-k8s.io/podset-required-topology": RACK})
    assert apply(cp, wide).returncode != 0
    add_node(cp, "b2-r2-h3", "b2", "b2-r2")
    wait_for("tasgate to see the new node", lambda: apply(cp, wide).returncode == 0, 30, every=0.5)
    assert stored(cp, "job", "wide-rack")["spec"]["parallelism"] == 3


def test_api_server_restart_does_not_leave_tasgate_stale(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, tasgate = world
    wider = job("after-restart", 4, 8, {"kueue.x-k8s.io/podset-required-topology": RACK})
    assert apply(cp, wider).returncode != 0, "no rack holds 4 such pods yet"
    cp.restart_apiserver()
    add_node(cp, "b1-r2-h3", "b1", "b1-r2")
    add_node(cp, "b1-r2-h4", "b1", "b1-r2")
    # b1-r2 now has 4 free hosts: admitted only once tasgate's watches resumed after the restart.
    wait_for(
        "tasgate to see a node added after the restart", lambda: apply(cp, wider).returncode == 0, 60, every=1
    )
    assert tasgate.get("/readyz")[0] == 200


def test_api_server_audit_log_carries_tasgates_annotations(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, tasgate = world
    apply(cp, job("audited", 1, 8))

    def annotated() -> bool:
        for event in cp.audit_events():
            notes = event.get("annotations") or {}
            ref = event.get("objectRef") or {}
            if ref.get("name") == "audited" and "mutate.tasgate.io/decision" in notes:
                return (notes["mutate.tasgate.io/decision"], notes.get("mutate.tasgate.io/reason")) == (
                    "allow",
                    "fits",
                )
        return False

    wait_for("tasgate's audit annotations in the API server's audit log", annotated, 20)
    assert any(line["name"] == "audited" and line["reason"] == "fits" for line in tasgate.audit())


def test_deployment_manifests_pass_a_server_side_dry_run(
    world: tuple[ControlPlane, Tasgate], tmp_path: Path
) -> None:
    """The base registers no webhook; each certificate overlay installs everything, webhooks too.
    On a copy of manifests/ with the image every install needs (test_install_image.py) and the
    certificate files the tasgate-certs overlay reads, as docs/install.md makes them."""
    cp, _ = world
    cp.kubectl("create", "namespace", "tasgate-system", check=False)
    hooks = (
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/tasgate",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/tasgate",
    )
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests", symlinks=True)
    (tmp_path / "manifests" / "image" / "image.env").write_text(f"image={IMAGE}\n")
    base = cp.kubectl("apply", "--dry-run=server", "-k", str(tmp_path / "manifests"), check=False)
    assert base.returncode == 0, base.stderr
    assert "deployment.apps/tasgate created (server dry run)" in base.stdout
    assert "networkpolicy.networking.k8s.io/tasgate created (server dry run)" in base.stdout
    assert not any(h in base.stdout for h in hooks), "the base must not register webhooks"
    # tasgate-certs: with the certificate files its README step makes.
    overlay = tmp_path / "manifests" / "overlays" / "tasgate-certs"
    files = certs.generate(overlay / "certs", ["tasgate.tasgate-system.svc"])
    (overlay / "ca-bundle.env").write_text(f"caBundle={certs.ca_bundle(files.ca_cert)}\n")
    result = cp.kubectl("apply", "--dry-run=server", "-k", str(overlay), check=False)
    assert result.returncode == 0, result.stderr
    for hook in hooks:
        assert f"{hook} created (server dry run)" in result.stdout
    # cert-manager: its Issuer/Certificate kinds are not installed here, so those two are only
    # rendered; everything else goes through the server's dry run.
    rendered = cp.kubectl("kustomize", str(tmp_path / "manifests" / "overlays" / "cert-manager")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert {d["kind"] for d in docs if d["apiVersion"].startswith("cert-manager.io/")} == {
        "Issuer",
        "Certificate",
    }
    rest = [d for d in docs if not d["apiVersion"].startswith("cert-manager.io/")]
    for d in rest:
        if d["kind"].endswith("WebhookConfiguration"):
            assert d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "tasgate-system/tasgate"
    result = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(rest), check=False)
    assert result.returncode == 0, result.stderr
    for hook in hooks:
        assert f"{hook} created (server dry run)" in result.stdout


def test_kubectl_scale_cannot_walk_around_the_gate(world: tuple[ControlPlane, Tasgate]) -> None:
    cp, tasgate = world
    obj = _kind_manifest("pytorchjob")
    obj["metadata"]["name"] = "pt-scale"
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    assert apply(cp, obj).returncode == 0

    def workers() -> int:
        return int(stored(cp, "pytorchjob", "pt-scale")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])

    result = cp.kubectl("scale", "pytorchjob", "pt-scale", "-n", NS, "--replicas=1000", check=False)
    assert result.returncode != 0, result.stdout
    assert 'admission webhook "mutate.tasgate.io" denied the request' in result.stderr, result.stderr
    assert workers() == 2
    result = cp.kubectl("scale", "pytorchjob", "pt-scale", "-n", NS, "--replicas=1", check=False)
    assert result.returncode == 0, result.stderr
    assert workers() == 1

    def decisions() -> set[str]:
        return {a["decision"] for a in tasgate.audit() if a["kind"] == "Scale" and a["name"] == "pt-scale"}

    wait_for("both scale audit lines (written after the answers)", lambda: len(decisions()) == 2, 10)
    assert decisions() == {"allow", "deny"}


def test_a_quiet_cluster_keeps_readiness_with_a_short_stale_after(
    world: tuple[ControlPlane, Tasgate], tmp_path: Path
) -> None:
    """Watches (240 s each) that are open and silent are fresh: --stale-after 5 never trips."""
    cp, _ = world
    quiet = Tasgate(cp, tmp_path, stale_after="5", name="quiet")
    try:
        wait_for("the second tasgate to sync", lambda: quiet.get("/readyz")[0] == 200, 60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, text = quiet.get("/readyz")
            assert status == 200, text
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{quiet.metrics_port}/readyz", timeout=5) as r:
            assert r.status == 200
    finally:
        quiet.stop()


def decision_counts(tasgate: Tasgate) -> dict[str, float]:
    """Sums of the request metrics on the metrics port, by sample name and decision."""
    url = f"http://127.0.0.1:{tasgate.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_total"):
                key = f"{sample.name}/{sample.labels.get('decision', '')}"
                sums[key] = sums.get(key, 0.0) + sample.value
    return sums


def test_one_decision_per_request_and_the_uid_that_joins_kueue(world: tuple[ControlPlane, Tasgate]) -> None:
    """Through the real API server: a CREATE passes /mutate (no UID yet) and /validate (with the
    UID it is stored under): two audit lines, one final, one decision; a denial at /mutate is one
    decision; a dry run is none."""
    cp, tasgate = world
    before = decision_counts(tasgate)
    assert apply(cp, job("joined", 1, 8)).returncode == 0
    # more pods than any rack can ever hold, however many nodes other tests add
    assert (
        apply(cp, job("refused", 100, 8, {"kueue.x-k8s.io/podset-required-topology": RACK})).returncode != 0
    )
    assert apply(cp, job("rehearsed", 1, 8), "--dry-run=server").returncode == 0
    after = decision_counts(tasgate)

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert (
        delta("tasgate_admission_decisions_total/allow"),
        delta("tasgate_admission_decisions_total/deny"),
    ) == (
        1,
        1,
    )
    assert delta("tasgate_local_queue_admission_decisions_total/allow") == 1
    assert delta("tasgate_dry_run_decisions_total/allow") == 1
    assert delta("tasgate_admission_requests_total/allow") == 4, "joined and rehearsed: mutate + validate"

    def joined() -> list[dict[str, Any]]:
        return [a for a in tasgate.audit() if a["name"] == "joined"]

    wait_for("joined's two audit lines (written after their answers)", lambda: len(joined()) >= 2, 10)
    lines = joined()
    assert [(a["endpoint"], a["final"]) for a in lines] == [("mutate", False), ("validate", True)]
    uid = stored(cp, "job", "joined")["metadata"]["uid"]
    assert [a["objectUID"] for a in lines] == [None, uid], "the API server sets the UID after mutation"
    (refused,) = [a for a in tasgate.audit() if a["name"] == "refused"]
    assert (refused["endpoint"], refused["final"], refused["decision"]) == ("mutate", True, "deny")


def test_monitoring_overlay_passes_a_server_side_dry_run(world: tuple[ControlPlane, Tasgate]) -> None:
    """ServiceMonitor and PrometheusRule against the Prometheus Operator's own CRD schemas (pinned
    in e2e/tools/prometheus-operator), the dashboard ConfigMap as any ConfigMap."""
    cp, _ = world
    cp.kubectl("create", "namespace", "tasgate-system", check=False)
    assert install_crds(cp, prometheus_operator.crd_files()) == [
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
    ]
    overlay = ROOT / "manifests" / "overlays" / "monitoring"
    result = cp.kubectl("apply", "--dry-run=server", "-k", str(overlay), check=False)
    assert result.returncode == 0, result.stderr
    for created in (
        "configmap/tasgate-dashboard",
        "prometheusrule.monitoring.coreos.com/tasgate",
        "servicemonitor.monitoring.coreos.com/tasgate",
    ):
        assert f"{created} created (server dry run)" in result.stdout, result.stdout


def test_a_real_prometheus_answers_the_dashboard_and_evaluates_the_alerts(
    world: tuple[ControlPlane, Tasgate], tmp_path: Path
) -> None:
    """After the suite's traffic: a real Prometheus scrapes tasgate in live mode and the API server
    (as group system:monitoring), evaluates every alert without error and answers every dashboard
    query; every tasgate metric they name is on tasgate's live /metrics and, where it has series,
    stored by Prometheus under that name; the API server's webhook series they read are stored
    under their allow-listed names, for both of tasgate's webhooks (Kueue's are source-checked in
    tests/e2e/test_monitoring_overlay.py: no Kueue runs in this module)."""
    cp, tasgate = world
    request = urllib.request.Request(
        f"https://localhost:{tasgate.port}/mutate",
        data=b"not json",
        headers={"Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=str(tasgate.certs / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError):  # a 400: one tasgate_errors_total{kind="malformed"}
        urllib.request.urlopen(request, context=context, timeout=5)
    scrape_apiserver = apiserver_job(cp, tmp_path / "apiserver-scrape")
    targets = [f"127.0.0.1:{tasgate.metrics_port}"]
    with Prometheus(tmp_path, targets, overlay.rule_spec(), [scrape_apiserver]) as prometheus:

        def scraped_up(job: str) -> float:
            rows = prometheus.query(f'sum_over_time(up{{job="{job}"}}[1m])')
            return float(rows[0]["value"][1]) if rows else 0.0

        def evaluated() -> bool:
            return all(r.get("lastEvaluation", "").startswith("20") for r in prometheus.rules())

        prometheus.wait("three successful scrapes of tasgate", lambda: scraped_up("tasgate") >= 3, 30)
        prometheus.wait("two of the API server", lambda: scraped_up(APISERVER_JOB) >= 2, 30)
        prometheus.wait("every rule evaluated once", evaluated, 30)
        rules = prometheus.rules()
        assert len(rules) == sum(len(g["rules"]) for g in overlay.rule_spec()["groups"])
        assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
        for _, expr in overlay.dashboard_queries():
            prometheus.query(promql.with_grafana_variables(expr))  # an evaluation error raises
        external = external_metrics.by_sample_name()
        used = {n: w for n, w in overlay.queried_metrics().items() if n not in external}
        url = f"http://127.0.0.1:{tasgate.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            declared, sampled = overlay.scraped_names(r.read().decode())
        missing = overlay.missing_report(used, declared)
        assert not missing, f"queried but not on tasgate's /metrics in live mode:\n{missing}"
        # what tasgate has series of is what Prometheus stored, under the names the queries use
        unstored = overlay.missing_report(
            {n: w for n, w in used.items() if n in sampled}, prometheus.metric_names()
        )
        assert not unstored, f"on /metrics but not stored by Prometheus:\n{unstored}"
        stored = prometheus.metric_names(APISERVER_JOB)
        webhooks = 'name=~"(mutate|validate).tasgate.io"'
        for metric in external_metrics.APISERVER:
            assert metric.sample_names() <= stored, f"the API server stores no {metric.name}"
            first = min(metric.sample_names())
            rows = prometheus.query(f"count by (name, error_type) ({first}{{{webhooks}}})")
            seen = {(row["metric"]["name"], row["metric"].get("error_type")) for row in rows}
            if metric.name == "apiserver_admission_webhook_rejection_count":
                # the suite's denials: a /mutate denial ends the request, so only mutate rejects
                assert ("mutate.tasgate.io", "no_error") in seen, rows
            else:  # every admitted request called both webhooks
                assert {name for name, _ in seen} == set(external_metrics.WEBHOOK_NAMES), rows


def test_no_process_outlives_the_module(world: tuple[ControlPlane, Tasgate]) -> None:
    _, tasgate = world
    assert tasgate.proc.poll() is None, tasgate.log()[-2000:]
    assert os.path.exists(tasgate.certs / "ca.crt")
