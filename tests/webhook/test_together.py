"""A leader and its workers the user's own annotations let Kueue place apart get a warning naming
the domains (issue 37.6); grouped or single-PodSet workloads get none."""

from __future__ import annotations

from typing import Any

from tests.webhook.conftest import GROUP, RACK, REQUIRED, manifest
from webhook.decide.decision import decide
from webhook.decide.verdicts import Decision, Review
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.state.cluster import build_state

STATE = build_state(sample_objects())
POLICY = load_policy("default")


def pytorch(workers: int, master: dict[str, str], worker: dict[str, str]) -> dict[str, Any]:
    obj = manifest("pytorchjob-mnist-nccl.yaml")
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["Worker"]["replicas"] = workers
    for spec, notes in ((specs["Master"], master), (specs["Worker"], worker)):
        spec["template"].setdefault("metadata", {})["annotations"] = dict(notes)
    return obj


def judged(obj: dict[str, Any]) -> Decision:
    return decide(Review(obj, namespace=str(obj["metadata"].get("namespace", "default"))), STATE, POLICY)


def test_master_and_workers_each_requiring_a_rack_are_told_they_land_apart() -> None:
    d = judged(pytorch(4, {REQUIRED: RACK}, {REQUIRED: RACK}))
    (apart,) = [w for w in d.warnings if "placed apart" in w]
    assert '"master" in rack b' in apart and '"worker" in rack b' in apart
    assert GROUP in apart


def test_the_same_pair_in_one_group_gets_no_warning() -> None:
    together = {REQUIRED: RACK, GROUP: "lw"}
    d = judged(pytorch(3, together, together))
    assert d.allowed and not any("placed apart" in w for w in d.warnings)


def test_even_a_small_pair_is_placed_apart_by_kueues_best_fit_and_told_so() -> None:
    """Best fit places each PodSet on its own tightest domain: a leader and 2 workers that one
    rack could hold still land in two racks."""
    d = judged(pytorch(2, {REQUIRED: RACK}, {REQUIRED: RACK}))
    assert any("placed apart" in w for w in d.warnings)


def test_two_podsets_without_a_single_pod_leader_are_not_a_leader_and_workers() -> None:
    obj = pytorch(3, {REQUIRED: RACK}, {REQUIRED: RACK})
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    assert not any("placed apart" in w for w in judged(obj).warnings)
