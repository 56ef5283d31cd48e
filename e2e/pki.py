"""The files a loopback control plane is started from: PKI, kubeconfigs, the audit policy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from webhook.serve import certs

# Writes are logged with their request body (what the webhook was asked to admit); everything else
# at Metadata. Both levels carry the ``annotations`` map, which is where the API server records the
# audit annotations an admission webhook returns, so every event is useful to the webhook tests.
# Leases and Events are high-volume bookkeeping (the API server renews its own lease every ~10 s)
# and CRD bodies are huge (installing ../shared/crds at Request level wrote 12 MB, mostly the API
# server's own status updates), so those stay at Metadata even for writes. RequestReceived is
# omitted: it only duplicates the start of each event.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "resources": [
                {"group": "coordination.k8s.io", "resources": ["leases"]},
                {"group": "", "resources": ["events"]},
                {"group": "events.k8s.io", "resources": ["events"]},
                {"group": "apiextensions.k8s.io", "resources": ["customresourcedefinitions"]},
            ],
        },
        {"level": "Request", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
        {"level": "Metadata"},
    ],
}


def write_pki(pki: Path, dns_names: Sequence[str], ips: Sequence[str]) -> None:
    """CA, serving and admin client certificates, and the service-account signing key pair."""
    files = certs.generate(pki, dns_names, ips, days=30)
    certs.client_cert(pki, (files.ca_cert, files.ca_key), "admin", ["system:masters"], name="admin", days=30)
    # Service-account tokens: the API server signs with the private key and verifies with the
    # public one. RSA because every JWT consumer supports RS256; 2048 bits keeps it fast.
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (pki / "sa.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (pki / "sa.key").chmod(0o600)
    (pki / "sa.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str = "admin") -> None:
    """A kubeconfig that authenticates with a client certificate, readable by its owner only.

    Who it is comes from the certificate (CN the user name, O the groups): the harness admin's is
    in system:masters; Kueue's (e2e.kueue_identity) is its service account's. ``user`` only names
    the entry.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "tasgate-e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [
            {
                "name": "tasgate-e2e",
                "context": {"cluster": "tasgate-e2e", "user": user, "namespace": "default"},
            }
        ],
        "current-context": "tasgate-e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
