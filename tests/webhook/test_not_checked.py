"""A result that is not checked still lists its PodSets (issue 18.7), through the real ``main()``.

Whatever stops tasgate from judging a workload (a LocalQueue that is not in the state, a
ClusterQueue that is not, a queue name and no default topology), ``tasgate check`` says what Kueue
will be asked for: every PodSet with its count, per-pod requests and TAS request, in text, JSON and
YAML (the JSON document). The states are written as ``kubectl get -o yaml`` prints them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import GPU, KUEUE, QUEUE_LABEL, REQUIRED, job, node
from webhook.cli.main import main

RACK = "cloud.provider.com/topology-rack"


def world(tmp_path: Path, *, local_queue: bool, cluster_queue: bool) -> Path:
    """Nodes, a Topology and a TAS flavor; LocalQueue "q" → ClusterQueue "cq" when asked for."""
    objects: list[dict[str, Any]] = [node(f"n{i}", {RACK: f"r{i // 4}", "pool": "gpu"}) for i in range(8)]
    objects += [
        {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "topo"},
         "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "gpu"},
         "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": "topo"}},
    ]  # fmt: skip
    if cluster_queue:
        objects.append(
            {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [
                 {"coveredResources": ["cpu", "memory", GPU],
                  "flavors": [{"name": "gpu", "resources": []}]}]}}
        )  # fmt: skip
    if local_queue:
        objects.append(
            {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team"},
             "spec": {"clusterQueue": "cq"}}
        )  # fmt: skip
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def jobset(queue: str | None) -> dict[str, Any]:
    """A JobSet of a 1-pod driver and 2 workers × 2 pods (4), workers rack-required, 8 GPUs each."""

    def replicated(name: str, replicas: int, pods: int, annotations: dict[str, str] | None) -> dict[str, Any]:
        spec = job(pods, annotations=annotations)["spec"]
        return {"name": name, "replicas": replicas, "template": {"spec": spec}}

    meta: dict[str, Any] = {"name": "llm", "namespace": "team"}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "replicatedJobs": [
                replicated("driver", 1, 1, None),
                replicated("workers", 2, 2, {REQUIRED: RACK}),
            ]
        },
    }


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, obj: dict[str, Any], *argv: str) -> str:
    manifest = tmp_path / "workload.yaml"
    manifest.write_text(yaml.safe_dump(obj))
    code = main(["check", "-f", str(manifest), *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


CASES = [
    pytest.param(
        {"local_queue": False, "cluster_queue": True}, "q", 'LocalQueue "team/q"', id="no LocalQueue"
    ),
    pytest.param(
        {"local_queue": True, "cluster_queue": False}, "q", 'ClusterQueue "cq"', id="no ClusterQueue"
    ),
]


@pytest.mark.parametrize(("objects", "queue", "missing"), CASES)
def test_text_lists_every_pod_set_of_a_workload_not_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: dict[str, bool], queue: str, missing: str
) -> None:
    state = world(tmp_path, **objects)
    out = run(capsys, tmp_path, jobset(queue), "--state", str(state))
    assert "NOT CHECKED" in out and missing in out, out
    lines = out.splitlines()
    heads = [line.strip() for line in lines if line.startswith("  PodSet ")]
    assert heads == [
        "PodSet driver: 1 pod, no TAS annotation; per pod cpu 4, memory 32Gi, nvidia.com/gpu 8",
        "PodSet workers: 4 pods, required rack; per pod cpu 4, memory 32Gi, nvidia.com/gpu 8",
    ], out
    notes = [lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith("  PodSet ")]
    assert notes == ["not checked: this is what Kueue will be asked for"] * 2, out
    assert "1 not checked" in lines[-1]


@pytest.mark.parametrize(("objects", "queue", "missing"), CASES)
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_json_and_yaml_list_every_pod_set_with_its_request(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    objects: dict[str, bool],
    queue: str,
    missing: str,
    fmt: str,
) -> None:
    state = world(tmp_path, **objects)
    out = run(capsys, tmp_path, jobset(queue), "--state", str(state), "-o", fmt)
    (result,) = (json.loads(out) if fmt == "json" else yaml.safe_load(out))["results"]
    assert result["outcome"] == "not-checked" and any(missing in w for w in result["warnings"]), result
    assert _shape(result["podSets"]) == [
        ("driver", 1, {"cpu": "4", "memory": "32Gi", GPU: "8", "pods": "1"}, "none", None),
        ("workers", 4, {"cpu": "4", "memory": "32Gi", GPU: "8", "pods": "1"}, "required", RACK),
    ]
    assert all(
        p["judged"] is False and p["now"] is None and p["whenEmpty"] is None for p in result["podSets"]
    )


def test_no_queue_and_no_default_topology_lists_the_pod_sets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = world(tmp_path, local_queue=True, cluster_queue=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(
        {"apiVersion": "tasgate.io/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": "p"},
         "spec": {"rules": []}}
    ))  # fmt: skip
    out = run(capsys, tmp_path, jobset(None), "--state", str(state), "--policy", str(policy), "-o", "json")
    (result,) = json.loads(out)["results"]
    assert (result["outcome"], result["reason"]) == ("not-checked", "no-tas"), result
    assert [(p["name"], p["count"]) for p in result["podSets"]] == [("driver", 1), ("workers", 4)]


def test_a_judged_result_still_places_its_pod_sets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = world(tmp_path, local_queue=True, cluster_queue=True)
    out = run(capsys, tmp_path, jobset("q"), "--state", str(state), "-o", "json")
    (result,) = json.loads(out)["results"]
    assert result["outcome"] in ("admitted", "waits"), result
    assert all(p["judged"] and p["whenEmpty"] is not None for p in result["podSets"]), result["podSets"]


def _shape(pod_sets: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (p["name"], p["count"], p["requests"], p["topologyRequest"]["mode"], p["topologyRequest"]["level"])
        for p in pod_sets
    ]
