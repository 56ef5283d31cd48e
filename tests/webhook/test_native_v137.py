"""The native backend on Kubernetes v1.37.0's objects, as the real components left them
(tests/fixtures/native-v137, docs/native-v137.md).

Each scenario is judged as it was at submit (gang objects without status, pods unbound) on the
captured cluster plus the served versions' discovery documents; the verdict must be what the real
v1.37.0 scheduler did: ``PodGroupInitiallyScheduled=True`` is admitted, a group it left pending
never fits unless the scenario is the must-wait one. A CompositePodGroup is judged with its
siblings; v1.37's one-priority rule and version skew are denials with their numbers.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.test_native import _native_policy
from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.live.native import (
    API_KINDS,
    COMPOSITES,
    POD_GROUPS,
    POD_GROUPS_V1BETA1,
    WORKLOADS,
    WORKLOADS_V1BETA1,
    NativeBook,
)
from webhook.live.usage import UsageBook
from webhook.model.workloads.native import read_native
from webhook.state.cluster import ClusterState, build_state
from webhook.state.preemptible import after_preemption
from webhook.track.ledger import Ledger
from webhook.track.native import as_workload, parse_native_group
from webhook.wire.errors import InvalidObject

FIXTURES = Path(__file__).parents[1] / "fixtures" / "native-v137"
SCENARIOS = sorted(p.name for p in FIXTURES.glob("*.yaml") if p.name != "state.yaml")
GANG_KINDS = ("Workload", "PodGroup", "CompositePodGroup", "Job")


def _docs(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and str(doc.get("kind", "")).endswith("List"):
            out += doc["items"]
        elif doc:
            out.append(doc)
    return out


DISCOVERY = [json.loads((FIXTURES / f).read_text()) for f in ("discovery.json", "discovery-v1alpha3.json")]
BASE = _docs(FIXTURES / "state.yaml") + DISCOVERY


def _submitted(scenario: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(gang objects without status, pods unbound)."""
    docs = _docs(FIXTURES / scenario)
    unbound = []
    for p in (d for d in docs if d["kind"] == "Pod"):
        q = copy.deepcopy(p)
        q["spec"].pop("nodeName", None)
        q.pop("status", None)
        unbound.append(q)
    gang = [copy.deepcopy(d) for d in docs if d["kind"] in GANG_KINDS]
    for d in gang:
        d.pop("status", None)
    return gang, unbound


def _scheduled(pg: Mapping[str, Any]) -> bool:
    return any(
        c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "True"
        for c in (pg.get("status") or {}).get("conditions", [])
    )


def _judge(obj: Mapping[str, Any], state: ClusterState) -> Decision:
    return decide(Review(obj, obj["metadata"]["namespace"]), state, Policy("test"))


def test_the_served_release_is_read_from_discovery() -> None:
    state = build_state(BASE)
    assert state.native.served and state.native.minor == 37 and state.native.minor_known


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_pod_group_verdict_agrees_with_the_v137_scheduler(scenario: str) -> None:
    gang, unbound = _submitted(scenario)
    state = build_state(BASE + gang + unbound)
    groups = [d for d in _docs(FIXTURES / scenario) if d["kind"] == "PodGroup"]
    assert groups, scenario
    for pg in groups:
        (submitted,) = [d for d in gang if d["kind"] == "PodGroup" and d["metadata"] == pg["metadata"]]
        d = _judge(submitted, state)
        if _scheduled(pg):
            assert d.allowed and d.reason is Reason.FITS, (scenario, d.message, d.warnings)
        elif "must-wait" in scenario:
            assert d.allowed and d.reason is Reason.WAITS, (scenario, d.message)
        else:
            assert not d.allowed and d.reason is Reason.NEVER_FITS, (scenario, d.reason, d.warnings)


