"""Lifecycle classification (webhook/track) on objects as the real components leave them.

``manifests/lifecycle`` holds the Workloads, Pods and PodGroups of tests/e2e_cluster/test_lifecycle.py
at the end of its run (real Kueue v0.19.2, kube-controller-manager, kwok, Coscheduling, and the
scheduler-plugins controller writing PodGroup status): ``run`` running, ``partial`` 2 of 4 pods
running, ``wide`` queued on a rack that was deleted; ``assembling.yaml`` holds ``held``, admitted
with no room to bind (PodGroup phase ``Scheduling``).
``manifests/kueue_stored`` holds an admitted Workload captured without any pods.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.decide.policy import Policy
from webhook.state.cluster import ClusterState, build_state
from webhook.track.admission import PodSetAdmission
from webhook.track.classify import Gang, State, classify
from webhook.track.compare import REASONS, compare
from webhook.track.fields import timestamp
from webhook.track.ledger import Ledger
from webhook.track.predict import Assessment, PodSetFigure
from webhook.track.records import parse_pod, parse_pod_group, parse_workload

from .conftest import GPU, HOST, MANIFESTS, kueue_objects, node

LIFECYCLE = MANIFESTS / "lifecycle"
RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _captured() -> Ledger:
    ledger = Ledger()
    ledger.replace("workloads", _docs(LIFECYCLE / "workloads.yaml"))
    ledger.replace("pods", _docs(LIFECYCLE / "pods.yaml"))
    ledger.replace("podgroups", _docs(LIFECYCLE / "podgroups.yaml"))
    return ledger


def _captured_apart(file: str) -> Ledger:
    """A gang captured with its Workload, Pods and PodGroup in one file."""
    docs = _docs(LIFECYCLE / file)
    ledger = Ledger()
    for kind, lister in (("Workload", "workloads"), ("Pod", "pods"), ("PodGroup", "podgroups")):
        ledger.replace(lister, [d for d in docs if d["kind"] == kind])
    return ledger


def _last_time() -> float:
    """The latest timestamp in the captured objects: "now" for the classification."""
    text = "".join(p.read_text() for p in LIFECYCLE.glob("*.yaml"))
    stamps = [timestamp(w.strip("'\" ")) for w in text.split() if w.startswith(("'20", '"20', "20"))]
    return max(s for s in stamps if s is not None)


def _by_owner(ledger: Ledger, now: float, partial_after: float = 5.0) -> dict[str, Any]:
    return {
        t.gang.workload.owner.name: t for t in ledger.tracked(now, partial_after) if t.gang.workload.owner
    }


def _e2e_state(racks: dict[str, int], generation: int, *pods: dict[str, Any]) -> ClusterState:
    """The e2e world's TAS side: racks of 8-GPU nodes (pool gpu), its Kueue objects, ``pods``."""
    nodes, n = [], 0
    for rack, hosts in racks.items():
        for _ in range(hosts):
            nodes.append(node(f"n{n}", {"pool": "gpu", BLOCK: "b0", RACK: rack}, cpu="16", memory="64Gi"))
            n += 1
    queues = kueue_objects(
        (BLOCK, RACK, HOST), {"gpu-flavor": {"pool": "gpu"}}, "gpu-topology", "gpu-queue", "gangs", "gpu-cq"
    )  # the e2e world's names (e2e/kueue_scenario.py)
    return build_state([*nodes, *queues, *pods], generation=generation)


def test_captured_gangs_are_running_partial_and_queued() -> None:
    tracked = _by_owner(_captured(), _last_time() + 60)
    run, partial, wide = tracked["run"], tracked["partial"], tracked["wide"]
    assert (run.status.state, run.status.reason) == (State.RUNNING, "AllRunning")
    assert [p.running for p in run.gang.pods] == [True, True] and run.gang.group.min_member == 2
    assert (partial.status.state, partial.status.reason) == (State.PARTIAL_START, "PartialStart")
    assert partial.status.message.startswith("2 of 4 pods running, 2 pending for ")
    assert "PodGroup partial: minMember 2" in partial.status.message
    assert "Insufficient cpu" in partial.status.message  # the scheduler's own words for the rest
    # What the scheduler-plugins controller wrote, beside tasgate's own count from the pods.
    assert run.status.message == "2 of 2 pods running (PodGroup run: minMember 2, phase Running, 2 running)"
    assert "(PodGroup partial: minMember 2, phase Running, 2 running)" in partial.status.message
    # Without tasgate's figures a queued gang is Kueue's: its QuotaReserved reason, verbatim (v0.19.2
    # writes "Pending" for a TAS wait too; its numbers are in the message).
    assert (wide.status.state, wide.status.reason) == (State.WAITING_QUOTA, "Pending")
    assert 'topology "gpu-topology" allows to fit only 2 out of 4 pod(s)' in wide.status.message


