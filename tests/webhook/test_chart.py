"""charts/tasgate agrees with the kustomize manifests where a file or a value is shared, without helm.

``make test`` has no helm (it is built for ``make e2e``, which renders the chart and compares it with
``kubectl kustomize`` object by object: tests/e2e/test_helm.py). What can drift without rendering is
checked here: the chart's copies of the policy, PrometheusRule and dashboard (one source: the
manifests; ``python3 hack/sync-chart.py`` makes the copies), the version the chart, the kustomize
image and pyproject.toml name, and the Kueue users.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from webhook.decide.policy import KUEUE_USERS

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "tasgate"
SYNC = ROOT / "hack" / "sync-chart.py"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def project_version() -> str:
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found
    return found.group(1)


def test_the_charts_copies_are_the_manifests_files() -> None:
    run = subprocess.run([sys.executable, str(SYNC), "--check"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, (
        f"{run.stderr.strip()}\nregenerate the copies with: python3 hack/sync-chart.py"
    )


def test_the_sync_script_covers_every_file_the_chart_reads() -> None:
    """A template reading a file of files/ that the script does not copy would have two sources."""
    read = set()
    for template in (CHART / "templates").iterdir():
        read |= set(re.findall(r'\.Files\.Get "files/([^"]+)"', template.read_text()))
    listed = subprocess.run(
        [sys.executable, "-c", f"import runpy; print(*runpy.run_path({str(SYNC)!r})['COPIES'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert read == set(listed)
    on_disk = {str(p.relative_to(CHART / "files")) for p in (CHART / "files").rglob("*") if p.is_file()}
    assert on_disk == read, "charts/tasgate/files holds only the synced copies"


def test_one_version_for_the_project_the_chart_and_the_image() -> None:
    chart = load(CHART / "Chart.yaml")
    version = project_version()
    assert chart["appVersion"] == chart["version"] == version
    (image,) = load(ROOT / "manifests" / "base" / "kustomization.yaml")["images"]
    assert image["newTag"] == version
    values = load(CHART / "values.yaml")
    assert values["image"]["tag"] == "", "an empty tag means the appVersion: one place to bump"
    assert values["image"]["repository"] == image["newName"], "the same placeholder in both recipes"


def test_the_deployment_names_the_image_kustomize_sets() -> None:
    deployment = load(ROOT / "manifests" / "base" / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (image,) = load(ROOT / "manifests" / "base" / "kustomization.yaml")["images"]
    assert container["image"] == image["name"]
    assert image["newName"].split("/")[0].endswith(".example"), "a placeholder registry that resolves nowhere"


def test_no_priority_class_by_default_and_the_opt_in_ships_its_quota() -> None:
    """Default: no pod can be refused at the first apply for its priority class (gatekeeper#1120)."""
    pod = load(ROOT / "manifests" / "base" / "deployment.yaml")["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod
    values = load(CHART / "values.yaml")
    assert values["priorityClassName"] == "" and values["priorityClassQuota"]["enabled"] is False
    component = ROOT / "manifests" / "components" / "system-cluster-critical"
    kustomization = load(component / "kustomization.yaml")
    assert kustomization["kind"] == "Component"
    (patch,) = kustomization["patches"]
    (op,) = yaml.safe_load(patch["patch"])
    quota = load(component / "resourcequota.yaml")
    (scope,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope["scopeName"] == "PriorityClass" and scope["values"] == [op["value"]]
    assert int(quota["spec"]["hard"]["pods"]) >= 2 * values["replicas"], "room for a rollout's surge"


def test_the_charts_kueue_users_are_the_policys() -> None:
    values = load(CHART / "values.yaml")
    policy = load(CHART / "files" / "policy.yaml")
    assert tuple(values["kueueUsers"]) == tuple(policy["spec"]["kueueUsers"]) == KUEUE_USERS


def test_the_values_schema_describes_every_default() -> None:
    """values.schema.json refuses unknown keys (helm lint --strict in make e2e), so every default
    value must be declared there, or the defaults themselves would not install."""
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(values: dict[str, Any], node: dict[str, Any], where: str) -> None:
        for name, value in values.items():
            assert name in node["properties"], f"{where}{name} is not in values.schema.json"
            child = node["properties"][name]
            if isinstance(value, dict) and "properties" in child:
                walk(value, child, f"{where}{name}.")

    walk(load(CHART / "values.yaml"), schema, "")
    assert schema["properties"]["certificates"]["properties"]["mode"]["enum"] == [
        "self-signed",
        "cert-manager",
        "provided",
    ]
