"""The install recipes refuse to register fail-closed webhooks without an image, and roll out on
any number of nodes: what can be read off the files, without helm or kubectl (``make test``).

The real builds are in ``make e2e`` (tests/e2e/test_install_image.py: ``helm template`` and
``kubectl kustomize`` fail without an image) and ``make e2e-cluster``
(tests/e2e_cluster/test_helm_rollout.py: ``helm install/upgrade --wait`` and drains on one and two
nodes). These keep the shape those depend on from drifting between runs of the slow suites.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
IMAGE = MANIFESTS / "image"
CHART = ROOT / "charts" / "tasgate"
WEBHOOK_KINDS = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def kustomization(directory: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return loaded


def brings(directory: Path) -> tuple[set[str], list[Path]]:
    """The kinds a kustomization's resources and components hold, and the components it (or one of
    its resources) uses, in order."""
    kinds: set[str] = set()
    components = [(directory / c).resolve() for c in kustomization(directory).get("components", [])]
    for entry in [*kustomization(directory).get("resources", []), *components]:
        target = (directory / entry).resolve()
        if target.is_dir():
            more_kinds, more_components = brings(target)
            kinds |= more_kinds
            components += [c for c in more_components if c not in components]
        else:
            kinds |= {d["kind"] for d in yaml.safe_load_all(target.read_text()) if d}
    return kinds, components


def buildable() -> list[Path]:
    return sorted(
        p.parent
        for p in MANIFESTS.rglob("kustomization.yaml")
        if yaml.safe_load(p.read_text()).get("kind") != "Component"
    )


@pytest.mark.parametrize("directory", buildable(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_whatever_installs_the_deployment_takes_the_image_component(directory: Path) -> None:
    """The base alone (no webhooks) is the one build that keeps the placeholder."""
    kinds, components = brings(directory)
    if kinds & WEBHOOK_KINDS or ("Deployment" in kinds and directory != MANIFESTS / "base"):
        assert IMAGE.resolve() in components, f"{directory} installs tasgate without manifests/image"
    if kinds & WEBHOOK_KINDS:
        webhooks = (MANIFESTS / "webhooks").resolve()
        assert components.index(IMAGE.resolve()) < components.index(webhooks), "the image comes first"
    if directory == MANIFESTS / "base":
        assert not kinds & WEBHOOK_KINDS


def test_the_webhooks_will_not_build_without_the_images_configmap() -> None:
    """A component, and one whose (no-op) replacement reads the image component's ConfigMap: built
    alone, or without the image, kustomize fails with "nothing selected"."""
    webhooks = kustomization(MANIFESTS / "webhooks")
    assert webhooks["kind"] == "Component"
    (generator,) = kustomization(IMAGE)["configMapGenerator"]
    (guard,) = webhooks["replacements"]
    assert guard["source"] == {"kind": "ConfigMap", "name": generator["name"], "fieldPath": "data.image"}
    (target,) = guard["targets"]
    assert target == {
        "select": {"kind": "ConfigMap", "name": generator["name"]},
        "fieldPaths": ["data.image"],
    }


def test_the_image_component_reads_image_env_into_the_deployment_and_applies_nothing() -> None:
    component = kustomization(IMAGE)
    assert component["kind"] == "Component"
    (generator,) = component["configMapGenerator"]
    assert generator["envs"] == ["image.env"]
    assert generator["options"]["annotations"] == {"config.kubernetes.io/local-config": "true"}
    (replacement,) = component["replacements"]
    assert replacement["source"] == {
        "kind": "ConfigMap",
        "name": generator["name"],
        "fieldPath": "data.image",
    }
    (target,) = replacement["targets"]
    assert target["select"] == {"kind": "Deployment", "name": "tasgate"}
    assert target["fieldPaths"] == ["spec.template.spec.containers.[name=tasgate].image"]
    assert (IMAGE / ".gitignore").read_text().split() == ["image.env"], "the image is the user's"


def test_the_chart_refuses_the_placeholder_the_manifests_carry() -> None:
    (image,) = kustomization(MANIFESTS / "base")["images"]
    placeholder = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["repository"]
    assert placeholder == image["newName"] and placeholder.startswith("registry.example/")
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert '(hasPrefix "registry.example/" $repo)' in helpers and "{{- fail (printf" in helpers


def deployments() -> list[dict[str, Any]]:
    """The base's Deployment, and the chart's with its template lines dropped (the fields compared
    here have none)."""
    chart = "\n".join(
        line
        for line in (CHART / "templates" / "deployment.yaml").read_text().splitlines()
        if "{{" not in line
    )
    return [yaml.safe_load((MANIFESTS / "base" / "deployment.yaml").read_text()), yaml.safe_load(chart)]


def test_rollouts_surge_one_pod_that_always_has_a_node() -> None:
    for deployment in deployments():
        assert deployment["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }
        anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        assert list(anti) == ["preferredDuringSchedulingIgnoredDuringExecution"], "never required"
        (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_the_disruption_budget_evicts_one_at_a_time_and_never_holds_a_single_replica() -> None:
    chart = "\n".join(
        line for line in (CHART / "templates" / "pdb.yaml").read_text().splitlines() if "{{" not in line
    )
    for pdb in (yaml.safe_load((MANIFESTS / "base" / "pdb.yaml").read_text()), yaml.safe_load(chart)):
        assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
        assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