def test_captured_pod_groups_carry_the_controllers_phase_and_counts() -> None:
    groups = {
        g.name: (g.phase, g.running, g.succeeded, g.failed, g.min_member)
        for g in map(parse_pod_group, _docs(LIFECYCLE / "podgroups.yaml"))
    }
    assert groups == {
        "run": ("Running", 2, 0, 0, 2),
        "partial": ("Running", 2, 0, 0, 2),  # minMember run: Running, though 2 more pods pend
        "wide": ("Pending", 0, 0, 0, 4),  # queued: the Job is suspended, no pods exist
    }


def test_an_admitted_gang_with_no_room_assembles_in_the_controllers_scheduling_phase() -> None:
    (held,) = _captured_apart("assembling.yaml").tracked(_last_time() + 60, 5.0)
    assert (held.status.state, held.status.reason) == (State.ASSEMBLING, "Scheduling")
    assert held.status.message == (
        "0 of 2 pods scheduled, 0 running (PodGroup held: minMember 2, phase Scheduling, 0 running)"
    )
    assert held.gang.group is not None and held.gang.group.phase == "Scheduling"


def test_a_pod_group_no_controller_wrote_shows_only_its_spec() -> None:
    ledger = _captured()
    run = next(d for d in _docs(LIFECYCLE / "podgroups.yaml") if d["metadata"]["name"] == "run")
    del run["status"]  # as the API server stores it before the controller's first patch
    ledger.put_group(run)
    message = _by_owner(ledger, _last_time() + 60)["run"].status.message
    assert message == "2 of 2 pods running (PodGroup run: minMember 2)"


def test_a_pending_pod_group_shows_no_counts_the_controller_stopped_keeping() -> None:
    ledger = _captured()
    run = next(d for d in _docs(LIFECYCLE / "podgroups.yaml") if d["metadata"]["name"] == "run")
    # What the e2e's eviction leaves: phase back to Pending, running as last counted (seen: 1).
    run["status"] = {**run["status"], "phase": "Pending", "running": 1}
    ledger.put_group(run)
    message = _by_owner(ledger, _last_time() + 60)["run"].status.message
    assert message.endswith("(PodGroup run: minMember 2, phase Pending)")


def test_a_partial_start_needs_the_policy_bound_to_pass() -> None:
    ledger = _captured()
    pending = [p for p in ledger.pods.values() if p.pending]
    start = max(p.created for p in pending if p.created is not None)
    assert _by_owner(ledger, start + 1, partial_after=300)["partial"].status.state is State.ASSEMBLING
    assert _by_owner(ledger, start + 301, partial_after=300)["partial"].status.state is State.PARTIAL_START


def test_captured_admission_reads_as_the_e2e_checked_it() -> None:
    run = next(w for w in _captured().workloads.values() if w.owner and w.owner.name == "run")
    (podset,) = run.admission.values()
    assert (run.cluster_queue, podset.name, podset.count, podset.flavor) == (
        "gpu-cq",
        "main",
        2,
        "gpu-flavor",
    )
    assert sum(podset.pods_at(HOST).values()) == 2 and run.owner.kind == "Job"


def test_queued_gang_waits_for_topology_then_never_fits_when_its_rack_is_lost(default_policy: Policy) -> None:
    ledger = _captured()
    key = next(k for k, w in ledger.workloads.items() if w.owner and w.owner.name == "wide")
    assert key in ledger.specs  # queued: its PodSets are kept for tasgate's figures
    now = _last_time() + 60
    # The e2e's blocker pod holds one node of the only 4-node rack.
    ledger.assess_queued(_e2e_state({"b0-r0": 2, "b0-r1": 2, "b0-r2": 4}, 1, _pod_on("n4")), default_policy)
    wide = _by_owner(ledger, now)["wide"]
    assert (wide.status.state, wide.status.reason) == (State.WAITING_TOPOLOGY, "WaitingForCapacity")
    assert "has room for 3 of 4 pods now (1 short)" in wide.status.message
    assert "Kueue: couldn't assign flavors to pod set main" in wide.status.message
    ledger.assess_queued(_e2e_state({"b0-r0": 2, "b0-r1": 2}, 2), default_policy)
    wide = _by_owner(ledger, now)["wide"]
    assert (wide.status.state, wide.status.reason) == (State.NEVER_FITS, "CapacityLost")
    assert "the largest rack holds 2 such pods even when empty" in wide.status.message


def test_a_gang_tasgate_never_saw_fit_never_fits_without_blaming_lost_capacity(
    default_policy: Policy,
) -> None:
    ledger = _captured()
    ledger.assess_queued(_e2e_state({"b0-r0": 2, "b0-r1": 2}, 1), default_policy)
    wide = _by_owner(ledger, _last_time())["wide"]
    assert (wide.status.state, wide.status.reason) == (State.NEVER_FITS, "NeverFits")


def test_admission_drops_the_kept_pod_sets() -> None:
    ledger = Ledger()
    stored = _docs(MANIFESTS / "kueue_stored" / "job-workload.yaml")[0]
    before, record = ledger.put_workload(stored)
    assert before is None and record.admission is not None
    assert record.key not in ledger.specs  # admitted: nothing of its templates is kept
    queued = copy.deepcopy(stored)
    del queued["status"]["admission"]
    ledger.put_workload(queued)
    assert record.key in ledger.specs and set(ledger.specs[record.key]["spec"]) == {"podSets"}


