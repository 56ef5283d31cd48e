"""The API server's identity towards webhooks: a client certificate per webhook host.

When it calls an admission webhook, kube-apiserver looks the webhook's ``host:port`` up among the
``users`` of the kubeconfig named by the ``WebhookAdmissionConfiguration`` in its
``--admission-control-config-file`` (k8s.io/apiserver pkg/util/webhook/authentication.go): an exact
``host:port`` entry first, then ``*.<domain>`` suffixes, then the same without a ``:443`` port,
then ``*``; with no match it calls with no credentials at all. The entry's client certificate is
what a webhook started with ``--client-ca-file`` verifies.

The certificates come from a CA of their own, not the control plane's: the webhook must trust the
API server's admission calls, not every admin or component certificate the cluster CA ever signed.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook.serve import certs

# The API server names itself so to webhooks (its client's User-Agent says kube-apiserver-admission).
CLIENT_NAME = "kube-apiserver-admission"
WEBHOOK_PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")


@dataclass(frozen=True)
class WebhookClientAuth:
    """Where the files are: the CA a webhook trusts, the pair the API server presents, its config."""

    ca: Path  # give it to the webhook: tasgate serve --client-ca-file
    ca_key: Path  # mints more client certificates (another caller, a test's own)
    cert: Path
    key: Path
    kubeconfig: Path
    admission_config: Path  # kube-apiserver --admission-control-config-file


def write_webhook_client_auth(directory: Path, hosts: Sequence[str]) -> WebhookClientAuth:
    """CA, client pair, kubeconfig (one user per entry of ``hosts``) and AdmissionConfiguration.

    ``hosts`` are kubeconfig user names as the API server matches them: ``localhost:8443``,
    ``*.tasgate-system.svc``, ``*``. The kubeconfig carries the pair inline (``*-data``), so the
    API server reads nothing else at start; both files are the owner's only (they hold a key).
    """
    if not hosts:
        raise ValueError("name at least one webhook host (host:port, *.domain or *)")
    # generate() also signs a serving pair; only its CA is used here.
    files = certs.generate(directory / "ca", [CLIENT_NAME])
    cert, key = certs.client_cert(directory, (files.ca_cert, files.ca_key), CLIENT_NAME, [], name="client")
    user = {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode("ascii"),
        "client-key-data": base64.b64encode(key.read_bytes()).decode("ascii"),
    }
    kubeconfig = directory / "kubeconfig"
    _write_private(
        kubeconfig,
        {"apiVersion": "v1", "kind": "Config", "users": [{"name": h, "user": user} for h in hosts]},
    )
    configuration = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig.resolve()),  # the API server wants an absolute path
    }
    admission = directory / "admission-config.yaml"
    _write_private(
        admission,
        {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AdmissionConfiguration",
            "plugins": [{"name": p, "configuration": configuration} for p in WEBHOOK_PLUGINS],
        },
    )
    return WebhookClientAuth(files.ca_cert, files.ca_key, cert, key, kubeconfig, admission)


def _write_private(path: Path, document: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