def test_a_job_is_a_gang_only_when_it_asks_in_spec_scheduling() -> None:
    """Every root Job gets a PodGroup on v1.37; basic unless spec.scheduling asks for a gang."""
    gang, _ = _submitted("job-basic.yaml")
    (job,) = [d for d in gang if d["kind"] == "Job"]
    d = _judge(job, build_state(BASE))
    (v,) = d.pod_sets
    assert d.reason is Reason.FITS and d.audit["backend"] == "native" and v.native["policy"] == "basic"
    gang, _ = _submitted("job-never-fits.yaml")
    (job,) = [d for d in gang if d["kind"] == "Job"]
    d = _judge(job, build_state(BASE))
    assert not d.allowed and d.audit["backend"] == "native"
    assert "gang minCount 2" in d.message  # minCount defaults to the Job's parallelism


def test_a_composite_that_no_block_holds_is_denied_with_the_count() -> None:
    gang, unbound = _submitted("composite-never-fits.yaml")
    state = build_state(BASE + gang + unbound)
    (cpg,) = [d for d in gang if d["kind"] == "CompositePodGroup"]
    d = _judge(cpg, state)
    assert not d.allowed and d.reason is Reason.NEVER_FITS
    assert 'CompositePodGroup "cpgno-set" (gang minGroupCount 2 of 2 child groups' in d.message
    assert "holds at most 0 of its child groups together" in d.message


def test_a_composite_met_without_one_child_does_not_deny_its_workload() -> None:
    gang, unbound = _submitted("composite-min-group-count.yaml")
    state = build_state(BASE + gang + unbound)
    (wl,) = [d for d in gang if d["kind"] == "Workload"]
    d = _judge(wl, state)
    assert d.allowed, d.message
    assert any("may still run without it" in w for w in d.warnings)


def _blocks_full(gang: list[dict[str, Any]], unbound: list[dict[str, Any]]) -> ClusterState:
    """The captured cluster with every node's GPUs taken by one more bound pod each."""
    nodes = [d for d in BASE if d["kind"] == "Node"]
    fillers = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"fill-{n['metadata']['name']}", "namespace": "default"},
            "spec": {
                "nodeName": n["metadata"]["name"],
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
            },
            "status": {"phase": "Running"},
        }
        for n in nodes
    ]
    return build_state(BASE + fillers + gang + unbound)


def test_a_composite_that_fits_an_empty_block_waits_when_none_is_free() -> None:
    gang, unbound = _submitted("composite-block.yaml")
    state = _blocks_full(gang, unbound)
    (cpg,) = [d for d in gang if d["kind"] == "CompositePodGroup"]
    d = _judge(cpg, state)
    assert d.allowed and d.reason is Reason.WAITS
    assert any('CompositePodGroup "cpg-set" must wait' in w for w in d.warnings)


PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "first"},
}


def test_pods_whose_priority_is_not_their_groups_are_denied_with_both_numbers() -> None:
    gang, unbound = _submitted("rack-gang.yaml")
    for pod in unbound:
        pod["spec"]["priorityClassName"] = "first"
        pod["spec"].pop("priority", None)  # admission resolves it from the class
    state = build_state([*BASE, {**PRIORITY_CLASS, "value": 1000}, *gang, *unbound])
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    d = _judge(pg, state)
    assert not d.allowed and d.reason is Reason.NEVER_FITS
    assert 'its pods have priority 1000 (PriorityClass "first") but the group has 0' in d.message
    d = _judge(unbound[0], state)  # one more such pod
    assert not d.allowed and "priority 1000" in d.message


def test_the_group_priority_from_its_class_is_no_mismatch() -> None:
    gang, unbound = _submitted("rack-gang.yaml")
    for pod in unbound:
        pod["spec"]["priorityClassName"] = "first"
        pod["spec"].pop("priority", None)  # admission resolves it from the class
    for obj in gang:
        if obj["kind"] == "PodGroup":
            obj["spec"]["priorityClassName"], obj["spec"]["priority"] = "first", 1000
    state = build_state([*BASE, {**PRIORITY_CLASS, "value": 1000}, *gang, *unbound])
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    assert _judge(pg, state).reason is Reason.FITS