def test_admitted_without_pods_is_assembling_and_kueue_conditions_win() -> None:
    stored = _docs(MANIFESTS / "kueue_stored" / "job-workload.yaml")[0]
    record = parse_workload(stored)
    status = classify(Gang(record), 0.0, 300)
    assert (status.state, status.message) == (State.ASSEMBLING, "0 of 4 pods scheduled, 0 running")
    for kind, reason, state in (
        ("Evicted", "NodeFailures", State.EVICTED),
        ("Finished", "Succeeded", State.FINISHED),
    ):
        changed = copy.deepcopy(stored)
        changed["status"]["conditions"].append(
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        )
        found = classify(Gang(parse_workload(changed)), 0.0, 300)
        assert (found.state, found.reason, found.message) == (state, reason, "m")


def test_pods_of_a_workload_are_found_by_kueue_annotation_or_owner() -> None:
    workload = parse_workload(_docs(MANIFESTS / "kueue_stored" / "job-workload.yaml")[0])
    tas = parse_pod({"metadata": {"namespace": workload.namespace, "name": "p", "annotations": {
        "kueue.x-k8s.io/workload": workload.name}}})  # fmt: skip
    owned = parse_pod({"metadata": {"namespace": workload.namespace, "name": "q", "ownerReferences": [
        {"uid": workload.owner.uid, "controller": True}]}})  # fmt: skip
    other = parse_pod({"metadata": {"namespace": "elsewhere", "name": "q", "ownerReferences": [
        {"uid": workload.owner.uid}]}})  # fmt: skip
    assert (tas.belongs_to(workload), owned.belongs_to(workload), other.belongs_to(workload)) == (
        True,
        True,
        False,
    )


@pytest.mark.parametrize(
    ("figure", "kueue", "reason"),
    [
        (dict(hosts={"n0": 1, "n1": 1}), dict(domains=((("n0",), 1), (("n1",), 1))), "none"),
        (dict(hosts={"n0": 1, "n1": 1}), dict(domains=((("n2",), 1), (("n3",), 1))), "domain"),
        (
            dict(hosts={"n0": 1, "n1": 1}, flavor="other"),
            dict(domains=((("n0",), 1), (("n1",), 1))),
            "flavor",
        ),
        (dict(hosts={}, fits_now=False), dict(domains=((("n0",), 1), (("n1",), 1))), "fit"),
        (dict(hosts={"n0": 1}), dict(domains=((("n0",), 1), (("n1",), 1))), "count"),
        (dict(hosts={"n0": 1, "n1": 1}, name="other"), dict(domains=()), "podset"),
    ],
)
def test_prediction_comparison_names_the_first_difference(
    figure: dict[str, Any], kueue: dict[str, Any], reason: str
) -> None:
    p = PodSetFigure(**{"name": "main", "count": 2, "flavor": "gpu-flavor", "level": RACK, "fits_now": True,
                        "fits_when_empty": True, **figure})  # fmt: skip
    admission = PodSetAdmission(
        "main", 2, {"cpu": "gpu-flavor", GPU: "gpu-flavor"}, (HOST,), kueue["domains"]
    )
    found = compare({"main": admission}, Assessment(1, (p,)))
    assert found is not None and found.reason == reason and found.reason in REASONS
    assert found.agree is (reason == "none")


def test_no_prediction_is_no_comparison() -> None:
    assert compare({}, Assessment(1, problem="placed without TAS")) is None


def _pod_on(host: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "blocker", "namespace": "gangs"},
        "spec": {"nodeName": host, "containers": [{"name": "c", "resources": {"requests": {GPU: "8"}}}]},
        "status": {"phase": "Running"},
    }


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


def _some(*keys: str) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with some of ``keys``, each holding anything JSON."""
    return st.fixed_dictionaries({}, optional=dict.fromkeys(keys, _json))


_condition = st.fixed_dictionaries(
    {"type": st.sampled_from(["QuotaReserved", "Admitted", "Evicted", "Finished", "PodsReady", "x"])},
    optional={"status": st.sampled_from(["True", "False", 1]), "reason": _json, "lastTransitionTime": _json},
)
_fields = st.fixed_dictionaries(
    {},
    optional={
        "metadata": _some(
            "name", "namespace", "ownerReferences", "annotations", "labels", "creationTimestamp"
        ),
        "spec": _some("podSets", "queueName", "minMember", "nodeName", "schedulingGates"),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "conditions": st.lists(_condition, max_size=3) | _json,
                "admission": _json,
                "phase": _json,
                "running": _json,
                "succeeded": _json,
                "failed": _json,
            },
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(workload=_fields, pod=_fields, group=_fields)
def test_malformed_objects_never_raise(
    workload: dict[str, Any], pod: dict[str, Any], group: dict[str, Any]
) -> None:
    ledger = Ledger()
    ledger.replace("workloads", [workload])
    ledger.replace("pods", [pod])
    ledger.replace("podgroups", [group])
    ledger.assess_queued(build_state([], generation=1), Policy(name="p"))
    for t in ledger.tracked(0.0, 300.0):
        assert t.status.state in State
