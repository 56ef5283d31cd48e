"""`tasgate serve --kubeconfig` outside a pod, on a real API server without the Lease's namespace.

Outside a pod ``--lease-namespace`` defaults to tasgate-system, which this control plane does not
have: the Lease can never be created, so no replica writes PodGroups or Events. tasgate must say
so once (naming ``--lease-namespace`` and ``--no-leader-elect``), keep answering and stay ready
with a ``/readyz`` note, export ``tasgate_leader 0``, keep trying quietly, and lead as soon as
the namespace exists. The tries are counted in the API server's audit log, not by waiting.
"""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e.controlplane import ControlPlane, free_ports
from e2e.serving import TASGATE

pytestmark = pytest.mark.e2e

NAMESPACE = "tasgate-system"  # the default --lease-namespace outside a pod


class Serving:
    """`tasgate serve --kubeconfig` with no POD_NAMESPACE: the default Lease namespace."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        self.port, self.metrics_port = free_ports(2)
        self.certs, self.log_path = workdir / "certs", workdir / "tasgate.err"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TASGATE_", "POD_"))}
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        argv = [str(TASGATE), "serve", "--kubeconfig", str(cp.kubeconfig), "--port", str(self.port),
                "--metrics-port", str(self.metrics_port), "--dev-cert-dir", str(self.certs)]  # fmt: skip
        with self.log_path.open("wb") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def readyz(self) -> tuple[int, str]:
        if not (self.certs / "ca.crt").is_file():
            return 0, "no certificate yet"
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        url = f"https://localhost:{self.port}/readyz"
        try:
            with urllib.request.urlopen(url, context=context, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def leader_gauge(self) -> float | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                found = re.search(r"^tasgate_leader (\S+)$", r.read().decode(), re.M)
        except OSError:
            return None
        return float(found.group(1)) if found else None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def wait_for(what: str, check: Callable[[], bool], serving: Serving, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert serving.proc.poll() is None, f"tasgate exited:\n{serving.log()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{serving.log()[-3000:]}"
        time.sleep(0.1)


def lease_creates(cp: ControlPlane) -> int:
    """The Lease creations the API server audited in the namespace (each one a 404 while it is missing)."""
    return sum(
        1
        for event in cp.audit_events()
        if event.get("verb") == "create"
        and event.get("stage") == "ResponseComplete"
        and (event.get("objectRef") or {}).get("resource") == "leases"
        and (event.get("objectRef") or {}).get("namespace") == NAMESPACE
    )


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane() as running:
        yield running


def test_a_missing_lease_namespace_is_one_line_a_readyz_note_and_leader_zero(
    cp: ControlPlane, tmp_path: Path
) -> None:
    assert cp.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0, "the premise"
    serving = Serving(cp, tmp_path)
    try:
        wait_for("/readyz 200", lambda: serving.readyz()[0] == 200, serving)
        wait_for("three tries to create the Lease", lambda: lease_creates(cp) >= 3, serving)
        log = serving.log()
        said = [line for line in log.splitlines() if "not leading" in line]
        assert len(said) == 1, said
        assert "--lease-namespace" in said[0] and "--no-leader-elect" in said[0] and " WARNING " in said[0]
        assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
        status, text = serving.readyz()
        assert status == 200 and "not leading" in text and "--lease-namespace" in text, text
        assert serving.leader_gauge() == 0
        # The namespace appears (as `helm install --create-namespace` would make it): it leads.
        cp.kubectl("create", "namespace", NAMESPACE)
        wait_for("tasgate_leader 1", lambda: serving.leader_gauge() == 1, serving)
        assert serving.readyz() == (200, "ok")
        log = serving.log()
        assert len([line for line in log.splitlines() if "can be taken again" in line]) == 1
        assert len([line for line in log.splitlines() if "not leading" in line]) == 1
        assert "Traceback" not in log
    finally:
        serving.stop()
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
