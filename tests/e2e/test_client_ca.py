"""Who may call: tasgate with ``--client-ca-file`` behind a real kube-apiserver.

The API server presents a client certificate to the webhook host ``localhost:<port>`` (an
AdmissionConfiguration with a WebhookAdmissionConfiguration kubeconfig, see e2e/webhook_auth.py),
so a Job created through it is judged. The same tasgate dialled as ``127.0.0.1:<port>``, a host
the API server holds no certificate for, is refused; and so is a direct POST without a client
certificate or with one from another CA (the control plane's own admin certificate).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import ControlPlane, free_ports
from e2e.serving import serve_argv
from tests.webhook.conftest import example_review
from webhook.serve import certs

pytestmark = pytest.mark.e2e

NS = "client-ca"
WEBHOOK = "validate.tasgate.io"


@dataclass
class Served:
    cp: ControlPlane
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    workdir: Path

    def audit(self) -> list[dict[str, Any]]:
        text = (self.workdir / "tasgate.out").read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def post(self, pair: tuple[Path, Path] | None) -> int:
        """POST an AdmissionReview straight to /validate: the HTTP status, or an exception."""
        context = ssl.create_default_context(cafile=str(self.workdir / "certs" / "ca.crt"))
        if pair is not None:
            context.load_cert_chain(*pair)
        conn = http.client.HTTPSConnection("localhost", self.port, context=context, timeout=10)
        try:
            conn.request("POST", "/validate?timeout=10s", body=example_review("direct"))
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(0.25)


def ready(metrics_port: int) -> bool:
    """/readyz on the metrics port: plain HTTP, which asks for no client certificate."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def webhooks(port: int, ca_bundle: str) -> str:
    """One validating webhook per way of dialling tasgate, each picking Jobs by a label."""

    def hook(name: str, host: str, caller: str) -> dict[str, Any]:
        return {
            "name": name,
            "clientConfig": {"url": f"https://{host}:{port}/validate", "caBundle": ca_bundle},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "objectSelector": {"matchLabels": {"caller": caller}},
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": ["batch"],
                    "apiVersions": ["v1"],
                    "resources": ["jobs"],
                }
            ],
        }

    return yaml.safe_dump(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "tasgate-client-ca"},
            "webhooks": [
                hook(WEBHOOK, "localhost", "signed"),  # the kubeconfig has a user for localhost:<port>
                hook("anonymous.tasgate.io", "127.0.0.1", "anonymous"),  # and none for this host
            ],
        }
    )


def job(name: str, caller: str) -> str:
    container = {"name": "c", "image": "trainer"}
    return yaml.safe_dump(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"caller": caller}},
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        }
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("client-ca")
    port, metrics_port = free_ports(2)
    with ControlPlane(webhook_client_hosts=[f"localhost:{port}"]) as cp:
        argv = serve_argv(cp.kubeconfig, port, metrics_port, workdir / "certs", "60")
        with (workdir / "tasgate.out").open("wb") as out, (workdir / "tasgate.err").open("wb") as err:
            proc = subprocess.Popen(
                [*argv, "--client-ca-file", str(cp.webhook_client.ca)], stdout=out, stderr=err
            )
        try:
            wait_for("tasgate to report ready", lambda: proc.poll() is None and ready(metrics_port))
            cp.kubectl("create", "namespace", NS)
            ca_bundle = certs.ca_bundle(workdir / "certs" / "ca.crt")
            cp.kubectl("apply", "-f", "-", input=webhooks(port, ca_bundle))
            yield Served(cp, proc, port, metrics_port, workdir)
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_a_job_created_through_the_api_server_is_judged(served: Served) -> None:
    cp = served.cp

    def created() -> bool:  # the webhook configuration takes a moment to reach the API server's cache
        result = cp.kubectl("create", "-f", "-", input=job("signed", "signed"), check=False)
        assert "anonymous.tasgate.io" not in result.stderr, result.stderr
        return result.returncode == 0

    wait_for("the API server to create a Job through tasgate", created)
    signed = lambda: [a for a in served.audit() if a["name"] == "signed" and a["endpoint"] == "validate"]  # noqa: E731
    wait_for("tasgate's audit line of the signed Job (written after its answer)", lambda: bool(signed()), 10)
    assert signed()[-1]["allowed"] is True, served.audit()
    events = [
        e
        for e in cp.audit_events()
        if e.get("objectRef", {}).get("name") == "signed" and e.get("verb") == "create"
    ]
    assert any(f"{WEBHOOK}/decision" in e.get("annotations", {}) for e in events), events


def test_the_same_tasgate_dialled_without_a_certificate_is_refused(served: Served) -> None:
    result = served.cp.kubectl("create", "-f", "-", input=job("anonymous", "anonymous"), check=False)
    assert result.returncode != 0
    assert 'failed calling webhook "anonymous.tasgate.io"' in result.stderr, result.stderr
    assert not [a for a in served.audit() if a["name"] == "anonymous"], "tasgate never saw the request"


def test_a_direct_post_needs_a_certificate_from_the_client_ca(served: Served) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        served.post(None)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        served.post(served.cp.admin_cert)  # valid for the API server, but from the cluster CA
    auth = served.cp.webhook_client
    assert served.post((auth.cert, auth.key)) == 200  # the API server's own pair: a control
    wait_for("the control's audit line", lambda: any(a["uid"] == "direct" for a in served.audit()), 10)


def test_the_metrics_port_still_answers_anyone(served: Served) -> None:
    """Plain HTTP, no client certificate: why the NetworkPolicy limits who reaches it."""
    assert ready(served.metrics_port)
    with urllib.request.urlopen(f"http://127.0.0.1:{served.metrics_port}/topology", timeout=5) as r:
        assert r.status == 200
