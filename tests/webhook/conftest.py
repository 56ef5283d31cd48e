"""Shared helpers for the decision-path tests: manifests, small clusters, policies, the CLI.

Manifests live in ``tests/webhook/manifests`` (adapted from ../shared/examples and shaped by the
CRDs in ../shared/crds). Clusters are the embedded sample (2 blocks x 4 racks x 4 hosts of 8-GPU
nodes) or small ones built from dicts with ``node``/``kueue_objects``.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml

from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.policy_text import parse_policy
from webhook.decide.verdicts import Decision, PodSetVerdict, Review
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.state.cluster import ClusterState, build_state

MANIFESTS = Path(__file__).resolve().parent / "manifests"
REPO = Path(__file__).resolve().parents[2]
TASGATE = REPO / ".venv" / "bin" / "tasgate"

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
COSCHED_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
LEADER_WORKERS = "tasgate-leader-workers"

GI = 2**30
MI = 2**20


# --- manifests -----------------------------------------------------------------------------------


def manifests(name: str) -> list[dict[str, Any]]:
    """Every document of a test manifest file."""
    docs = [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d is not None]
    assert docs and all(isinstance(d, dict) for d in docs)
    return docs


def example_review(uid: str, **labels: str) -> bytes:
    """An AdmissionReview body creating ``examples/job-rack.yaml`` (with extra labels)."""
    obj = yaml.safe_load((REPO / "examples" / "job-rack.yaml").read_text())
    obj["metadata"].setdefault("labels", {}).update(labels)
    return job_review(obj, uid, "default", "u")


def job_review(obj: Mapping[str, Any], uid: str, namespace: str, user: str) -> bytes:
    """An AdmissionReview body creating the batch/v1 Job ``obj`` in ``namespace``."""
    request = {
        "uid": uid,
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": "CREATE",
        "namespace": namespace,
        "name": obj["metadata"]["name"],
        "object": obj,
        "userInfo": {"username": user},
    }
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def manifest(name: str) -> dict[str, Any]:
    """The single (first) document of a test manifest file; a fresh copy each time."""
    return manifests(name)[0]


def job(
    pods: int,
    gpus: int = 8,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    queue: str | None = "tas-user-queue",
    namespace: str = "default",
    name: str = "train",
    **pod_spec: Any,
) -> dict[str, Any]:
    """A batch/v1 Job of ``pods`` pods asking ``gpus`` GPUs (and 4 cpu, 32Gi) each."""
    requests: dict[str, Any] = {"cpu": "4", "memory": "32Gi"}
    if gpus:
        requests[GPU] = str(gpus)
    template: dict[str, Any] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "train",
                    "image": "registry.example.com/train:1",
                    "resources": {"requests": requests},
                }
            ],
            **pod_spec,
        }
    }
    meta: dict[str, Any] = {}
    if annotations:
        meta["annotations"] = dict(annotations)
    if labels:
        meta["labels"] = dict(labels)
    if meta:
        template["metadata"] = meta
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if queue:
        metadata["labels"] = {QUEUE_LABEL: queue}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"parallelism": pods, "completions": pods, "template": template},
    }


def team_job(pods: int, **kwargs: Any) -> dict[str, Any]:
    """A ``job`` in namespace "team" on LocalQueue "q" (the queue ``kueue_objects`` makes)."""
    return job(pods, queue="q", namespace="team", **kwargs)


# --- clusters ------------------------------------------------------------------------------------


def node(
    name: str,
    labels: Mapping[str, str],
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    ready: bool = True,
    cordoned: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A v1 Node as `kubectl get nodes -o yaml` prints it (the parts tasgate reads)."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable[GPU] = str(gpus)
    spec: dict[str, Any] = {}
    if cordoned:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, **labels}},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def running_pod(
    name: str, node_name: str | None, gpus: int, phase: str = "Running", cpu: str = "1"
) -> dict[str, Any]:
    """A v1 Pod using ``gpus`` GPUs on ``node_name`` (unbound when None)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, GPU: str(gpus)}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": phase},
    }


def kueue_objects(
    levels: Sequence[str] = ("block", "rack", HOST),
    flavors: Mapping[str, Mapping[str, str]] | None = None,
    topology: str = "topo",
    queue: str = "q",
    namespace: str = "team",
    cluster_queue: str = "cq",
) -> list[dict[str, Any]]:
    """Topology + ResourceFlavors (name -> nodeLabels, in ClusterQueue order) + CQ + LocalQueue."""
    flavors = flavors if flavors is not None else {"gpu": {"pool": "gpu"}}
    return [
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": topology},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        },
        *[
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": {"nodeLabels": dict(labels), "topologyName": topology},
            }
            for name, labels in flavors.items()
        ],
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", GPU],
                        "flavors": [{"name": name, "resources": []} for name in flavors],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        },
    ]


