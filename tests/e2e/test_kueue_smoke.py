"""Smoke test of the real Kueue manager (e2e/kueue.py) on the e2e control plane.

One control plane and one Kueue for the module: Kueue's CRDs from its module source, the
jobset/kubeflow/LWS CRDs, 8 Ready 8-GPU nodes in 2 racks, a Topology, a TAS ResourceFlavor, a
ClusterQueue and a LocalQueue. It checks that Kueue admits a rack-required Job with a topology
assignment and unsuspends it, and that its LWS webhook marks the worker template with the pod index
offset. Missing binaries (control plane or Kueue) FAIL with the build instructions, never skip.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.kueue import KUEUE_BIN_ENV, WEBHOOK_CONFIGURATION_NAMES, Kueue, find_kueue, pinned_kueue_version
from e2e.kueue_admission import wait_admitted, wait_for, workload_admission
from e2e.kueue_scenario import (
    FLAVOR,
    POD_INDEX_OFFSET,
    RACK,
    add_gpu_nodes,
    job,
    leader_worker_set,
    setup_queues,
)
from e2e.nodes import HOSTNAME_LABEL

pytestmark = pytest.mark.e2e

NS = "kueue-smoke"
T = TypeVar("T")


def _or_fail(find: Callable[[], T]) -> T:
    """The harness's message as a plain failure (no traceback chain: the message says what to do)."""
    try:
        return find()
    except BinariesMissingError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def test_kueue_binary_is_built() -> None:
    """Fails with the harness's instructions (run e2e/build-binaries.sh) when Kueue is not built."""
    assert _or_fail(find_kueue).is_file()


def test_missing_kueue_binary_is_an_error_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KUEUE_BIN_ENV, str(tmp_path))
    with pytest.raises(BinariesMissingError, match=r"build-binaries\.sh"):
        find_kueue()


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[ControlPlane, Kueue]]:
    binaries, kueue_binary = _or_fail(find_binaries), _or_fail(find_kueue)
    with ControlPlane(binaries=binaries) as cp, Kueue(cp, binary=kueue_binary) as kueue:
        add_gpu_nodes(cp, blocks=1, racks_per_block=2, per_rack=4)
        setup_queues(cp, NS)
        yield cp, kueue


