"""tasgate makes the native gang of a workload the Job controller makes none of
(``decide.native.create``): the patch pointing its templates at the PodGroup, the Workload and
PodGroup handed to the reconciler, and the verdict of a Workload of that shape.

The cluster is the captured v1.36.5 one (``tests/fixtures/native/state.yaml``, 16/20/12/22 GPUs
free per rack, 24 each when empty) with the discovery document that shows the API served; the
Job is the fixture's as kube-apiserver stored it, made NonIndexed (no gang candidate).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from webhook.cli.check import Result
from webhook.cli.render import render
from webhook.decide.decision import decide
from webhook.decide.native.create import native_objects
from webhook.decide.patch import MapEntry, added_keys, apply_entries, build_patch
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.model.workloads.native import read_native, scheduling_group
from webhook.state.cluster import ClusterState, build_state

from .test_native import BASE, FIXTURES, _native_policy, _submitted

RACK = "topology.example.com/rack"
NS = "capture-0"
DISCOVERY = json.loads((FIXTURES / "discovery.json").read_text())
SERVED = build_state([*BASE, DISCOVERY])


def nonindexed_job(pods: int, name: str = "trainer") -> dict[str, Any]:
    gang, _, _ = _submitted("job-gang.yaml")
    (job,) = [copy.deepcopy(d) for d in gang if d["kind"] == "Job"]
    job["metadata"]["name"] = name
    job["spec"].pop("completionMode")
    job["spec"]["parallelism"] = job["spec"]["completions"] = pods
    return dict(job)


def jobset(replicas: int, gpus: tuple[int, int]) -> dict[str, Any]:
    def replicated(name: str, count: int, per_pod: int) -> dict[str, Any]:
        resources = {"requests": {"cpu": str(4 * per_pod), "memory": f"{32 * per_pod}Gi",
                                  "nvidia.com/gpu": str(per_pod)}}  # fmt: skip
        pod = {"containers": [{"name": "c", "image": "i", "resources": resources}], "restartPolicy": "Never"}
        return {"name": name, "replicas": count, "template": {"spec": {"parallelism": 1, "completions": 1,
                "template": {"spec": pod}}}}  # fmt: skip

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": NS},
        "spec": {
            "replicatedJobs": [replicated("driver", 1, gpus[0]), replicated("workers", replicas, gpus[1])]
        },
    }


def judged(obj: dict[str, Any], policy: Policy | None = None, state: ClusterState = SERVED) -> Decision:
    return decide(Review(obj, NS), state, policy or _native_policy(RACK))


def test_a_job_the_job_controller_leaves_alone_is_made_a_gang_tasgate_creates() -> None:
    d = judged(nonindexed_job(3))
    assert (d.allowed, d.reason) == (True, Reason.FITS)
    assert d.patch == (
        {
            "op": "add",
            "path": "/spec/template/spec/schedulingGroup",
            "value": {"podGroupName": "trainer-gang"},
        },
    )
    workload, pod_group = d.pod_groups
    topology = {"topology": [{"key": RACK}]}
    assert workload == {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": "trainer", "namespace": NS},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "trainer"},
            "podGroupTemplates": [
                {
                    "name": "gang",
                    "schedulingPolicy": {"gang": {"minCount": 3}},
                    "schedulingConstraints": topology,
                }
            ],
        },
    }
    assert pod_group == {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "trainer-gang", "namespace": NS},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "trainer", "podGroupTemplateName": "gang"}},
            "schedulingPolicy": {"gang": {"minCount": 3}},
            "schedulingConstraints": topology,
        },
    }
    (v,) = d.pod_sets
    assert v.now is not None and v.now.assignment is not None and v.now.assignment.levels == (RACK,)
    assert d.audit["native-group"] == "trainer-gang" and d.audit["backend"] == "native"
    assert added_keys(d.patch[0]) == ["schedulingGroup"]


def test_the_objects_pass_the_api_servers_validation_as_tasgate_models_it() -> None:
    workload, pod_group = native_objects(nonindexed_job(3), NS, 3, RACK)
    wl, pg = read_native(workload), read_native(pod_group)
    assert [(g.name, g.policy, g.min_count, g.key) for g in wl.groups] == [("gang", "gang", 3, RACK)]
    assert pg.template_ref == ("trainer", "gang") and pg.groups[0].key == RACK
    assert wl.controller is not None and wl.controller[:3] == ("batch", "Job", "trainer")


def test_patched_job_is_judged_again_without_a_patch_and_the_same_objects() -> None:
    """/validate (and a reinvoked /mutate, and the reconciler on the stored Job) see the patch applied."""
    job = nonindexed_job(3)
    first = judged(job)
    stored = apply_entries(job, first.patch)
    assert scheduling_group(stored["spec"]["template"]["spec"]) == "trainer-gang"
    again = judged(stored)
    assert again.patch == () and again.pod_groups == first.pod_groups and again.reason is Reason.FITS


def test_the_created_workload_and_pod_group_are_judged_fits_from_the_job() -> None:
    """Their own CREATE reviews (tasgate watches them too): the stored Job gives their pods."""
    job = nonindexed_job(3)
    first = judged(job)
    stored = apply_entries(job, first.patch)
    state = build_state([*BASE, DISCOVERY, stored])
    for obj in first.pod_groups:
        d = decide(Review(obj, NS), state, _native_policy(RACK))
        assert (d.kind, d.reason, d.patch) == (obj["kind"], Reason.FITS, ())


def test_a_gang_no_rack_holds_is_denied_with_the_numbers_and_nothing_made() -> None:
    d = judged(nonindexed_job(7))
    assert (d.allowed, d.reason) == (False, Reason.NEVER_FITS)
    assert 'pod group "trainer-gang" (gang minCount 7' in d.message
    assert 'one "topology.example.com/rack" domain holds at most 6 of the 7 pods' in d.message
    assert d.patch == () and d.pod_groups == ()


def test_must_wait_is_admitted_with_the_figures_and_still_made() -> None:
    d = judged(nonindexed_job(6))  # 24 GPUs: every rack when empty, none now (at most 22 free)
    assert (d.allowed, d.reason) == (True, Reason.WAITS)
    assert any('pod group "trainer-gang" must wait' in w for w in d.warnings)
    assert len(d.pod_groups) == 2 and d.patch


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda j: j["metadata"].setdefault("labels", {}).update({"kueue.x-k8s.io/queue-name": "q"}),
            id="kueue-queued",
        ),
        pytest.param(lambda j: j["spec"].update({"completionMode": "Indexed"}), id="job-controller-gang"),
        pytest.param(
            lambda j: j["spec"]["template"]["spec"].update({"schedulingGroup": {"podGroupName": "mine"}}),
            id="user-group",
        ),
        pytest.param(
            lambda j: j["metadata"].setdefault("annotations", {}).update({"tasgate.io/inject": "false"}),
            id="opted-out",
        ),
    ],
)
def test_nothing_is_made_where_another_owns_the_gang(change: Any) -> None:
    job = nonindexed_job(3)
    change(job)
    d = judged(job)
    assert d.pod_groups == ()
    assert not any(op["path"].endswith("/schedulingGroup") for op in d.patch)


def test_nothing_is_made_when_the_api_is_not_served_or_no_rule_asks() -> None:
    job = nonindexed_job(3)
    unserved = judged(job, state=build_state(BASE))
    assert unserved.pod_groups == () and not any("schedulingGroup" in op["path"] for op in unserved.patch)
    plain = judged(job, Policy("test"))
    assert plain.pod_groups == () and plain.patch == ()


def test_an_update_patches_nothing() -> None:
    job = nonindexed_job(3)
    d = decide(Review(job, NS, operation="UPDATE", old_obj=job), SERVED, _native_policy(RACK))
    assert d.pod_groups == () and d.patch == ()


def test_tightest_and_preferred_levels() -> None:
    tight = judged(nonindexed_job(2), _native_policy("tightest"))  # 2 x 4 GPUs: one host holds them
    assert tight.pod_groups[1]["spec"]["schedulingConstraints"] == {
        "topology": [{"key": "kubernetes.io/hostname"}]
    }
    preferred = judged(nonindexed_job(3), _native_policy(RACK, "preferred"))
    assert "schedulingConstraints" not in preferred.pod_groups[1]["spec"]
    assert any("only a required topology" in w for w in preferred.warnings)


def test_every_replica_of_a_jobset_is_one_gang_on_every_template() -> None:
    d = judged(jobset(2, (4, 4)))
    assert d.reason is Reason.FITS
    paths = [op["path"] for op in d.patch]
    assert paths == [f"/spec/replicatedJobs/{i}/template/spec/template/spec/schedulingGroup" for i in (0, 1)]
    workload, pod_group = d.pod_groups
    assert workload["spec"]["controllerRef"] == {
        "apiGroup": "jobset.x-k8s.io",
        "kind": "JobSet",
        "name": "js",
    }
    assert pod_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}


def test_templates_of_several_sizes_are_placed_pod_by_pod() -> None:
    """A 16-GPU driver is more than any host (8): the gang never fits, whatever the workers."""
    d = judged(jobset(2, (16, 4)))
    assert d.reason is Reason.NEVER_FITS and "3 pods of several sizes" in d.message


def test_a_map_entry_is_added_whole_and_never_merged() -> None:
    obj = {"spec": {"template": {"spec": {"schedulingGroup": {"podGroupName": "x"}}}}}
    entry = MapEntry(("spec", "template", "spec"), "schedulingGroup", {"podGroupName": "y"})
    assert build_patch(obj, [entry]) == []
    bare: dict[str, Any] = {"spec": {}}
    assert build_patch(bare, [entry]) == [
        {"op": "add", "path": "/spec/template", "value": {"spec": {"schedulingGroup": {"podGroupName": "y"}}}}
    ]


def test_the_text_report_names_the_workload_and_pod_group_it_makes() -> None:
    """`tasgate check` without ``-o json`` prints the native objects' gang size (``minCount``)
    where a Coscheduling PodGroup prints ``minMember``."""
    d = judged(nonindexed_job(3))
    text = render([Result("job.yaml", "admitted", d)])
    assert "  workload: Workload trainer minCount=3" in text.splitlines()
    assert "  podgroup: PodGroup trainer-gang minCount=3" in text.splitlines()
