"""A native group's pods, and the pods bound before it, count what the kube-scheduler counts.

Found against the real v1.36.5 scheduler (tests/e2e_native, row ``limitrange-job-rack-6-wait``):
a Job of 1-GPU pods stating no cpu or memory, in a namespace whose LimitRange fills in 16 cpu and
128Gi per container (LimitRanger, at each pod's CREATE, before the scheduler sees it). Two such
pods fit a node, so a rack gang of 6 needs an empty rack and must wait; judged on the template as
written (1 GPU, nothing else) it was admitted as fitting now. Fed with the captured cluster of
tests/fixtures/native (racks r0..r3 with 16, 20, 12, 22 GPUs free).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from e2e.native_rows_more import limit_range
from tests.webhook.test_native import BASE, _submitted
from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.state.cluster import build_state
from webhook.state.native_nonzero import nonzero_extra

GPU = "nvidia.com/gpu"
RACK = "topology.example.com/rack"


def _gpu_only_job_in_group(pods: int) -> list[dict[str, Any]]:
    """The captured Job-in-PodGroup scenario with ``pods`` 1-GPU pods stating no cpu or memory."""
    gang, _, _ = _submitted("job-in-group.yaml")
    gang = copy.deepcopy(gang)
    for obj in gang:
        if obj["kind"] == "Job":
            obj["spec"]["parallelism"] = obj["spec"]["completions"] = pods
            (c,) = obj["spec"]["template"]["spec"]["containers"]
            c["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
        elif obj["kind"] in ("Workload", "PodGroup"):
            specs = [obj["spec"]] if obj["kind"] == "PodGroup" else obj["spec"]["podGroupTemplates"]
            for s in specs:
                s["schedulingPolicy"] = {"gang": {"minCount": pods}}
    return gang


def _judge(obj: dict[str, Any], objects: list[dict[str, Any]]) -> Decision:
    return decide(Review(obj, obj["metadata"]["namespace"]), build_state(objects), Policy("test"))


def _group(gang: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [o for o in gang if o["kind"] == "PodGroup"]
    return found


def test_limit_range_defaults_count_in_a_native_group() -> None:
    gang = _gpu_only_job_in_group(6)
    ns = _group(gang)["metadata"]["namespace"]
    with_defaults = _judge(_group(gang), BASE + gang + [limit_range(ns)])
    assert with_defaults.allowed and with_defaults.reason is Reason.WAITS, with_defaults.message
    (verdict,) = with_defaults.pod_sets
    assert verdict.requests["cpu"] == 16_000 and verdict.requests["memory"] == 128 * 2**30
    assert verdict.now is not None and verdict.now.fit_count == 5  # r1 and r3: 1 + 2 + 2
    # The same Job without the LimitRange: 1-GPU pods, room for 6 in every rack but r2.
    plain = _judge(_group(gang), BASE + gang)
    assert plain.reason is Reason.FITS, plain.message


def test_limit_range_defaults_make_a_never_fit_of_a_rack_gang_too_large() -> None:
    """7 pods of 16 cpu: at most 6 per rack even empty (the GPUs alone would allow 24)."""
    gang = _gpu_only_job_in_group(7)
    ns = _group(gang)["metadata"]["namespace"]
    denied = _judge(_group(gang), BASE + gang + [limit_range(ns)])
    assert not denied.allowed and denied.reason is Reason.NEVER_FITS
    assert "holds at most 6 of the 7 pods" in denied.message
    assert _judge(_group(gang), BASE + gang).allowed


def test_limit_range_of_another_namespace_changes_nothing() -> None:
    gang = _gpu_only_job_in_group(6)
    assert _judge(_group(gang), BASE + gang + [limit_range("elsewhere")]).reason is Reason.FITS


# -- NonZeroRequested: bound pods that state no cpu or memory ------------------------------------


def _bound(name: str, node: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod as the API server stores it once bound (``spec.nodeName``), Running."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "agents"},
        "spec": {"nodeName": node, "containers": containers},
        "status": {"phase": "Running"},
    }


def _rack_gang_of_two_avoiding_r0_r2() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The captured rack gang, cut to 2 pods of 4 GPUs kept off racks r0 and r2 (affinity)."""
    gang, unbound, _ = _submitted("rack-gang.yaml")
    gang, pods = copy.deepcopy(gang), copy.deepcopy(unbound[:2])
    for obj in gang:
        specs = [obj["spec"]] if obj["kind"] == "PodGroup" else obj["spec"]["podGroupTemplates"]
        for s in specs:
            s["schedulingPolicy"] = {"gang": {"minCount": 2}}
    term = {"matchExpressions": [{"key": RACK, "operator": "NotIn", "values": ["r0", "r2"]}]}
    for p in pods:
        p["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return gang + pods, _group(gang)


TWO_GPUS = {"name": "c", "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: "2"}}}


def test_best_effort_pods_bound_tip_the_placement_score() -> None:
    """r1 and r3 are equally used once a 2-GPU pod sits on r3-h0 (tied: the scheduler picks at
    random). 20 best-effort agents bound on r3-h1 count 100m / 200Mi each in the scheduler's
    NonZeroRequested: r3 scores 51 (cpu 52, memory 50) against r1's 50, and the scheduler took
    r3 (e2e row ``besteffort-bound-tips-rack-2``). Their zero requests alone left it a tie."""
    objects, group = _rack_gang_of_two_avoiding_r0_r2()
    tied = _judge(group, BASE + objects + [_bound("two", "r3-h0", [TWO_GPUS])])
    (verdict,) = tied.pod_sets
    assert verdict.native is not None and verdict.native["tiedDomains"] == ["r1", "r3"]
    agents = [_bound(f"agent-{i}", "r3-h1", [{"name": "a", "image": "agent"}]) for i in range(20)]
    tipped = _judge(group, BASE + objects + [_bound("two", "r3-h0", [TWO_GPUS]), *agents])
    (verdict,) = tipped.pod_sets
    assert verdict.native is not None and verdict.native["tiedDomains"] == ["r3"]
    scores = {d["value"]: d["nodeResourcesFit"] for d in verdict.native["domains"]}
    assert scores["r3"] == 51 and scores["r1"] == 50
    assert verdict.now is not None and verdict.now.assignment is not None
    assert [d.values for d in verdict.now.assignment.domains] == [("r3",)]


def test_finished_or_unbound_agents_count_nothing() -> None:
    objects, group = _rack_gang_of_two_avoiding_r0_r2()
    done = [_bound(f"agent-{i}", "r3-h1", [{"name": "a", "image": "agent"}]) for i in range(20)]
    for p in done:
        p["status"]["phase"] = "Succeeded"
    decision = _judge(group, BASE + objects + [_bound("two", "r3-h0", [TWO_GPUS]), *done])
    (verdict,) = decision.pod_sets
    assert verdict.native is not None and verdict.native["tiedDomains"] == ["r1", "r3"]


@pytest.mark.parametrize(
    ("spec", "extra"),
    [
        ({"containers": [{"name": "a"}]}, (100, 200 * 2**20)),
        ({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}, (0, 0)),
        # a request set to zero is stated: it stays zero (applyNonMissing looks for the key)
        ({"containers": [{"name": "a", "resources": {"requests": {"cpu": "0", "memory": "0"}}}]}, (0, 0)),
        # per container, not per pod
        (
            {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}]},
            (100, 400 * 2**20),
        ),
        # init containers run one at a time: the larger of them and the app containers
        ({"containers": [{"name": "a"}], "initContainers": [{"name": "i"}]}, (100, 200 * 2**20)),
        # a pod-level request stands for the pod
        ({"resources": {"requests": {"cpu": "2"}}, "containers": [{"name": "a"}]}, (0, 200 * 2**20)),
    ],
)
def test_nonzero_extra_follows_the_scheduler(spec: dict[str, Any], extra: tuple[int, int]) -> None:
    assert nonzero_extra(spec) == extra


def test_policy_tightest_level_sizes_the_pods_with_thelimit_range() -> None:
    """3 pods of 1 GPU fit one host as written; with the LimitRange's 16 cpu only 2 do. Sized
    without it, the PodGroup got the hostname key and then its own verdict denied it."""
    from tests.webhook.test_native import _native_policy  # noqa: PLC0415

    gang = _gpu_only_job_in_group(3)
    group = _group(gang)
    group["spec"].pop("schedulingConstraints")
    objects = BASE + gang + [limit_range(group["metadata"]["namespace"])]
    decision = decide(
        Review(group, group["metadata"]["namespace"]), build_state(objects), _native_policy("tightest")
    )
    assert decision.allowed, decision.message
    rack = {"topology": [{"key": RACK}]}
    assert decision.patch == ({"op": "add", "path": "/spec/schedulingConstraints", "value": rack},)
