"""The gang of a Job Kueue may admit partially: its PodGroup follows the count Kueue admits.

Kueue runs only the pods it admits (``job-min-parallelism``), so a PodGroup of every pod would
never start: the decision marks it with Kueue's minimum (the live writer sizes it from the
Workload's admission, tests/webhook/test_reconcile_partial.py) and says so.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.webhook.conftest import GPU, RACK, REQUIRED, judge, policy, rule, tasgate
from webhook.decide.gangs import plan as gang
from webhook.decide.policy import Policy
from webhook.state.cluster import ClusterState

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
PARTIAL_MINIMUM = "tasgate.io/partial-admission-minimum"
NOTE = (
    "the PodGroup's minMember=5 follows the count Kueue admits (as few as 2 under partial "
    "admission; set from the Workload's admission)"
)


def elastic(pods: int = 5, minimum: str | None = "2") -> dict[str, Any]:
    """5 × 8 GPUs in one rack (the sample's racks hold 4: Kueue admits 4 now), minimum 2."""
    obj: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "elastic", "namespace": "default",
                     "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"}},
        "spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": {REQUIRED: RACK}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "t:1",
                     "resources": {"requests": {"cpu": "1", GPU: "8"}, "limits": {GPU: "8"}}}]}}},
    }  # fmt: skip
    if minimum is not None:
        obj["metadata"]["annotations"] = {MIN_PARALLELISM: minimum}
    return obj


def test_the_podgroup_of_a_partially_admissible_gang_carries_kueues_minimum(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    d = judge(elastic(), sample_state, default_policy)
    assert (d.allowed, d.reason, d.pod_sets[0].admitted) == (True, "fits", 4)
    (group,) = d.pod_groups
    assert group["metadata"] == {"name": "elastic", "namespace": "default",
                                 "annotations": {PARTIAL_MINIMUM: "2"}}  # fmt: skip
    assert group["spec"]["minMember"] == 5 and gang.partial_minimum(group) == 2
    assert NOTE in d.warnings


def test_a_volcano_podgroup_is_marked_the_same(sample_state: ClusterState) -> None:
    d = judge(elastic(), sample_state, policy([rule(backend="volcano")]))
    (group,) = d.pod_groups
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1" and gang.partial_minimum(group) == 2
    assert NOTE in d.warnings


def test_a_gang_kueue_admits_whole_is_not_marked(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(elastic(pods=4, minimum=None), sample_state, default_policy)
    (group,) = d.pod_groups
    assert "annotations" not in group["metadata"] and gang.partial_minimum(group) is None
    assert not any("minMember" in w for w in d.warnings)


def test_resized_asks_for_the_admitted_pods_only() -> None:
    spec = {"minMember": 4, "scheduleTimeoutSeconds": 600,
            "minResources": {"cpu": "2", "memory": "64Gi", GPU: "32"}}  # fmt: skip
    group: dict[str, Any] = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "spec": spec}
    assert gang.resized(group, 3)["spec"] == {
        "minMember": 3,
        "scheduleTimeoutSeconds": 600,
        "minResources": {"cpu": "1500m", "memory": "48Gi", GPU: "24"},
    }
    assert group["spec"]["minMember"] == 4, "the given PodGroup is left as it was"


def test_check_says_the_minmember_follows_kueues_admission(tmp_path: Any) -> None:
    manifest = tmp_path / "elastic.yaml"
    manifest.write_text(yaml.safe_dump(elastic()))
    run = tasgate("check", "-f", str(manifest))
    assert run.code == 0, run.err
    lines = [line.strip() for line in run.out.splitlines()]
    assert f"warning: {NOTE}" in lines, run.out
    follows = "(as few as 2 if Kueue admits partially; set from the Workload's admission)"
    assert f"podgroup: PodGroup elastic minMember=5 {follows}" in lines, run.out
