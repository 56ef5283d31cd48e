"""validate_workload: Kueue's TAS rules word for word, tasgate's stricter rules, gang rules.

Expected strings are written out in full. Where a test reproduces a case from Kueue's own test
suite (pkg/controller/jobs/jobset/jobset_webhook_test.go), it says so; those are the strings the
Kueue webhook returns for the same manifest.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e.shared import shared_dir, shared_path
from webhook.model.podset import view_workload
from webhook.model.workloads import WorkloadPodSets, extract
from webhook.rules import owner_min_member_errors, validate_workload
from webhook.wire.errors import FieldError

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
CONS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
OFFSET = "kueue.x-k8s.io/pod-index-offset"
COSCHED = "scheduling.x-k8s.io/pod-group"
VOLCANO = "scheduling.k8s.io/group-name"
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)

A = "spec.template.metadata.annotations"  # a batch/v1 Job's pod template annotations
L = "spec.template.metadata.labels"
C = f"{A}[{CONS}]"
MORE_THAN_ONE = (
    "must not contain more than one topology annotation: "
    '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
    '"kueue.x-k8s.io/podset-unconstrained-topology"]'
)
NAME_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PREFIX_REGEX = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
EXAMPLES = shared_dir() / "examples"
CONTAINERS = [{"name": "train", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]


def template(
    annotations: Mapping[str, Any] | None = None, labels: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if labels is not None:
        meta["labels"] = dict(labels)
    return {"metadata": meta, "spec": {"containers": copy.deepcopy(CONTAINERS), "restartPolicy": "Never"}}


def job(annotations: Mapping[str, Any] | None = None, parallelism: int = 8, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": template(annotations, **kw),
        },
    }


def rjob(
    name: str,
    annotations: Mapping[str, Any] | None = None,
    replicas: int = 1,
    parallelism: int = 1,
    **kw: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": template(annotations, **kw),
            }
        },
    }


def jobset(*replicated_jobs: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ml"},
        "spec": {"replicatedJobs": list(replicated_jobs)},
    }


def P(i: int) -> str:  # noqa: N802 - a JobSet replicated job's pod template annotations
    return f"spec.replicatedJobs[{i}].template.spec.template.metadata.annotations"


def mpijob(
    launcher: Mapping[str, Any] | None = None, worker: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ml"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(launcher)},
                "Worker": {"replicas": 2, "template": template(worker)},
            }
        },
    }


def pytorchjob(worker_labels: Mapping[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "ml"},
        "spec": {
            **spec,
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 4, "template": template(labels=worker_labels)},
            },
        },
    }


def must_extract(obj: Mapping[str, Any], **kw: Any) -> WorkloadPodSets:
    wl = extract(obj, **kw)
    assert wl is not None
    return wl


def check(
    obj: Mapping[str, Any],
    levels: Sequence[str] | None = None,
    has_nodes: Callable[[str], bool] | None = None,
    **kw: Any,
) -> list[str]:
    errors = validate_workload(view_workload(must_extract(obj, **kw)), levels, has_nodes)
    assert all(isinstance(e, FieldError) for e in errors)
    return [str(e) for e in errors]


# --- Kueue: ValidateTASPodSetRequest ----------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({REQ: RACK}, [], id="valid required"),
        pytest.param({PREF: RACK, SLICE: HOST, SIZE: "4"}, [], id="valid preferred with slices"),
        pytest.param({UNC: "true"}, [], id="valid unconstrained"),
        pytest.param(
            {REQ: RACK, PREF: RACK}, [f"{A}: Invalid value: {MORE_THAN_ONE}"], id="required+preferred"
        ),
        pytest.param(
            {PREF: RACK, UNC: "true"}, [f"{A}: Invalid value: {MORE_THAN_ONE}"], id="preferred+unconstrained"
        ),
        pytest.param(
            {REQ: "Rack!"}, [f'{A}[{REQ}]: Invalid value: "Rack!": {NAME_REGEX}'], id="level not a label"
        ),
        pytest.param(
            {PREF: "Cloud.com/rack"},
            [f'{A}[{PREF}]: Invalid value: "Cloud.com/rack": {PREFIX_REGEX}'],
            id="bad prefix",
        ),
        pytest.param(
            {REQ: ""},
            [
                f'{A}[{REQ}]: Invalid value: "": name part must be non-empty',
                f'{A}[{REQ}]: Invalid value: "": {NAME_REGEX}',
            ],
            id="empty level",
        ),
        pytest.param(
            {REQ: "cloud.com/" + "r" * 64},
            [f'{A}[{REQ}]: Invalid value: "cloud.com/{"r" * 64}": name part must be no more than 63 bytes'],
            id="level name too long",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: "a/b/c", SIZE: "4"},
            [
                f'{A}[{SLICE}]: Invalid value: "a/b/c": a valid label key must consist of alphanumeric '
                f"characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
                "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ],
            id="slice level with two slashes",
        ),
        pytest.param(
            {UNC: "yes"},
            [f'{A}[{UNC}]: Invalid value: "yes": must be a boolean value'],
            id="unconstrained yes",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK},
            [
                f"{A}[{SIZE}]: Required value: must be set when "
                f"'kueue.x-k8s.io/podset-slice-required-topology' is specified"
            ],
            id="slice level without size",
        ),
        pytest.param(
            {REQ: BLOCK, SIZE: "4"},
            [
                f"{A}[{SIZE}]: Forbidden: may not be set when "
                f"'kueue.x-k8s.io/podset-slice-required-topology' "
                "is not specified"
            ],
            id="slice size without level",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK, SIZE: "four"},
            [f'{A}[{SIZE}]: Invalid value: "four": must be a numeric value'],
            id="slice size not a number (reported once)",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK, SIZE: "99999999999"},
            [f'{A}[{SIZE}]: Invalid value: "99999999999": must be a numeric value'],
            id="slice size beyond int32",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK, SIZE: "0"},
            [f'{A}[{SIZE}]: Invalid value: "0": must be greater than or equal to 1'],
            id="slice size zero",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK, SIZE: "-4"},
            [f'{A}[{SIZE}]: Invalid value: "-4": must be greater than or equal to 1'],
            id="slice size negative",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK, SIZE: "16"},
            [f'{A}[{SIZE}]: Invalid value: "16": must not be greater than pod set count 8'],
            id="slice size above the pod count",
        ),
        pytest.param(
            {REQ: BLOCK, SLICE: RACK, SIZE: "2000000"},
            [f'{A}[{SIZE}]: Invalid value: "2000000": must not be greater than pod set count 8'],
            id="absurd slice size",
        ),
    ],
)
def test_kueue_pod_set_request_rules(annotations: dict[str, str], want: list[str]) -> None:
    assert check(job(annotations)) == want


@pytest.mark.parametrize(
    ("raw", "parallelism", "want"),
    [
        pytest.param(
            '[{"topology":"cloud.com/rack","size":4},{"topology":"kubernetes.io/hostname","size":2}]',
            8,
            [],
            id="valid",
        ),
        pytest.param(
            "invalid-json",
            8,
            [
                f"{C}: Invalid value: \"invalid-json\": must be a valid JSON array: invalid character 'i' "
                f"looking for beginning of value"
            ],
            id="not JSON",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":4},]',
            8,
            [
                f"{C}: Invalid value: "
                + json.dumps('[{"topology":"cloud.com/rack","size":4},]')
                + ": must be a valid "
                "JSON array: invalid character ']' looking for beginning of value"
            ],
            id="trailing comma",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":4}',
            8,
            [
                f"{C}: Invalid value: "
                + json.dumps('[{"topology":"cloud.com/rack","size":4}')
                + ": must be a valid "
                "JSON array: unexpected end of JSON input"
            ],
            id="truncated",
        ),
        pytest.param(
            '{"topology":"cloud.com/rack","size":4}',
            8,
            [
                f"{C}: Invalid value: "
                + json.dumps('{"topology":"cloud.com/rack","size":4}')
                + ": must be a valid "
                "JSON array: json: cannot unmarshal object into Go value of type "
                "[]v1beta2.PodsetSliceRequiredTopologyConstraint"
            ],
            id="an object, not a list",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":"4"}]',
            8,
            [
                f"{C}: Invalid value: "
                + json.dumps('[{"topology":"cloud.com/rack","size":"4"}]')
                + ": must be a "
                "valid JSON array: json: cannot unmarshal string into Go struct field "
                "PodsetSliceRequiredTopologyConstraint.size of type int32"
            ],
            id="size is a string",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":3000000000}]',
            8,
            [
                f"{C}: Invalid value: "
                + json.dumps('[{"topology":"cloud.com/rack","size":3000000000}]')
                + ": must "
                "be a valid JSON array: json: cannot unmarshal number 3000000000 into Go struct field "
                "PodsetSliceRequiredTopologyConstraint.size of type int32"
            ],
            id="size beyond int32",
        ),
        pytest.param(
            '["cloud.com/rack"]',
            8,
            [
                f"{C}: Invalid value: "
                + json.dumps('["cloud.com/rack"]')
                + ": must be a valid JSON array: json: cannot "
                "unmarshal string into Go value of type v1beta2.PodsetSliceRequiredTopologyConstraint"
            ],
            id="entry not an object",
        ),
        pytest.param(
            "[]",
            8,
            [f'{C}: Invalid value: "[]": topology constraints must contain between 1 and 3 entries'],
            id="empty",
        ),
        pytest.param(
            '[{"topology":"a","size":64},{"topology":"b","size":16},{"topology":"c","size":4},{"topology":"d","size":1}]',
            64,
            [
                f"{C}: Invalid value: "
                + json.dumps(
                    '[{"topology":"a","size":64},{"topology":"b","size":16},{"topology":"c","size":4},'
                    '{"topology":"d","size":1}]'
                )
                + ": topology constraints must contain between 1 and 3 entries"
            ],
            id="four layers",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":0}]',
            8,
            [f"{C}[0].size: Invalid value: 0: must be greater than or equal to 1"],
            id="size zero",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":5}]',
            16,
            [f"{C}[1].size: Invalid value: 5: must evenly divide the parent layer size 16"],
            id="size does not divide its parent",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/rack","size":4}]',
            16,
            [f'{C}[1].topology: Duplicate value: "cloud.com/rack (also at index 0)"'],
            id="duplicate level",
        ),
        pytest.param(
            '[{"size":4}]',
            8,
            [
                f'{C}[0].topology: Invalid value: "": name part must be non-empty',
                f'{C}[0].topology: Invalid value: "": {NAME_REGEX}',
            ],
            id="layer without topology",
        ),
        pytest.param(
            '[{"topology":"cloud.com/rack","size":32}]',
            8,
            [f"{C}: Invalid value: 32: must not be greater than pod set count 8"],
            id="first layer above the pod count",
        ),
    ],
)
def test_kueue_constraints_rules(raw: str, parallelism: int, want: list[str]) -> None:
    assert check(job({REQ: BLOCK, CONS: raw}, parallelism=parallelism)) == want


def test_constraints_may_not_be_combined_with_the_single_slice_annotations() -> None:
    annotations = {REQ: BLOCK, SLICE: RACK, SIZE: "16", CONS: '[{"topology":"cloud.com/rack","size":16}]'}
    assert check(job(annotations, parallelism=16)) == [
        f"{C}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
        f"{C}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified",
    ]


def test_json_keys_match_fields_case_insensitively_as_in_go() -> None:
    assert check(job({REQ: BLOCK, CONS: '[{"Topology":"cloud.com/rack","SIZE":4,"note":"x"}]'})) == []


# --- Kueue: ValidateSliceSizeAnnotationUpperBound, on a JobSet (Kueue's own test case) ---------


def test_jobset_slice_size_larger_than_the_pod_set() -> None:
    # jobset_webhook_test.go: "invalid slice topology request - slice size larger than number of podsets"
    obj = jobset(rjob("job1", {REQ: BLOCK, SLICE: BLOCK, SIZE: "20"}, replicas=2))
    assert check(obj) == [f'{P(0)}[{SIZE}]: Invalid value: "20": must not be greater than pod set count 2']


def test_jobset_reports_the_replicated_job_it_belongs_to() -> None:
    # jobset_webhook_test.go: "invalid topology request"
    obj = jobset(rjob("launcher", {REQ: BLOCK}), rjob("worker", {PREF: BLOCK, REQ: BLOCK}))
    assert check(obj) == [f"{P(1)}: Invalid value: {MORE_THAN_ONE}"]


# --- Kueue: podset-group-name -----------------------------------------------------------------


def test_group_of_size_other_than_two() -> None:
    # jobset_webhook_test.go: "invalid PodSet grouping request - groups of size other than 2"
    obj = jobset(
        rjob("job1", {REQ: BLOCK, GROUP: "1podset"}),
        rjob("job2", {REQ: BLOCK, GROUP: "3podsets"}),
        rjob("job3", {REQ: BLOCK, GROUP: "3podsets"}, replicas=2),
        rjob("job4", {REQ: BLOCK, GROUP: "3podsets"}, replicas=2, parallelism=2),
    )
    assert check(obj) == [
        f'{P(0)}[{GROUP}]: Invalid value: "1podset": can only define groups of exactly 2 pod sets, got: 1 '
        f"pod set(s)",
        f'{P(1)}[{GROUP}]: Invalid value: "3podsets": can only define groups of exactly 2 pod sets, got: 3 '
        f"pod set(s)",
        f'{P(2)}[{GROUP}]: Invalid value: "3podsets": can only define groups of exactly 2 pod sets, got: 3 '
        f"pod set(s)",
        f'{P(3)}[{GROUP}]: Invalid value: "3podsets": can only define groups of exactly 2 pod sets, got: 3 '
        f"pod set(s)",
    ]


def test_group_without_a_single_pod_leader() -> None:
    # jobset_webhook_test.go: "invalid PodSet grouping request - no leader in group"
    obj = jobset(
        rjob("job1", {REQ: BLOCK, GROUP: "groupname"}, replicas=2),
        rjob("job2", {REQ: BLOCK, GROUP: "groupname"}, parallelism=3),
    )
    detail = (
        "can only define groups where at least one pod set has only 1 replica, got: 2 replica(s) and 3 "
        "replica(s) "
        "in the group"
    )
    assert check(obj) == [
        f'{P(0)}[{GROUP}]: Invalid value: "groupname": {detail}',
        f'{P(1)}[{GROUP}]: Invalid value: "groupname": {detail}',
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param({REQ: RACK}, {REQ: BLOCK}, id="required levels differ"),
        pytest.param({PREF: RACK}, {PREF: BLOCK}, id="preferred levels differ"),
        pytest.param({REQ: RACK}, {PREF: BLOCK}, id="required and preferred"),
        pytest.param({REQ: RACK}, {PREF: RACK}, id="same level, different modes"),
    ],
)
def test_group_members_must_ask_for_the_same_topology(first: dict[str, str], second: dict[str, str]) -> None:
    # jobset_webhook_test.go: "invalid PodSet grouping request - ... topology does not match"
    obj = jobset(
        rjob("job1", {**first, GROUP: "groupname"}), rjob("job2", {**second, GROUP: "groupname"}, replicas=2)
    )
    consistent = (
        "must specify 'kueue.x-k8s.io/podset-required-topology' or "
        "'kueue.x-k8s.io/podset-preferred-topology' "
        "topology consistent with '{}' in group 'groupname'"
    )
    assert check(obj) == [
        f"{P(0)}: Invalid value: {consistent.format(P(1))}",
        f"{P(1)}: Invalid value: {consistent.format(P(0))}",
    ]


def test_group_name_rules_on_each_pod_set() -> None:
    obj = jobset(
        rjob("leader", {REQ: BLOCK, GROUP: "123"}),
        rjob("workers", {REQ: BLOCK, GROUP: "123", SLICE: RACK, SIZE: "2"}, replicas=4),
    )
    assert check(obj, LEVELS) == [
        f'{P(0)}[{GROUP}]: Invalid value: "123": must not be a number',
        f'{P(1)}[{GROUP}]: Invalid value: "123": must not be a number',
        f"{P(1)}[{GROUP}]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified",
        f"{P(1)}[{GROUP}]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is "
        f"specified",
    ]


def test_group_member_without_required_or_preferred_topology() -> None:
    obj = jobset(rjob("leader", {GROUP: "g"}), rjob("workers", {REQ: BLOCK, GROUP: "g"}, replicas=4))
    assert check(obj) == [
        f"{P(0)}[{GROUP}]: Forbidden: may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' "
        f"nor "
        "'kueue.x-k8s.io/podset-required-topology' is specified",
        # Kueue drops that PodSet from the group, which leaves a group of one
        f'{P(1)}[{GROUP}]: Invalid value: "g": can only define groups of exactly 2 pod sets, got: 1 pod '
        f"set(s)",
    ]


def test_group_may_not_be_combined_with_constraints() -> None:
    obj = jobset(
        rjob("leader", {REQ: BLOCK, GROUP: "g"}),
        rjob(
            "workers", {REQ: BLOCK, GROUP: "g", CONS: '[{"topology":"cloud.com/rack","size":4}]'}, replicas=16
        ),
    )
    assert check(obj) == [
        f"{P(1)}[{GROUP}]: Forbidden: may not be set when "
        "'kueue.x-k8s.io/podset-slice-required-topology-constraints' is specified"
    ]


def test_upstream_leaderworkerset_sample_is_valid() -> None:
    path = shared_path("examples", "kueue-leaderworkerset-tas.yaml")
    obj = yaml.safe_load(path.read_text())
    levels = ("cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", HOST)
    assert check(obj, levels, lambda level: True) == []
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"][REQ] = levels[0]
    assert check(obj) == [
        "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations: Invalid value: must specify "
        "'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology "
        "consistent with 'spec.leaderWorkerTemplate.workerTemplate.metadata.annotations' in group "
        "'lws-group'",
        "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations: Invalid value: must specify "
        "'kueue.x-k8s.io/podset-required-topology' or 'kueue.x-k8s.io/podset-preferred-topology' topology "
        "consistent with 'spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations' in group "
        "'lws-group'",
    ]


# --- pod-index-offset: Kueue validates it nowhere; its ungater parses it with strconv.Atoi -----

W = "spec.mpiReplicaSpecs[Worker].template.metadata.annotations"
UNGATER = "must be an integer: Kueue's topology ungater cannot parse it and would never ungate the pods"


@pytest.mark.parametrize(
    ("worker", "want"),
    [
        pytest.param({OFFSET: "1"}, [], id="valid"),
        pytest.param({OFFSET: "-1"}, [], id="negative (Atoi takes it; Kueue does not check)"),
        pytest.param({OFFSET: "one"}, [f'{W}[{OFFSET}]: Invalid value: "one": {UNGATER}'], id="text"),
        pytest.param(
            {OFFSET: "1", PREF: RACK, GROUP: "g"},
            [
                f'{W}[{GROUP}]: Invalid value: "g": can only define groups of exactly 2 pod sets, got: 1 pod '
                f"set(s)",
            ],
            id="with a group: not an error in Kueue",
        ),
    ],
)
def test_mpijob_pod_index_offset(worker: dict[str, str], want: list[str]) -> None:
    assert check(mpijob(worker=worker)) == want


def test_plain_pod_reports_its_own_metadata() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        **template({REQ: BLOCK, PREF: BLOCK}),
    }
    assert check(pod) == [f"metadata.annotations: Invalid value: {MORE_THAN_ONE}"]


def test_trainjob_errors_use_kueues_job_path_and_hint() -> None:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed"},
        "spec": {
            "mlPolicy": {"numNodes": 4, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {"template": template({REQ: BLOCK, SIZE: "2"})},
                            },
                        }
                    ]
                }
            },
        },
    }
    train = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    runtimes = {("ClusterTrainingRuntime", "", "torch-distributed"): runtime}
    assert check(train, runtimes=runtimes) == [
        f"job[node].annotations[{SIZE}]: Forbidden: may not be set when "
        "'kueue.x-k8s.io/podset-slice-required-topology' is not specified. Adjust either the "
        '"TrainJob.spec.runtimePatches" or the "TrainingRuntime.Template" annotations for the '
        "corresponding Job"
    ]


# --- tasgate: levels, nodes, slices ------------------------------------------------------------

SUPPORTED = 'supported values: "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"'


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({REQ: RACK, SLICE: HOST, SIZE: "2"}, [], id="valid"),
        pytest.param(
            {REQ: "cloud.com/rak"},
            [f'{A}[{REQ}]: Unsupported value: "cloud.com/rak": not a level of the Topology; {SUPPORTED}'],
            id="unknown level",
        ),
        pytest.param(
            {PREF: BLOCK, SLICE: "cloud.com/node", SIZE: "2"},
            [f'{A}[{SLICE}]: Unsupported value: "cloud.com/node": not a level of the Topology; {SUPPORTED}'],
            id="unknown slice level",
        ),
        pytest.param(
            {
                REQ: BLOCK,
                CONS: '[{"topology":"cloud.com/rack","size":4},{"topology":"cloud.com/host","size":2}]',
            },
            [
                f'{C}[1].topology: Unsupported value: "cloud.com/host": not a level of the Topology; '
                f"{SUPPORTED}"
            ],
            id="unknown layer level",
        ),
        pytest.param(
            {REQ: "Rack!"},
            [f'{A}[{REQ}]: Invalid value: "Rack!": {NAME_REGEX}'],
            id="malformed: Kueue's error only",
        ),
        # Kueue admits a size that does not divide the count (whole slices only): not invalid,
        # judged as partial-slice by the decision (tests/webhook/test_slices.py).
        pytest.param({REQ: BLOCK, SLICE: RACK, SIZE: "3"}, [], id="slice size does not divide the count"),
        pytest.param(
            {
                REQ: BLOCK,
                CONS: (
                    '[{"topology":"cloud.com/rack","size":6},{"topology":"kubernetes.io/hostname","size":2}]'
                ),
            },
            [],
            id="first layer does not divide the count",
        ),
        pytest.param(
            {REQ: RACK, SLICE: BLOCK, SIZE: "4"},
            [
                f'{A}[{SLICE}]: Invalid value: "cloud.com/block": is coarser than the pod set\'s required '
                f"level "
                '"cloud.com/rack"; a slice must fit inside one "cloud.com/rack" domain, so use that level or '
                "a finer one"
            ],
            id="slice level above the required level",
        ),
        pytest.param(
            {PREF: HOST, SLICE: RACK, SIZE: "4"},
            [
                f'{A}[{SLICE}]: Invalid value: "cloud.com/rack": is coarser than the pod set\'s preferred '
                f"level "
                '"kubernetes.io/hostname"; a slice must fit inside one "kubernetes.io/hostname" domain, so '
                "use that "
                "level or a finer one"
            ],
            id="slice level above the preferred level",
        ),
        pytest.param({REQ: RACK, SLICE: RACK, SIZE: "4"}, [], id="slice level equal to the level"),
        pytest.param(
            {REQ: RACK, CONS: '[{"topology":"cloud.com/block","size":4}]'},
            [
                f'{C}[0].topology: Invalid value: "cloud.com/block": is coarser than the pod set\'s required '
                f"level "
                '"cloud.com/rack"; a slice must fit inside one "cloud.com/rack" domain, so use that level or '
                "a finer one"
            ],
            id="layer above the required level",
        ),
        pytest.param(
            {
                REQ: BLOCK,
                CONS: (
                    '[{"topology":"kubernetes.io/hostname","size":4},{"topology":"cloud.com/rack","size":2}]'
                ),
            },
            [
                f'{C}[1].topology: Invalid value: "cloud.com/rack": is coarser than the layer before it '
                '("kubernetes.io/hostname"); layers go from the coarsest level to the finest'
            ],
            id="layers out of order",
        ),
        pytest.param({UNC: "True"}, [], id="unconstrained True (Go's ParseBool)"),
        pytest.param({UNC: "1"}, [], id="unconstrained 1 (Go's ParseBool)"),
        pytest.param(
            {UNC: "false"},
            [
                f'{A}[{UNC}]: Invalid value: "false": a false value does not turn topology-aware '
                "scheduling off: Kueue then finds no flavor with the requested level and never admits the "
                "workload; remove the annotation instead"
            ],
            id="unconstrained false",
        ),
    ],
)
def test_tasgate_topology_rules(annotations: dict[str, str], want: list[str]) -> None:
    assert check(job(annotations), LEVELS) == want


def test_levels_that_no_node_carries() -> None:
    asked: list[str] = []

    def has_nodes(level: str) -> bool:
        asked.append(level)
        return level != RACK

    obj = jobset(
        rjob("a", {REQ: RACK}, replicas=4), rjob("b", {PREF: RACK, SLICE: HOST, SIZE: "2"}, replicas=4)
    )
    no_node = "no node this workload can run on carries this label, so the pods could never be placed"
    assert check(obj, LEVELS, has_nodes) == [
        f'{P(0)}[{REQ}]: Invalid value: "cloud.com/rack": {no_node}',
        f'{P(1)}[{PREF}]: Invalid value: "cloud.com/rack": {no_node}',
    ]
    assert sorted(asked) == [RACK, HOST]  # each level once per workload
    assert check(job({REQ: RACK}), None, has_nodes) == [
        f'{A}[{REQ}]: Invalid value: "cloud.com/rack": {no_node}'
    ]


def test_unknown_levels_are_not_asked_about_nodes() -> None:
    def has_nodes(level: str) -> bool:
        raise AssertionError(f"asked about {level}")

    assert check(job({REQ: "cloud.com/rak"}), LEVELS, has_nodes) == [
        f'{A}[{REQ}]: Unsupported value: "cloud.com/rak": not a level of the Topology; {SUPPORTED}'
    ]


def test_a_topology_without_levels() -> None:
    assert check(job({REQ: RACK}), ()) == [
        f'{A}[{REQ}]: Unsupported value: "cloud.com/rack": not a level of the Topology; the Topology has no '
        f"levels"
    ]


# --- gang scheduling ---------------------------------------------------------------------------


def test_coscheduling_and_volcano_on_one_template() -> None:
    obj = job(labels={COSCHED: "train"}, annotations={VOLCANO: "train"})
    assert check(obj) == [
        f"{A}[{VOLCANO}]: Forbidden: may not be set together with the Coscheduling label {L}[{COSCHED}]: a "
        f"workload "
        "must use one gang scheduler, and pods split between two PodGroups never reach either quorum"
    ]


def test_coscheduling_and_volcano_across_templates() -> None:
    first_labels = P(0).replace("annotations", "labels")
    obj = jobset(
        rjob("driver", labels={"pod-group.scheduling.sigs.k8s.io": "train"}),
        rjob("workers", {"scheduling.volcano.sh/group-name": "train"}, replicas=4),
    )
    assert check(obj) == [
        f"{P(1)}[scheduling.volcano.sh/group-name]: Forbidden: may not be set together with the Coscheduling "
        f"label "
        f"{first_labels}[pod-group.scheduling.sigs.k8s.io]: a workload must use one gang scheduler, and pods "
        f"split "
        "between two PodGroups never reach either quorum"
    ]


def test_explicit_pod_group_on_an_operator_managed_gang() -> None:
    # kubeflow/trainer#4060: the operator's PodGroup plus the user's leaves the job stuck
    obj = pytorchjob({COSCHED: "mnist"}, runPolicy={"schedulingPolicy": {"minAvailable": 5}})
    assert check(obj) == [
        f"spec.pytorchReplicaSpecs[Worker].template.metadata.labels[{COSCHED}]: Forbidden: may not be set: "
        "spec.runPolicy.schedulingPolicy makes the training operator create a coscheduling PodGroup for this "
        "job "
        "itself, and a second gang backend leaves the job pending forever (kubeflow/trainer#4060)"
    ]
    assert check(pytorchjob({COSCHED: "mnist"})) == []  # without runPolicy the label is the only gang


def test_every_pod_set_must_join_the_same_pod_group() -> None:
    obj = jobset(rjob("driver", labels={COSCHED: "a"}), rjob("workers", labels={COSCHED: "b"}, replicas=4))
    labels = [P(i).replace("annotations", "labels") for i in range(2)]
    assert check(obj) == [
        f'{labels[1]}[{COSCHED}]: Invalid value: "b": names a different Coscheduling PodGroup than '
        f'{labels[0]}[{COSCHED}] ("a"); all pods of one workload must join one PodGroup'
    ]
    obj = jobset(rjob("driver", {VOLCANO: "a"}), rjob("workers", {VOLCANO: "a"}, replicas=4))
    assert check(obj) == []


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        pytest.param(
            {
                "pod-group.scheduling.sigs.k8s.io/name": "g",
                "pod-group.scheduling.sigs.k8s.io/min-available": "4",
            },
            [],
            id="quorum equals the pods",
        ),
        pytest.param(
            {
                "pod-group.scheduling.sigs.k8s.io/name": "g",
                "pod-group.scheduling.sigs.k8s.io/min-available": "6",
            },
            [
                f'{L}[pod-group.scheduling.sigs.k8s.io/min-available]: Invalid value: "6": exceeds the 4 '
                f"pod(s) of pod "
                'group "g", so the gang could never reach its quorum'
            ],
            id="quorum above the pods",
        ),
        pytest.param(
            {
                "pod-group.scheduling.sigs.k8s.io/name": "g",
                "pod-group.scheduling.sigs.k8s.io/min-available": "all",
            },
            [
                f'{L}[pod-group.scheduling.sigs.k8s.io/min-available]: Invalid value: "all": must be an '
                f"integer"
            ],
            id="quorum not a number",
        ),
        pytest.param(
            {"pod-group.scheduling.sigs.k8s.io/min-available": "2"},
            [
                f'{L}[pod-group.scheduling.sigs.k8s.io/min-available]: Invalid value: "2": has no effect '
                f"without the "
                "pod-group.scheduling.sigs.k8s.io/name label naming the pod group"
            ],
            id="quorum without a group",
        ),
    ],
)
def test_lightweight_coscheduling_quorum(labels: dict[str, str], want: list[str]) -> None:
    assert check(job(labels=labels, parallelism=4)) == want


def test_volcano_min_member_on_the_owner() -> None:
    key = "scheduling.volcano.sh/group-min-member"
    assert owner_min_member_errors({key: "8"}, 8) == []
    assert [str(e) for e in owner_min_member_errors({key: "9"}, 8)] == [
        f'metadata.annotations[{key}]: Invalid value: "9": exceeds the 8 pod(s) of this workload, so the '
        f"gang "
        "could never reach its quorum"
    ]
    assert [str(e) for e in owner_min_member_errors({key: 9}, 8, "x")] == [
        f"x[{key}]: Invalid value: 9: must be a string"
    ]
    assert [str(e) for e in owner_min_member_errors({key: "0"}, 8)] == [
        f'metadata.annotations[{key}]: Invalid value: "0": must be greater than or equal to 1'
    ]


# --- bad types, many errors, no exceptions ---------------------------------------------------


def test_unquoted_yaml_values_are_one_clear_error_each() -> None:
    obj = job({REQ: BLOCK, SLICE: RACK, SIZE: 4, UNC: True})
    assert check(obj, LEVELS) == [
        f'{A}[{UNC}]: Invalid value: true: must be a string; quote the value in YAML, e.g. "true"',
        f'{A}[{SIZE}]: Invalid value: 4: must be a string; quote the value in YAML, e.g. "4"',
        f"{A}: Invalid value: {MORE_THAN_ONE}",
    ]


def test_constraints_written_as_a_yaml_list() -> None:
    obj = job({REQ: BLOCK, CONS: [{"topology": RACK, "size": 4}]})
    assert check(obj, LEVELS) == [
        f'{C}: Invalid value: [{{"size":4,"topology":"cloud.com/rack"}}]: must be a string; quote the value '
        f"in YAML, "
        'e.g. "[{\\"topology\\":\\"cloud.com/rack\\",\\"size\\":4}]"'
    ]


def test_metadata_maps_of_the_wrong_shape() -> None:
    obj = job()
    obj["spec"]["template"]["metadata"] = {"annotations": ["a"], "labels": "x"}
    assert check(obj) == [
        f'{A}: Invalid value: ["a"]: must be a map of string keys to string values',
        f'{L}: Invalid value: "x": must be a map of string keys to string values',
    ]
    obj["spec"]["template"]["metadata"] = 7
    assert check(obj) == ["spec.template.metadata: Invalid value: 7: must be an object"]


def test_all_errors_are_returned_together() -> None:
    obj = jobset(
        rjob("driver", {REQ: BLOCK, PREF: "Rack!"}, labels={COSCHED: "a"}),
        rjob("workers", {REQ: "cloud.com/rak", SLICE: RACK, SIZE: "9", VOLCANO: "a"}, replicas=8),
    )
    assert check(obj, LEVELS) == [
        f"{P(0)}: Invalid value: {MORE_THAN_ONE}",
        f'{P(0)}[{PREF}]: Invalid value: "Rack!": {NAME_REGEX}',
        f'{P(1)}[{SIZE}]: Invalid value: "9": must not be greater than pod set count 8',
        f'{P(1)}[{REQ}]: Unsupported value: "cloud.com/rak": not a level of the Topology; {SUPPORTED}',
        f"{P(1)}[{VOLCANO}]: Forbidden: may not be set together with the Coscheduling label "
        f"{P(0).replace('annotations', 'labels')}[{COSCHED}]: a workload must use one gang scheduler, and "
        f"pods split "
        "between two PodGroups never reach either quorum",
    ]


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
JSONISH = st.one_of(
    st.text(alphabet='[]{}",:0123456789.-+eEtopologysizenul \\', max_size=60),
    JUNK.map(lambda v: json.dumps(v, default=str)),
)
KEYS = [REQ, PREF, UNC, SLICE, SIZE, CONS, GROUP, OFFSET, VOLCANO]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(KEYS), JUNK | JSONISH | st.sampled_from(LEVELS), max_size=6),
    st.dictionaries(
        st.sampled_from([COSCHED, "pod-group.scheduling.sigs.k8s.io/min-available"]), JUNK, max_size=2
    ),
)
def test_never_raises(annotations: dict[str, Any], labels: dict[str, Any]) -> None:
    obj = jobset(rjob("a", annotations, labels=labels), rjob("b", annotations, replicas=3))
    errors = validate_workload(view_workload(must_extract(obj)), LEVELS, lambda level: level != HOST)
    assert all(isinstance(e, FieldError) and e.path for e in errors)
    assert len({str(e) for e in errors}) == len(errors)
