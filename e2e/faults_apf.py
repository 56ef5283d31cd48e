"""429s from the API server, made by API Priority and Fairness, and the user tasgate runs as.

APF exempts ``system:masters`` (the harness admin), so a tasgate that is to see 429s runs as the
user a cluster gives it: a client certificate whose CN is its ServiceAccount's user name
(``system:serviceaccount:tasgate-system:tasgate``) with a token's groups, authorised by exactly the
RBAC of manifests/base/rbac.yaml (its ServiceAccount placed in tasgate's namespace, as the
kustomization places it). No cluster-admin, so a permission the manifests lack shows up as a
failure here too.

The throttle is FAULTS.md's recipe: a ``FlowSchema`` sending tasgate's PodGroup and Event creates
to a ``PriorityLevelConfiguration`` of type ``Limited`` with ``nominalConcurrencyShares: 1``,
nothing lent or borrowed, and ``limitResponse: Reject`` (no queueing: a request that finds its
seats taken is answered 429 at once, with Retry-After). One share of the API server's ~600 seats
is about 3 seats; tasgate writes one request at a time, so on its own it would never meet the
limit. A *noise* user in the same FlowSchema keeps the seats taken (dry-run Event creates from a
few threads: nothing is stored), the way other tenants' writes would in a busy cluster.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import ControlPlane
from e2e.faults_world import Api
from e2e.kueue_identity import Identity
from e2e.pki import write_kubeconfig
from webhook.serve import certs

ROOT = Path(__file__).resolve().parents[1]
RBAC = ROOT / "manifests" / "base" / "rbac.yaml"
NAMESPACED = frozenset({"ServiceAccount", "Role", "RoleBinding"})
FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"
LEVEL, SCHEMA = "faults-tasgate-limited", "faults-tasgate-writes"
NOISE_USER = "faults-apf-noise"


def tasgate_identity(cp: ControlPlane, directory: Path, namespace: str) -> tuple[Identity, Path]:
    """Apply manifests/base/rbac.yaml for ``namespace`` and mint tasgate's client certificate and
    kubeconfig: its identity and the kubeconfig path."""
    documents = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    accounts = [d for d in documents if d["kind"] == "ServiceAccount"]
    assert len(accounts) == 1, f"{RBAC} has {len(accounts)} ServiceAccounts"
    for doc in documents:
        if doc["kind"] in NAMESPACED:
            doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    identity = Identity.of_service_account(namespace, str(accounts[0]["metadata"]["name"]))
    return identity, _kubeconfig(cp, directory, identity.username, list(identity.groups), "tasgate")


def noise_identity(cp: ControlPlane, directory: Path) -> tuple[Path, Path]:
    """A user allowed to do anything (so its requests do real work), not in system:masters (so
    APF classifies it): its client certificate and key."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NOISE_USER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NOISE_USER}],
    }
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(binding))
    directory.mkdir(parents=True, exist_ok=True)
    return certs.client_cert(directory, cp.ca, NOISE_USER, ["system:authenticated"], name="noise", days=2)


def _kubeconfig(cp: ControlPlane, directory: Path, user: str, groups: list[str], name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = certs.client_cert(directory, cp.ca, user, groups, name=name, days=2)
    path = directory / f"{name}.kubeconfig"
    write_kubeconfig(path, cp.server, cp.ca_path, cert, key)
    return path


def apf_objects(users: Sequence[str]) -> list[dict[str, Any]]:
    """The Limited/Reject priority level and the FlowSchema sending ``users``' PodGroup and Event
    creates to it (matched before every default schema: precedence 100)."""
    level = {
        "apiVersion": FLOWCONTROL,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": LEVEL},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    schema = {
        "apiVersion": FLOWCONTROL,
        "kind": "FlowSchema",
        "metadata": {"name": SCHEMA},
        "spec": {
            "priorityLevelConfiguration": {"name": LEVEL},
            "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": u}} for u in users],
                    "resourceRules": [
                        {
                            "verbs": ["create"],
                            "apiGroups": ["", "events.k8s.io", "scheduling.x-k8s.io"],
                            "resources": ["events", "podgroups"],
                            "namespaces": ["*"],
                        }
                    ],
                }
            ],
        },
    }
    return [level, schema]


def install_apf(cp: ControlPlane, users: Sequence[str]) -> None:
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(apf_objects(users)))


def remove_apf(cp: ControlPlane) -> None:
    cp.kubectl("delete", "flowschema", SCHEMA, "--ignore-not-found")
    cp.kubectl("delete", "prioritylevelconfiguration", LEVEL, "--ignore-not-found")


def noise_event(namespace: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"noise.{i:x}", "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "faults.tasgate.io/noise",
        "reportingInstance": "noise",
        "action": "Noise",
        "reason": "Noise",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace, "name": "noise"},
    }


class Noise:
    """``threads`` clients as the noise user, each creating dry-run Events back to back, for at most
    ``limit_s`` seconds: the throttled level's seats stay taken. Counts what they were answered."""

    def __init__(self, cp: ControlPlane, cert: tuple[Path, Path], namespace: str, threads: int = 6,
                 limit_s: float = 60.0) -> None:  # fmt: skip
        self.cp, self.cert, self.namespace, self.limit_s = cp, cert, namespace, limit_s
        self.answers: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(threads)]

    def __enter__(self) -> Noise:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _run(self, k: int) -> None:
        api = Api(self.cp, self.cert, timeout=10)
        path = f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events?dryRun=All"
        deadline, i = time.monotonic() + self.limit_s, k << 24
        while not self._stop.is_set() and time.monotonic() < deadline:
            i += 1
            try:
                status = api.call("POST", path, noise_event(self.namespace, i)).status
            except OSError:
                status = 0
            with self._lock:
                self.answers[status] = self.answers.get(status, 0) + 1
        api.close()


def throttled(cp: ControlPlane, user: str) -> dict[str, int]:
    """tasgate's requests the API server answered 429, by resource, from its audit log (audit runs
    outside APF, so rejected requests are logged too)."""
    found: dict[str, int] = {}
    needle = f'"username":"{user}"'
    with cp.audit_log.open() as log:
        for line in log:
            if needle not in line or '"code":429' not in line:
                continue
            event = json.loads(line)
            if (event.get("responseStatus") or {}).get("code") == 429:
                resource = str((event.get("objectRef") or {}).get("resource"))
                found[resource] = found.get(resource, 0) + 1
    return found
