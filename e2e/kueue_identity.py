"""Kueue's identity on the e2e control plane: the user a cluster gives it, with its release's RBAC.

A release install runs Kueue as the ServiceAccount ``kueue-controller-manager`` of
``kueue-system``, bound to Kueue's own roles (``config/components/rbac`` of the module, rendered
with ``config/default``'s ``namespace`` and ``namePrefix``). Webhook ``matchConditions`` (tasgate's
exemption of Kueue's UPDATEs) recognise Kueue by ``request.userInfo.username``, so a Kueue that
runs as the harness admin proves nothing about them. Here Kueue authenticates with a client
certificate whose CN is that service account's user name and whose O are the groups a
service-account token would carry (``system:serviceaccounts``, ``system:serviceaccounts:<ns>``,
``system:authenticated``), and RBAC authorises it with the release's roles only: no
system:masters, no cluster-admin. A permission Kueue lacks shows up as a "forbidden" line in its
log, which the smoke test checks for.

The name and namespace are read from the rendered ServiceAccount, not written here: the user the
e2e Kueue runs as is the one the pinned Kueue's manifests define, and tasgate's policy list
(``kueueUsers``) has to match that, not the other way round.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import ControlPlane, ControlPlaneError
from e2e.pki import write_kubeconfig
from webhook.serve import certs

RBAC_COMPONENT = Path("config", "components", "rbac")
DEFAULT_KUSTOMIZATION = Path("config", "default", "kustomization.yaml")


@dataclass(frozen=True)
class Identity:
    """Who Kueue is to the API server: ``username`` (``system:serviceaccount:<ns>:<name>``), ``groups``."""

    username: str
    groups: tuple[str, ...]

    @classmethod
    def of_service_account(cls, namespace: str, name: str) -> Identity:
        """The user and groups the API server gives a token of that ServiceAccount."""
        return cls(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        )


def release_placement(source: Path) -> tuple[str, str]:
    """``(namespace, namePrefix)`` of the module's ``config/default`` kustomization (the release's)."""
    path = source / DEFAULT_KUSTOMIZATION
    doc = yaml.safe_load(path.read_text())
    namespace, prefix = doc.get("namespace"), doc.get("namePrefix")
    if not isinstance(namespace, str) or not isinstance(prefix, str):
        raise ControlPlaneError(f"{path} names no namespace and namePrefix (got {namespace!r}, {prefix!r})")
    return namespace, prefix


def rbac_documents(cp: ControlPlane, source: Path, workdir: Path) -> list[dict[str, Any]]:
    """Kueue's RBAC as a release installs it: ``config/components/rbac`` under config/default's
    namespace and name prefix, rendered by ``kubectl kustomize`` (which also rewrites every
    roleRef and subject). kustomize refuses an absolute resource path, so the kustomization written
    to ``workdir`` names the read-only module directory relative to itself."""
    namespace, prefix = release_placement(source)
    workdir.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "namespace": namespace,
        "namePrefix": prefix,
        "resources": [os.path.relpath(source / RBAC_COMPONENT, workdir)],
    }
    (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    rendered = cp.kubectl("kustomize", str(workdir)).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def service_account_identity(documents: Sequence[dict[str, Any]]) -> Identity:
    """The identity of the one ServiceAccount the RBAC binds (``kueue-system/kueue-controller-manager``)."""
    accounts = [d["metadata"] for d in documents if d.get("kind") == "ServiceAccount"]
    if len(accounts) != 1:
        raise ControlPlaneError(f"Kueue's RBAC renders {len(accounts)} ServiceAccounts, expected 1")
    return Identity.of_service_account(str(accounts[0]["namespace"]), str(accounts[0]["name"]))


def write_kueue_kubeconfig(cp: ControlPlane, directory: Path, identity: Identity) -> Path:
    """A client certificate for ``identity`` signed by the control plane's CA, and a kubeconfig using it."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = certs.client_cert(
        directory, cp.ca, identity.username, list(identity.groups), name="kueue", days=30
    )
    kubeconfig = directory / "kubeconfig"
    write_kubeconfig(kubeconfig, cp.server, cp.ca_path, cert, key, user="kueue")
    return kubeconfig


def install_identity(cp: ControlPlane, source: Path, directory: Path) -> tuple[Identity, Path]:
    """Apply Kueue's release RBAC (as the admin) and mint its credentials; the identity and kubeconfig.

    The namespace the Roles and the ServiceAccount live in must exist already.
    """
    documents = rbac_documents(cp, source, directory / "rbac")
    identity = service_account_identity(documents)
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(documents))
    return identity, write_kueue_kubeconfig(cp, directory, identity)
