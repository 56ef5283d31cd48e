"""No recipe installs tasgate without its image (``make e2e``: the real helm and kubectl kustomize).

The webhooks fail closed. Installed with the placeholder image, they went in with a Deployment
whose pods could never pull it, and every gated CREATE in the cluster was refused until someone
noticed. Now ``helm template`` / ``install`` fails with a message saying what to set, and every
kustomization that installs the Deployment fails to build without ``manifests/image/image.env``
(naming it), so ``kubectl apply -k`` applies nothing; the base alone, which registers no webhook,
is the only build with the placeholder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from e2e.controlplane import find_binaries
from e2e.helm import CHART, ROOT, Helm, value_flags
from tests.e2e.install_image import IMAGE, IMAGE_VALUES

pytestmark = pytest.mark.e2e

WEBHOOK_KINDS = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    argv = [str(find_binaries().kubectl), "kustomize", str(directory)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def installs(directory: Path) -> set[str]:
    """The kinds a kustomization builds to (it must build)."""
    built = kustomize(directory)
    assert built.returncode == 0, built.stderr
    return {d["kind"] for d in yaml.safe_load_all(built.stdout) if d}


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A copy of manifests/ with the tasgate-certs overlay's files but no image.env."""
    copy = tmp_path / "manifests"
    shutil.copytree(ROOT / "manifests", copy, symlinks=True)
    (copy / "image" / "image.env").unlink(missing_ok=True)
    overlay = copy / "overlays" / "tasgate-certs"
    for name in ("tls.crt", "tls.key"):
        (overlay / "certs").mkdir(exist_ok=True)
        (overlay / "certs" / name).write_text("placeholder\n")
    (overlay / "ca-bundle.env").write_text("caBundle=Cg==\n")
    return copy


def test_helm_refuses_the_placeholder_image_and_says_what_to_set(tmp_path: Path) -> None:
    helm = Helm(tmp_path)
    placeholder, no_webhooks = "image.repository=registry.example/tasgate", "webhooks.enabled=false"
    for flags in ([], ["--set", placeholder], ["--set", no_webhooks]):
        refused = helm.run("template", "tasgate", str(CHART), *flags, check=False)
        assert refused.returncode != 0, flags
        assert "image.repository" in refused.stderr and "placeholder" in refused.stderr, refused.stderr
        assert "--set image.repository=<registry>/tasgate" in refused.stderr, refused.stderr
    rendered = helm.run("template", "tasgate", str(CHART), *value_flags(IMAGE_VALUES)).stdout
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE


def test_every_kustomization_that_installs_webhooks_fails_without_the_image(manifests: Path) -> None:
    """Every directory under manifests/ with a kustomization (components too, built alone): without
    image.env none yields a webhook; those that install the Deployment or the webhooks fail, naming
    the image; with it the install recipes build, the image in the Deployment."""
    failing = []
    for kustomization in sorted(manifests.rglob("kustomization.yaml")):
        directory = kustomization.parent
        name = directory.relative_to(manifests).as_posix()
        built = kustomize(directory)
        if built.returncode != 0:
            if name == "overlays/monitoring/runbook-url":  # needs its user's ConfigMap, by design
                continue
            assert "image.env" in built.stderr or "tasgate-image" in built.stderr, f"{name}: {built.stderr}"
            failing.append(name)
            continue
        kinds = {d["kind"] for d in yaml.safe_load_all(built.stdout) if d}
        assert not kinds & WEBHOOK_KINDS, f"{directory} registers webhooks without an image"
        if "Deployment" in kinds:
            docs = [d for d in yaml.safe_load_all(built.stdout) if d and d["kind"] == "Deployment"]
            (image,) = {d["spec"]["template"]["spec"]["containers"][0]["image"] for d in docs}
            assert directory == manifests / "base" and image.startswith("registry.example/"), directory
    assert sorted(failing) == [".", "image", "overlays/cert-manager", "overlays/tasgate-certs", "webhooks"]
    (manifests / "image" / "image.env").write_text(f"image={IMAGE}\n")
    for directory in (".", "overlays/cert-manager", "overlays/tasgate-certs"):
        kinds = installs(manifests / directory)
        assert "Deployment" in kinds and (directory == "." or kinds >= WEBHOOK_KINDS), directory