def namespace_object(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def rack_cluster(
    racks: int = 2, hosts: int = 2, pool: str = "gpu", prefix: str = "n"
) -> list[dict[str, Any]]:
    """One block of ``racks`` racks of ``hosts`` 8-GPU nodes, labelled pool=<pool>."""
    return [
        node(f"{prefix}{r}-{h}", {"block": f"{prefix}b", "rack": f"{prefix}r{r}", "pool": pool})
        for r in range(1, racks + 1)
        for h in range(1, hosts + 1)
    ]


def sample_without(*drop: tuple[str, str]) -> ClusterState:
    """The sample cluster minus the (kind, name) objects given."""
    keep = [o for o in sample_objects() if (o["kind"], o["metadata"]["name"]) not in drop]
    return build_state(keep)


# --- policies ------------------------------------------------------------------------------------


def policy(rules: Sequence[Mapping[str, Any]], source: str = "test policy", **spec: Any) -> Policy:
    """An AdmissionPolicy parsed from YAML text, as an operator would write it."""
    doc = {
        "apiVersion": "tasgate.io/v1alpha1",
        "kind": "AdmissionPolicy",
        "metadata": {"name": "test"},
        "spec": {"defaultTopology": {"name": "default"}, **spec, "rules": [dict(r) for r in rules]},
    }
    return parse_policy(yaml.safe_dump(doc, sort_keys=False), source)


def rule(
    mode: str = "required",
    level: str = "tightest",
    backend: str = "none",
    match: Mapping[str, Any] | None = None,
    name: str = "r",
    **inject: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "match": dict(match or {}),
        "inject": {"mode": mode, "level": level, **inject},
        "gang": {"backend": backend},
    }


# --- decisions -----------------------------------------------------------------------------------


def judge(
    obj: Mapping[str, Any], state: ClusterState, pol: Policy, namespace: str = "default", uid: str = ""
) -> Decision:
    return decide(Review(obj, namespace=namespace, uid=uid), state, pol)


def pod_set(d: Decision, name: str) -> PodSetVerdict:
    found = [v for v in d.pod_sets if v.name == name]
    assert len(found) == 1, [v.name for v in d.pod_sets]
    return found[0]


def shape(d: Decision) -> list[tuple[str, int]]:
    return [(v.name, v.count) for v in d.pod_sets]


def hosts(v: PodSetVerdict, when: str = "never") -> list[tuple[str, int]]:
    """(hostname, pods) of a placement that fits (sample hosts are named b<B>-r<R>-h<H>)."""
    placement = v.never if when == "never" else v.now
    assert placement is not None and placement.fits and placement.assignment is not None
    assert placement.assignment.levels == (HOST,)
    return [(d.values[0], d.count) for d in placement.assignment.domains]


def racks_of(assignment: Iterable[tuple[str, int]]) -> set[str]:
    return {host.rsplit("-", 1)[0] for host, _ in assignment}


def blocks_of(assignment: Iterable[tuple[str, int]]) -> set[str]:
    return {host.split("-", 1)[0] for host, _ in assignment}


def apply_patch(obj: Mapping[str, Any], d: Decision) -> dict[str, Any]:
    """The object as the API server stores it after the webhook's JSON Patch (RFC 6902)."""
    patched: dict[str, Any] = jsonpatch.JsonPatch(list(d.patch)).apply(copy.deepcopy(dict(obj)))
    return patched


def template_meta(obj: Mapping[str, Any], path: Sequence[str | int]) -> Mapping[str, Any]:
    node_: Any = obj
    for part in path:
        node_ = node_[part]
    meta: Mapping[str, Any] = node_.get("metadata") or {}
    return meta


# --- the CLI -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def tasgate(*args: str, stdin: str | None = None, cwd: Path | None = None) -> Run:
    """Run the installed console script (or the module, when the script is not there)."""
    command = [str(TASGATE)] if TASGATE.exists() else [sys.executable, "-m", "webhook.cli.main"]
    done = subprocess.run(
        [*command, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or REPO,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sample_state() -> ClusterState:
    return build_state(sample_objects())


@pytest.fixture(scope="session")
def trainer_state() -> ClusterState:
    """The sample cluster plus the torch-distributed ClusterTrainingRuntime."""
    return build_state([*sample_objects(), *manifests("clustertrainingruntime.yaml")])


@pytest.fixture(scope="session")
def default_policy() -> Policy:
    return load_policy("default")


@pytest.fixture(scope="session")
def none_policy() -> Policy:
    return load_policy("none")
