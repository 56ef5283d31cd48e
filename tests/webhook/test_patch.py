"""The JSON Patch decide() returns, applied with the real `jsonpatch` library as the API server would."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.webhook.conftest import (
    BLOCK,
    COSCHED_LABEL,
    GROUP,
    HOST,
    LEADER_WORKERS,
    PREFERRED,
    RACK,
    REQUIRED,
    VOLCANO_ANNOTATION,
    apply_patch,
    job,
    judge,
    manifest,
    manifests,
    policy,
    rule,
    template_meta,
)
from webhook.decide.patch import Entry, Removal, apply_entries, build_patch, escape, pointer
from webhook.decide.policy import Policy
from webhook.decide.verdicts import Decision
from webhook.state.cluster import ClusterState

# --- the builder ---------------------------------------------------------------------------------


def test_pointer_escapes_tilde_then_slash() -> None:
    assert escape("a/b~c") == "a~1b~0c"
    assert escape("~1") == "~01"  # not confused with an escaped slash
    assert pointer(("metadata", "annotations", "kueue.x-k8s.io/podset-required-topology")) == (
        "/metadata/annotations/kueue.x-k8s.io~1podset-required-topology"
    )
    assert pointer(("spec", "replicatedJobs", 0)) == "/spec/replicatedJobs/0"


def test_keys_with_slashes_and_tildes_round_trip_through_jsonpatch() -> None:
    obj: dict[str, Any] = {"metadata": {"annotations": {}}}
    entries = [Entry(("metadata", "annotations"), "example.com/a~b", "v")]
    patch = build_patch(obj, entries)
    assert patch == [{"op": "add", "path": "/metadata/annotations/example.com~1a~0b", "value": "v"}]
    assert jsonpatch.apply_patch(obj, patch) == {"metadata": {"annotations": {"example.com/a~b": "v"}}}


def test_missing_maps_are_created_in_one_add() -> None:
    obj: dict[str, Any] = {"spec": {"template": {"spec": {}}}}
    entries = [Entry(("spec", "template", "metadata", "annotations"), "k/x", "1")]
    assert build_patch(obj, entries) == [
        {"op": "add", "path": "/spec/template/metadata", "value": {"annotations": {"k/x": "1"}}}
    ]


def test_maps_created_for_one_entry_are_seen_by_the_next() -> None:
    # Labels and annotations of one missing metadata map: the second "add" must not replace the first.
    obj: dict[str, Any] = {"spec": {"template": {"spec": {}}}}
    entries = [
        Entry(("spec", "template", "metadata", "annotations"), "a", "1"),
        Entry(("spec", "template", "metadata", "labels"), "l", "2"),
        Entry(("spec", "template", "metadata", "annotations"), "b", "3"),
    ]
    patch = build_patch(obj, entries)
    assert patch == [
        {"op": "add", "path": "/spec/template/metadata", "value": {"annotations": {"a": "1", "b": "3"}}},
        {"op": "add", "path": "/spec/template/metadata/labels", "value": {"l": "2"}},
    ]
    assert jsonpatch.apply_patch(obj, patch)["spec"]["template"]["metadata"] == {
        "annotations": {"a": "1", "b": "3"},
        "labels": {"l": "2"},
    }
    assert obj == {"spec": {"template": {"spec": {}}}}  # the input is not touched


def test_present_keys_are_never_overwritten_and_first_entry_wins() -> None:
    obj = {"metadata": {"labels": {"a": "mine"}}}
    entries = [
        Entry(("metadata", "labels"), "a", "theirs"),
        Entry(("metadata", "labels"), "b", "first"),
        Entry(("metadata", "labels"), "b", "second"),
    ]
    assert build_patch(obj, entries) == [{"op": "add", "path": "/metadata/labels/b", "value": "first"}]


def test_list_indexes_in_paths() -> None:
    obj = {"spec": {"groups": [{"template": {}}, {"template": {"metadata": {}}}]}}
    entries = [
        Entry(("spec", "groups", 0, "template", "metadata", "labels"), "x", "1"),
        Entry(("spec", "groups", 1, "template", "metadata", "labels"), "x", "1"),
    ]
    patched = jsonpatch.apply_patch(obj, build_patch(obj, entries))
    assert [g["template"]["metadata"] for g in patched["spec"]["groups"]] == [{"labels": {"x": "1"}}] * 2


# --- decide(), patched -----------------------------------------------------------------------------

TEMPLATE_PATHS: list[tuple[str, int, list[tuple[Any, ...]]]] = [
    (
        "lws-one-group.yaml",
        0,
        [("spec", "leaderWorkerTemplate", t) for t in ("leaderTemplate", "workerTemplate")],
    ),
    (
        "jobset-gpu-unannotated.yaml",
        0,
        [("spec", "replicatedJobs", i, "template", "spec", "template") for i in (0, 1)],
    ),
    (
        "pytorchjob-mnist-nccl.yaml",
        0,
        [("spec", "pytorchReplicaSpecs", t, "template") for t in ("Master", "Worker")],
    ),
    ("tfjob.yaml", 0, [("spec", "tfReplicaSpecs", t, "template") for t in ("Chief", "PS", "Worker")]),
    (
        "rayjob.yaml",
        0,
        [
            ("spec", "rayClusterSpec", "headGroupSpec", "template"),
            ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"),
        ],
    ),
    ("pod-group.yaml", 0, [()]),
]


@pytest.mark.parametrize(("file", "doc", "paths"), TEMPLATE_PATHS, ids=[t[0] for t in TEMPLATE_PATHS])
def test_patch_puts_annotations_and_labels_on_the_pod_templates(
    file: str, doc: int, paths: list[tuple[Any, ...]], sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifests(file)[doc]
    d = judge(obj, sample_state, default_policy)
    assert d.allowed and d.patch and all(op["op"] == "add" for op in d.patch)
    patched = apply_patch(obj, d)
    group_name = d.pod_groups[0]["metadata"]["name"]
    for path in paths:
        meta = template_meta(patched, path)
        assert meta["annotations"][REQUIRED] in (HOST, RACK, BLOCK)
        assert meta["labels"][COSCHED_LABEL] == group_name
    # Nothing but metadata maps changed.
    assert strip_added(patched, d) == obj


def strip_added(patched: dict[str, Any], d: Decision) -> dict[str, Any]:
    """Undo the patch with its inverse (each "add" becomes a "remove")."""
    inverse = [{"op": "remove", "path": op["path"]} for op in reversed(d.patch)]
    undone: dict[str, Any] = jsonpatch.apply_patch(patched, inverse)
    return undone


def test_rayjob_patch_does_not_invent_a_submitter_template(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifest("rayjob.yaml")
    patched = apply_patch(obj, judge(obj, sample_state, default_policy))
    assert "submitterPodTemplate" not in patched["spec"]


def test_patch_paths_escape_slashes_in_keys(sample_state: ClusterState, default_policy: Policy) -> None:
    # A Pod has metadata.labels and metadata.annotations already: keys are added one by one.
    d = judge(manifest("pod-group.yaml"), sample_state, default_policy)
    assert [op["path"] for op in d.patch] == [
        "/metadata/annotations/kueue.x-k8s.io~1podset-required-topology",
        "/metadata/labels/scheduling.x-k8s.io~1pod-group",
    ]


def test_existing_annotations_and_labels_are_kept(sample_state: ClusterState, default_policy: Policy) -> None:
    obj = job(4, annotations={"team.example.com/owner": "ml"}, labels={"app": "train"})
    d = judge(obj, sample_state, default_policy)
    assert [op["path"] for op in d.patch] == [
        "/spec/template/metadata/annotations/kueue.x-k8s.io~1podset-required-topology",
        "/spec/template/metadata/labels/scheduling.x-k8s.io~1pod-group",
    ]
    meta = apply_patch(obj, d)["spec"]["template"]["metadata"]
    assert meta == {
        "annotations": {"team.example.com/owner": "ml", REQUIRED: RACK},
        "labels": {"app": "train", COSCHED_LABEL: "train"},
    }


def test_template_without_metadata_gets_both_maps(sample_state: ClusterState, default_policy: Policy) -> None:
    obj = job(12)  # no template metadata at all
    d = judge(obj, sample_state, default_policy)
    meta = apply_patch(obj, d)["spec"]["template"]["metadata"]
    assert meta == {"annotations": {REQUIRED: BLOCK}, "labels": {COSCHED_LABEL: "train"}}


def test_volcano_annotation_joins_the_topology_annotation(sample_state: ClusterState) -> None:
    obj = job(3)
    d = judge(obj, sample_state, policy([rule(level=RACK, backend="volcano")]))
    meta = apply_patch(obj, d)["spec"]["template"]["metadata"]
    assert meta == {"annotations": {REQUIRED: RACK, VOLCANO_ANNOTATION: "train"}}


def test_user_topology_annotation_is_kept_verbatim(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = job(4, annotations={PREFERRED: HOST})
    d = judge(obj, sample_state, default_policy)
    meta = apply_patch(obj, d)["spec"]["template"]["metadata"]
    assert meta["annotations"] == {PREFERRED: HOST}
    assert meta["labels"] == {COSCHED_LABEL: "train"}


# --- idempotence (mutating webhooks may be reinvoked) ---------------------------------------------

IDEMPOTENT = [
    "lws-unannotated.yaml",
    "jobset-gpu-unannotated.yaml",
    "pytorchjob-mnist-nccl.yaml",
    "pytorchjob-waits.yaml",
    "tfjob.yaml",
    "rayjob.yaml",
    "raycluster.yaml",
    "pod-group.yaml",
    "lws-one-group.yaml",
]


@pytest.mark.parametrize("file", IDEMPOTENT)
def test_deciding_on_the_patched_object_adds_nothing(
    file: str, sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifest(file)
    first = judge(obj, sample_state, default_policy)
    assert first.patch
    patched = apply_patch(obj, first)
    second = judge(patched, sample_state, default_policy)
    assert second.patch == ()
    assert second.pod_groups == first.pod_groups
    assert (second.allowed, second.reason, second.warnings) == (first.allowed, first.reason, first.warnings)
    assert [(v.name, v.count, v.request) for v in second.pod_sets] == [
        (v.name, v.count, v.request) for v in first.pod_sets
    ]
    assert not any(v.injected for v in second.pod_sets)
    assert apply_patch(patched, second) == patched


def test_group_annotation_written_once_per_template(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifest("pytorchjob-mnist-nccl.yaml")
    patched = apply_patch(obj, judge(obj, sample_state, default_policy))
    specs = patched["spec"]["pytorchReplicaSpecs"]
    for name in ("Master", "Worker"):
        assert specs[name]["template"]["metadata"]["annotations"] == {REQUIRED: RACK, GROUP: LEADER_WORKERS}


def test_a_removal_is_an_op_only_while_the_key_is_there() -> None:
    """Kueue's pod-index-offset goes where tasgate adds a group name (decide.inject)."""
    path = ("spec", "template", "metadata", "annotations")
    obj = {"spec": {"template": {"metadata": {"annotations": {"kueue.x-k8s.io/pod-index-offset": "1"}}}}}
    entries = [Entry(path, "g", "x"), Removal(path, "kueue.x-k8s.io/pod-index-offset")]
    ops = build_patch(obj, entries)
    assert ops == [
        {"op": "remove", "path": "/spec/template/metadata/annotations/kueue.x-k8s.io~1pod-index-offset"},
        {"op": "add", "path": "/spec/template/metadata/annotations/g", "value": "x"},
    ]
    stored = apply_entries(obj, ops)
    assert stored["spec"]["template"]["metadata"]["annotations"] == {"g": "x"}
    assert build_patch(stored, entries) == []  # reinvoked: nothing left to do