def test_a_v1alpha2_object_on_v137_is_refused_as_unserved() -> None:
    gang, _ = _submitted("rack-gang.yaml")
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    old = {**pg, "apiVersion": "scheduling.k8s.io/v1alpha2"}
    d = _judge(old, build_state(BASE))
    assert not d.allowed and d.reason is Reason.INVALID
    assert "not served by this cluster (Kubernetes v1.37" in d.message


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"podGroupTemplates": [], "compositePodGroupTemplates": []}, "spec"),
        (
            {
                "compositePodGroupTemplates": [
                    {"name": "c", "schedulingPolicy": {"gang": {"minGroupCount": 0}}}
                ]
            },
            "spec.compositePodGroupTemplates[0].schedulingPolicy.gang.minGroupCount",
        ),
    ],
)
def test_malformed_v1beta1_workloads_name_their_field(spec: dict[str, Any], field: str) -> None:
    obj = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": spec,
    }
    with pytest.raises(InvalidObject) as caught:
        read_native(obj)
    assert field in str(caught.value)


def test_live_book_reads_the_v137_kinds() -> None:
    book = NativeBook()
    docs = _docs(FIXTURES / "composite-block.yaml")
    by_kind = {"Workload": WORKLOADS_V1BETA1, "PodGroup": POD_GROUPS_V1BETA1, "CompositePodGroup": COMPOSITES}
    for kind, name in by_kind.items():
        items = {
            (d["metadata"]["namespace"], d["metadata"]["name"]): read_native(d)
            for d in docs
            if d["kind"] == kind
        }
        book.commit(name, items)
    index = book.index()
    assert index.minor == 37 and index.minor_known
    assert ("capture-12", "cpg-set") in index.composites
    assert index.pod_groups[("capture-12", "cpg-leader")].parent == "cpg-set"


HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def _high_priority(
    scenario: str, policy: str = "PreemptLowerPriority"
) -> tuple[ClusterState, dict[str, Any]]:
    """The scenario's group and pods at priority 1000 over the captured blockers (priority 0)."""
    gang, unbound = _submitted(scenario)
    for pod in unbound:
        pod["spec"].update(priorityClassName="high", priority=1000, preemptionPolicy=policy)
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    pg["spec"].update(priorityClassName="high", priority=1000, preemptionPolicy=policy)
    return build_state([*BASE, HIGH, *gang, *unbound]), pg


def test_a_group_that_fits_once_lower_priority_pods_are_evicted_is_admitted() -> None:
    state, pg = _high_priority("rack-must-wait.yaml")
    d = _judge(pg, state)
    assert d.allowed and d.reason is Reason.FITS, d.warnings
    assert any("fits now only by preemption" in w for w in d.warnings)
    (v,) = d.pod_sets
    assert v.now is not None and v.now.assignment is not None  # where it lands after eviction


def test_a_group_that_may_not_preempt_waits() -> None:
    state, pg = _high_priority("rack-must-wait.yaml", policy="Never")
    d = _judge(pg, state)
    assert d.allowed and d.reason is Reason.WAITS


def test_live_usage_keeps_each_pods_priority() -> None:
    book = UsageBook()
    book.set("ns/a", ("n1", {"cpu": 1000, "pods": 1}, False, 5))
    book.set("ns/b", ("n1", {"cpu": 500, "pods": 1}, False, 0))
    state = book.publish(build_state([]), 1)
    assert dict(state.ranked_usage["n1"]) == {"cpu@5": 1000, "pods@5": 1}  # priority 0 is the rest
    book.set("ns/a", None)
    assert "n1" not in book.with_ranked(state).ranked_usage


