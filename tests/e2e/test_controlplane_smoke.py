"""Smoke test of the e2e harness: the real control plane starts, stores what tasgate reads, restarts.

Everything later e2e tests rely on is exercised once here, so a broken harness (binaries, flags of
a new Kubernetes version, certificates, audit policy) fails in this file with a plain message
instead of inside a webhook test. The binaries must exist: a missing build is a FAILURE, never a
skip, because a skipped e2e suite looks exactly like a passing one in CI summaries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.controlplane import Binaries, BinariesMissingError, ControlPlane, find_binaries, pinned_versions
from e2e.shared import shared_dir

pytestmark = pytest.mark.e2e

CRDS = shared_dir() / "crds"
NODE = "e2e-node-1"
TOPOLOGY_LEVELS = [
    "cloud.provider.com/topology-block",
    "cloud.provider.com/topology-rack",
    "kubernetes.io/hostname",
]
ALLOCATABLE = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}


def _binaries_or_fail() -> Binaries:
    """The harness's message as a plain failure (no traceback chain: the message says what to do)."""
    try:
        return find_binaries()
    except BinariesMissingError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def test_binaries_are_built() -> None:
    """Fails with the harness's instructions (run e2e/build-binaries.sh) when the build is missing."""
    binaries = _binaries_or_fail()
    assert binaries.kube_apiserver.is_file() and binaries.kubectl.is_file() and binaries.etcd.is_file()


def test_missing_binaries_are_an_error_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASGATE_E2E_BIN", str(tmp_path))
    with pytest.raises(BinariesMissingError, match=r"build-binaries\.sh"):
        ControlPlane()


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(binaries=_binaries_or_fail()) as plane:
        yield plane


def test_kubectl_and_server_report_the_pinned_version(cp: ControlPlane) -> None:
    kube_version, _ = pinned_versions()
    version = json.loads(cp.kubectl("version", "-o", "json").stdout)
    assert version["clientVersion"]["gitVersion"] == kube_version
    assert version["serverVersion"]["gitVersion"] == kube_version
    assert cp.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_crds_install_and_become_established(cp: ControlPlane) -> None:
    files = sorted(CRDS.glob("*.yaml"))
    assert files, f"no CRDs in {CRDS}"
    # One kubectl run for all files and one wait for all CRDs: each kubectl start costs ~0.5 s.
    # `-o name` reports what was applied, which spares parsing 9 MB of YAML in Python (~7 s).
    applied = cp.kubectl("apply", "--server-side", "-o", "name", *(a for f in files for a in ("-f", str(f))))
    crds = applied.stdout.split()
    assert len(crds) == len(files), applied.stdout
    cp.kubectl("wait", "--for", "condition=established", "--timeout=60s", *crds)
    names = {crd.rpartition("/")[2] for crd in crds}
    stored = {crd["metadata"]["name"]: crd for crd in cp.kubectl_json("get", "crd")["items"]}
    for name in names:
        conditions = {c["type"]: c["status"] for c in stored[name]["status"]["conditions"]}
        assert conditions.get("Established") == "True", (name, conditions)


def test_node_pod_and_topology_read_back(cp: ControlPlane) -> None:
    namespace = "e2e-smoke"
    cp.kubectl("create", "namespace", namespace)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"kubernetes.io/hostname": NODE, TOPOLOGY_LEVELS[0]: "b1", TOPOLOGY_LEVELS[1]: "r1"},
        },
    }
    cp.kubectl("create", "-f", "-", input=json.dumps(node))
    # status is a subresource: create ignores it, so capacity/allocatable go in with a status patch.
    status = {"status": {"capacity": ALLOCATABLE, "allocatable": ALLOCATABLE}}
    cp.kubectl("patch", "node", NODE, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "usage", "namespace": namespace},
        "spec": {
            "nodeName": NODE,  # no scheduler runs: bind directly, as tasgate's usage accounting expects
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "2", "nvidia.com/gpu": "4"},
                        "limits": {"nvidia.com/gpu": "4"},
                    },
                }
            ],
        },
    }
    cp.kubectl("create", "-f", "-", input=json.dumps(pod))
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "e2e-topology"},
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }
    cp.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(topology))

    got_node = cp.kubectl_json("get", "node", NODE)
    assert got_node["metadata"]["labels"][TOPOLOGY_LEVELS[1]] == "r1"
    assert got_node["status"]["allocatable"] == ALLOCATABLE
    got_pod = cp.kubectl_json("get", "pod", "usage", "-n", namespace)
    assert got_pod["spec"]["nodeName"] == NODE
    assert got_pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "4"
    got_topology = cp.kubectl_json("get", "topologies.v1beta2.kueue.x-k8s.io", "e2e-topology")
    assert [level["nodeLabel"] for level in got_topology["spec"]["levels"]] == TOPOLOGY_LEVELS


def test_audit_log_has_json_events(cp: ControlPlane) -> None:
    events = cp.audit_events()
    assert events, f"audit log {cp.audit_log} is empty"
    assert all(event.get("kind") == "Event" and event["apiVersion"] == "audit.k8s.io/v1" for event in events)
    pod_creates = [
        e
        for e in events
        if e["verb"] == "create"
        and e.get("objectRef", {}).get("resource") == "pods"
        and e["stage"] == "ResponseComplete"
    ]
    # Writes are logged at Request level, body included: what a webhook test asserts on.
    assert pod_creates and pod_creates[-1]["level"] == "Request" and "requestObject" in pod_creates[-1]
    assert pod_creates[-1]["user"]["username"] == "admin"


def test_restart_apiserver_serves_again_with_data_kept(cp: ControlPlane) -> None:
    port = cp.apiserver_port
    cp.restart_apiserver()
    assert cp.apiserver_port == port and cp.running()
    assert cp.get_raw("/readyz")[0] == 200
    assert cp.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    assert cp.kubectl_json("get", "node", NODE)["status"]["allocatable"] == ALLOCATABLE  # etcd kept it
    assert "start #2" in cp.apiserver_log.read_text()