def create(cp: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj``; the object as the API server stored it (after the mutating webhooks)."""
    stored: dict[str, Any] = json.loads(
        cp.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj)).stdout
    )
    return stored


def test_kueue_runs_the_pinned_version_with_the_loopback_webhooks(world: tuple[ControlPlane, Kueue]) -> None:
    cp, kueue = world
    assert kueue.running()
    log = kueue.log_path.read_text()
    assert re.search(rf'"gitVersion":\s*"{re.escape(pinned_kueue_version())}"', log), log[-2000:]
    for kind, name in WEBHOOK_CONFIGURATION_NAMES.items():
        stored = cp.kubectl_json("get", kind.lower(), name)
        hooks = stored["webhooks"]
        assert hooks, name
        for hook in hooks:
            assert hook["clientConfig"]["url"].startswith(f"https://127.0.0.1:{kueue.webhook_port}/"), hook
            assert "service" not in hook["clientConfig"]
    job_hook = next(
        h
        for h in cp.kubectl_json(
            "get", "mutatingwebhookconfiguration", "kueue-mutating-webhook-configuration"
        )["webhooks"]
        if h["name"] == "mjob.kb.io"
    )
    excluded = job_hook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert sorted(excluded) == ["kube-system", "kueue-system"]


def test_rack_required_job_is_admitted_with_a_topology_assignment(world: tuple[ControlPlane, Kueue]) -> None:
    cp, _ = world
    stored = create(cp, job("rack-job", NS, pods=4))
    assert stored["spec"]["suspend"] is True

    (workload,) = wait_admitted(cp, NS, "Job", "rack-job")
    assert workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    admission = workload_admission(workload)
    assert admission is not None and set(admission) == {"main"}
    main = admission["main"]
    assert main.count == 4 and main.flavor == FLAVOR
    assert sum(count for _, count in main.domains) == 4
    hosts = main.pods_at(HOSTNAME_LABEL)
    assert all(count == 1 for count in hosts.values()) and len(hosts) == 4, hosts
    racks = {cp.kubectl_json("get", "node", host)["metadata"]["labels"][RACK] for host in hosts}
    assert len(racks) == 1, f"rack-required job spread over racks {racks}: {hosts}"

    def unsuspended() -> bool:
        return cp.kubectl_json("get", "job", "rack-job", "-n", NS)["spec"].get("suspend") is False

    wait_for("Kueue to unsuspend the Job", unsuspended, 30)
    template = cp.kubectl_json("get", "job", "rack-job", "-n", NS)["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]
    assert template["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert {"name": "kueue.x-k8s.io/topology"} in template["spec"]["schedulingGates"]


def test_lws_worker_template_gets_the_pod_index_offset(world: tuple[ControlPlane, Kueue]) -> None:
    cp, _ = world
    stored = create(cp, leader_worker_set("lws", NS, size=3))
    templates = stored["spec"]["leaderWorkerTemplate"]
    worker = templates["workerTemplate"]["metadata"]["annotations"]
    leader = templates["leaderTemplate"]["metadata"]["annotations"]
    assert worker[POD_INDEX_OFFSET] == "1"
    assert POD_INDEX_OFFSET not in leader
    assert worker["kueue.x-k8s.io/pod-group-serving"] == "true"

    (workload,) = wait_admitted(cp, NS, "LeaderWorkerSet", "lws")
    admission = workload_admission(workload)
    assert admission is not None
    assert {name: a.count for name, a in admission.items()} == {"leader": 1, "worker": 2}
    assert all(a.domains for a in admission.values()), admission


def test_kueue_acts_as_its_service_account_within_its_own_rbac(world: tuple[ControlPlane, Kueue]) -> None:
    """Kueue's writes carry its service account's name (what tasgate's matchConditions look for),
    and its release RBAC was enough for everything above: nothing it asked for was forbidden."""
    cp, kueue = world
    user = kueue.identity.username
    assert user == "system:serviceaccount:kueue-system:kueue-controller-manager"
    by_kueue = [e for e in cp.audit_events() if str(e.get("userAgent", "")).startswith("kueue/")]
    assert {e["user"]["username"] for e in by_kueue} == {user}
    assert {"system:serviceaccounts", "system:serviceaccounts:kueue-system"} <= set(
        by_kueue[0]["user"]["groups"]
    )
    writes = [e for e in by_kueue if e.get("verb") == "patch" and e["objectRef"].get("resource") == "jobs"]
    assert writes, "Kueue's start PATCH of rack-job is in the audit log"
    refused = [
        f"{e['verb']} {e['requestURI']}"
        for e in by_kueue
        if (e.get("responseStatus") or {}).get("code") == 403
    ]
    assert refused == [], refused
    assert "forbidden" not in kueue.log_path.read_text().lower()
    can = cp.kubectl("auth", "can-i", "create", "clusterrolebindings", f"--as={user}", check=False)
    assert can.stdout.strip() == "no", "Kueue is not a cluster admin: only its own roles bind it"


def test_stop_deletes_the_webhooks_before_kueue_exits(world: tuple[ControlPlane, Kueue]) -> None:
    """Last: with the webhook configurations gone, creates work again once Kueue is down."""
    cp, kueue = world
    kueue.stop()
    assert not kueue.running()
    for kind, name in WEBHOOK_CONFIGURATION_NAMES.items():
        assert cp.kubectl("get", kind.lower(), name, check=False).returncode != 0
    result = cp.kubectl("create", "-f", "-", input=yaml.safe_dump(job("after-stop", NS, pods=1)), check=False)
    assert result.returncode == 0, result.stderr