@pytest.mark.parametrize(
    ("priority", "left", "victims"),
    [
        (10, {"cpu": 0, "pods": 0}, 3),  # above everyone: every pod goes
        (5, {"cpu": 1000, "pods": 1}, 2),  # the priority-0 pod and the one at -5
        (0, {"cpu": 1300, "pods": 2}, 1),  # only the one at -5
        (-5, {"cpu": 1500, "pods": 3}, 0),
    ],
)
def test_preemption_frees_exactly_the_pods_below_the_groups_priority(
    priority: int, left: dict[str, int], victims: int
) -> None:
    usage = {"n1": {"cpu": 1500, "pods": 3}}  # pods at 5 (1000m), 0 (300m), -5 (200m)
    ranked = {"n1": {"cpu@5": 1000, "pods@5": 1, "cpu@-5": 200, "pods@-5": 1}}
    freed, evicted = after_preemption(usage, ranked, priority)
    assert (dict(freed["n1"]), evicted) == (left, victims)


def test_the_tracker_reads_v137s_condition_and_version() -> None:
    docs = _docs(FIXTURES / "rack-gang.yaml")
    (pg,) = [d for d in docs if d["kind"] == "PodGroup"]
    record = parse_native_group(pg)
    assert record.scheduled and not record.problem
    assert record.spec["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert as_workload(record, ()).api == "scheduling.k8s.io/v1beta1"
    ledger = Ledger()
    ledger.replace("nativepodgroups-v1beta1", [pg])
    ledger.replace(
        "nativepodgroups", []
    )  # v1alpha2 not served on v1.37: its empty list drops no v1beta1 group
    assert record.key in ledger.native


def test_policy_topology_reaches_the_job_controllers_v1beta1_pod_group() -> None:
    """The Job is judged with the key the policy gives; its PodGroup gets it at its own CREATE."""
    gang, unbound = _submitted("job-gang.yaml")
    state = build_state(BASE + gang + unbound)
    policy = _native_policy("topology.example.com/rack")
    (job,) = [d for d in gang if d["kind"] == "Job"]
    d = decide(Review(job, job["metadata"]["namespace"]), state, policy)
    (v,) = d.pod_sets
    assert d.reason is Reason.FITS and v.request.level == "topology.example.com/rack"
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    d = decide(Review(pg, pg["metadata"]["namespace"]), state, policy)
    key = {"topology": [{"key": "topology.example.com/rack"}]}
    assert d.patch == ({"op": "add", "path": "/spec/schedulingConstraints", "value": key},)


def test_composite_children_are_predicted_inside_the_block_the_scheduler_chose() -> None:
    """The captured scheduler put the whole composite in one block; each child's predicted rack
    is where its pods were bound (the composite placement is scored, then children placed in it)."""
    gang, unbound = _submitted("composite-block.yaml")
    state = build_state(BASE + gang + unbound)
    labels = {d["metadata"]["name"]: d["metadata"]["labels"] for d in BASE if d.get("kind") == "Node"}
    docs = _docs(FIXTURES / "composite-block.yaml")
    for pg in (d for d in gang if d["kind"] == "PodGroup"):
        name = pg["metadata"]["name"]
        racks = {
            labels[p["spec"]["nodeName"]]["topology.example.com/rack"]
            for p in docs
            if p["kind"] == "Pod" and p["spec"]["schedulingGroup"]["podGroupName"] == name
        }
        (v,) = _judge(pg, state).pod_sets
        assert v.now is not None and v.now.assignment is not None
        assert {d.values[0] for d in v.now.assignment.domains} == racks, name


def test_the_native_api_is_decided_served_when_v137s_versions_answer_after_v1alpha2s_404() -> None:
    """v1.37 answers 404 for v1alpha2 first: that alone must not decide "not served" (the Jobs
    and unbound pods would then not be listed until the next re-check)."""
    book = NativeBook()
    book.absent(WORKLOADS)
    book.absent(POD_GROUPS)
    assert not book.decided.is_set()
    book.commit(POD_GROUPS_V1BETA1, {})
    assert book.decided.is_set() and book.api_served
    nothing = NativeBook()
    for kind in API_KINDS:
        nothing.absent(kind)
    assert nothing.decided.is_set() and not nothing.api_served
