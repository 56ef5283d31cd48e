"""Native v1.36.5 gang + topology scheduling (``make e2e-native``): one cluster for the whole table.

Not under tests/e2e, so ``make e2e`` does not run it. The marker is registered here because the
directory owns it (pyproject's ``--strict-markers`` catches typos). ``serve_live`` is how a module
runs ``tasgate serve`` live on that cluster, registered for a namespace of its own.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import ControlPlane, free_ports
from e2e.native import (
    K8S,
    NativeCluster,
    find_control_plane_binaries,
    find_native_binaries,
    native_control_plane,
)
from e2e.native_k8s import NativeK8s
from e2e.native_scenario import indexed_job
from e2e.native_world import NativeWorld, wait_until
from e2e.processes import stop_process
from e2e.serving import serve_argv
from tests.e2e_cluster.binaries import require
from webhook.serve import certs


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e_native: runs kube-apiserver, kube-controller-manager and the upstream kube-scheduler v1.36.5 "
        "with the native gang gates and kwok (`e2e/build-binaries.sh native`); fails, never skips, "
        "when they are missing",
    )


@pytest.fixture(scope="session")
def world() -> Iterator[NativeWorld]:
    """The control plane with the four gates, kcm, kwok and the scheduler, nodes and blockers built."""
    require(find_control_plane_binaries, find_native_binaries)  # $TASGATE_NATIVE_K8S's, v1.36.5 by default
    with native_control_plane() as cp, NativeCluster(cp) as cluster:
        built = NativeWorld(cp, cluster)
        built.build()
        cp.kubectl("create", "namespace", "table")
        yield built


class LiveTasgate:
    """``tasgate serve --kubeconfig`` (leader election on) with ``policy``, its audit on stdout,
    log on stderr; ``verdicts`` are those of ``namespace``, the one namespace it is registered for."""

    def __init__(self, cp: ControlPlane, workdir: Path, namespace: str, policy: Mapping[str, Any]) -> None:
        self.workdir, self.certs, self.namespace = workdir, workdir / "certs", namespace
        self.policy = workdir / "policy.yaml"
        self.policy.write_text(yaml.safe_dump(dict(policy)))
        self.port, self.metrics_port = free_ports(2)
        argv = serve_argv(cp.kubeconfig, self.port, self.metrics_port, self.certs, "0")
        self.out, self.err = workdir / "tasgate.out", workdir / "tasgate.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen([*argv, "--policy", str(self.policy)], stdout=out, stderr=err)

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"tasgate exited {self.proc.returncode}:\n{self.err.read_text()[-3000:]}")

    def ready(self) -> bool:
        self.alive()
        if not (self.certs / "ca.crt").exists():  # tasgate writes its certificates as it starts
            return False
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        try:
            with urllib.request.urlopen(
                f"https://localhost:{self.port}/readyz", context=context, timeout=5
            ) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def metrics(self) -> str:
        self.alive()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def verdicts(self) -> dict[tuple[str, str], tuple[str, bool]]:
        """(kind, name) -> (reason, allowed) of each request's final answer in its namespace."""
        out = {}
        for line in self.out.read_text().splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("namespace") == self.namespace and record.get("final") and not record.get("dryRun"):
                out[(record["kind"], record["name"])] = (record["reason"], record["allowed"])
        return out

    def dry_runs(self) -> list[tuple[str, str]]:
        found = []
        for line in self.out.read_text().splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("dryRun"):
                found.append((str(record.get("kind")), str(record.get("name"))))
        return found

    def stop(self) -> None:
        stop_process(self.proc, 20)


def webhooks(port: int, ca_bundle: str, namespace: str, k8s: NativeK8s = K8S) -> list[dict[str, Any]]:
    """tasgate's Mutating/ValidatingWebhookConfiguration for Jobs, Pods and the native kinds (in the
    versions ``k8s`` serves, as manifests/webhooks registers them) of the namespaces labelled
    ``tasgate.io/native-<namespace>: on``."""
    rules = [
        {"operations": ["CREATE"], "apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]},
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
        {
            "operations": ["CREATE"],
            "apiGroups": ["scheduling.k8s.io"],
            "apiVersions": [api.rsplit("/", 1)[1] for api in k8s.served_apis],
            "resources": ["workloads", "podgroups"],
        },
    ]
    common = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 10,
        "failurePolicy": "Fail",
        "rules": rules,
        "namespaceSelector": {"matchLabels": {selector(namespace): "on"}},
    }
    configs = []
    for kind, endpoint, extra in (
        ("MutatingWebhookConfiguration", "mutate", {"reinvocationPolicy": "IfNeeded"}),
        ("ValidatingWebhookConfiguration", "validate", {}),
    ):
        hook = {"clientConfig": {"url": f"https://localhost:{port}/{endpoint}", "caBundle": ca_bundle}}
        configs.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": f"tasgate-native-{namespace}"},
                "webhooks": [{"name": f"{endpoint}.tasgate.io", **hook, **common, **extra}],
            }
        )
    return configs


def selector(namespace: str) -> str:
    return f"tasgate.io/native-{namespace}"


@contextlib.contextmanager
def serve_live(
    world: NativeWorld, workdir: Path, namespace: str, policy: Mapping[str, Any]
) -> Iterator[LiveTasgate]:
    """A fresh ``namespace`` and tasgate serving it live (registered once its /readyz and the API
    server's dry-run call say so); the registration, tasgate and the namespace's objects go after."""
    cp = world.cp
    world.restore_blockers()
    cp.kubectl("create", "namespace", namespace)
    cp.kubectl("label", "namespace", namespace, f"{selector(namespace)}=on")
    tasgate = LiveTasgate(cp, workdir, namespace, policy)
    k8s = world.cluster.k8s
    configs = webhooks(tasgate.port, "", namespace, k8s)
    try:
        wait_until("tasgate to sync and report ready", tasgate.ready, 90)
        configs = webhooks(tasgate.port, certs.ca_bundle(tasgate.certs / "ca.crt"), namespace, k8s)
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(configs))
        probe = yaml.safe_dump(indexed_job("probe", namespace, 2, 1))

        def answering() -> bool:
            result = cp.kubectl("create", "--dry-run=server", "-f", "-", input=probe, check=False)
            return result.returncode == 0 and ("Job", "probe") in tasgate.dry_runs()

        wait_until("the API server to call tasgate", answering, 60)
        yield tasgate
    finally:
        for config in configs:
            cp.kubectl(
                "delete", config["kind"], config["metadata"]["name"], "--ignore-not-found", check=False
            )
        tasgate.stop()
        world.clear(namespace)
