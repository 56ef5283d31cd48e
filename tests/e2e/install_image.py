"""The image the install tests name: every recipe refuses to install without one.

The chart fails to render while ``image.repository`` is the placeholder, and every kustomization
that installs the Deployment fails to build without ``manifests/image/image.env``
(tests/e2e/test_install_image.py proves both). So the tests that compare or install the two
recipes name this image in both: ``--set`` for the chart, ``image.env`` for kustomize.
"""

from __future__ import annotations

from typing import Any

from e2e.helm import NAMESPACE, Helm, value_flags

REPOSITORY = "registry.test/tasgate"
DIGEST = "sha256:" + "5" * 64
IMAGE = f"{REPOSITORY}@{DIGEST}"
IMAGE_VALUES = {"image.repository": REPOSITORY, "image.digest": DIGEST}


class ImagedHelm(Helm):
    """helm whose ``template`` names `IMAGE` before the caller's flags (which may override it)."""

    def template(self, *flags: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        return super().template(*value_flags(IMAGE_VALUES), *flags, namespace=namespace)


def with_image(helm: Helm) -> ImagedHelm:
    return ImagedHelm(helm.home, kubeconfig=helm.kubeconfig, binary=helm.binary)
