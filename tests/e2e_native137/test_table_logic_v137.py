"""The v1.37 table's judge and observer on their own (no cluster): what they read from the v1.37.0
scheduler's log, how a CompositePodGroup row's leaves make one fate and one verdict, and the rules
for rows the API server refuses or the scheduler refuses as a SchedulerError.

Log lines are the v1.37.0 scheduler's own, as ``make e2e-native-v137`` logged them; reports are
hand-made in the shape of ``tasgate check -o json`` (tests/e2e_native/test_table_logic.py).
"""

from __future__ import annotations

from typing import Any

from e2e.kueue_scenario import BLOCK, RACK
from e2e.native import COMPOSITE_POD_GROUPS, kinds_for_state
from e2e.native_fate import Fate, Observed, merged
from e2e.native_k8s import V1_36, V1_37
from e2e.native_log import cycle_pattern, scheduled_pattern
from e2e.native_pods import Settled
from e2e.native_row import FITS, NEVER, REFUSED, WAITS, Leaf, Row
from e2e.native_rows_v137 import ROWS_V137, SCHEDULER_ERROR
from e2e.native_scenario import nodes
from e2e.native_table import CRASHED, compare
from e2e.native_verdict import Verdict, domain_of, verdict

HOSTS = nodes()
ATTEMPT = (
    'I1207 03:45:18.868722   15806 scheduling_queue.go:1262] "Pod group moved to an internal scheduling '
    'queue" podGroupType="podgroup" podGroup="smoke-priority/prio-workers" event="ScheduleAttemptFailure" '
    'queue="Backoff" schedulingCycle=4 unschedulable plugins={}'
)
LEAF_SCHEDULED = (
    'I1207 03:45:18.265594   15806 schedule_one_podgroup.go:896] "Successfully scheduled a pod group" '
    'podGroupType="compositepodgroup" podGroup="smoke-composite/cpg-workers" scheduledPods=4 '
    "unschedulablePods=0"
)
V136_SCHEDULED = (
    'I1207 02:53:07.9 4697 schedule_one_podgroup.go:700] "Successfully scheduled a pod group" '
    'podGroup="table/rack-4x4-workers" scheduledPods=4'
)


def test_a_failed_v137_attempt_counts_for_its_root_only() -> None:
    assert cycle_pattern(37, "smoke-priority", "prio-workers").search(ATTEMPT)
    assert not cycle_pattern(37, "smoke-priority", "prio").search(ATTEMPT)
    assert not cycle_pattern(36, "smoke-priority", "prio-workers").search(ATTEMPT)
    unable = '"Unable to schedule a pod group" podGroup="table/g" unschedulablePods=1'
    assert cycle_pattern(36, "table", "g").search(unable)


def test_a_successful_cycle_is_read_in_both_line_shapes() -> None:
    assert scheduled_pattern("smoke-composite", "cpg-workers").search(LEAF_SCHEDULED)
    assert not scheduled_pattern("smoke-composite", "cpg").search(LEAF_SCHEDULED)
    assert scheduled_pattern("table", "rack-4x4-workers").search(V136_SCHEDULED)
    assert not scheduled_pattern("table", "rack-4x4").search(V136_SCHEDULED)


def pod(node: str | None) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"nodeName": node} if node else {}}


def group(status: str | None, *bound_on: str) -> Settled:
    conditions = [{"type": "PodGroupInitiallyScheduled", "status": status, "reason": "r"}] if status else []
    return Settled({"status": {"conditions": conditions}}, [pod(n) for n in bound_on])


def test_a_composite_starts_once_min_groups_of_its_leaves_have() -> None:
    leader, workers = Leaf("c-leader", 1, 1), Leaf("c-workers", 4, 4)
    one = Observed(((leader, group("True", "r2-h2")), (workers, group("False"))), min_groups=2)
    assert not one.started
    assert Observed(one.parts, min_groups=1).started
    both = ((leader, group("True", "r2-h2")), (workers, group(None, *["r3-h1"] * 4)))
    assert not Observed(both, min_groups=2).started  # no condition and no log line yet
    assert Observed(both, min_groups=2, logged=frozenset({"c-workers"})).started
    short = ((leader, group("True", "r2-h2")), (workers, group("True", "r3-h1")))
    assert not Observed(short, min_groups=2).started  # 1 of the workers' minCount 4 bound


def test_leaf_conditions_merge_into_one() -> None:
    a = {"type": "T", "status": "False", "reason": "Unschedulable", "message": "m1"}
    b = {"type": "T", "status": "False", "reason": "Unschedulable", "message": "m2"}
    assert merged([a], ["x"]) == a
    assert merged([a, None], ["x", "y"]) is None
    both = merged([a, b], ["x", "y"]) or {}
    assert (both["status"], both["reason"], both["message"]) == ("False", "Unschedulable", "x: m1; y: m2")
    assert (merged([a, {**b, "status": "True", "reason": "Scheduled"}], ["x", "y"]) or {})[
        "status"
    ] == "False"


def rack_podset(*pairs: tuple[str, int]) -> dict[str, Any]:
    placed = {"assignmentLevels": [RACK], "assignment": [{"values": [r], "count": c} for r, c in pairs]}
    return {"now": placed, "whenEmpty": placed}


def result(kind: str, name: str, outcome: str, *podsets: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "name": name, "outcome": outcome, "message": "", "podSets": list(podsets)}


def test_a_composite_rows_pod_groups_are_read_together() -> None:
    report = {
        "results": [
            result("CompositePodGroup", "c-set", "admitted"),
            result("PodGroup", "c-leader", "admitted", rack_podset(("r2", 1))),
            result("PodGroup", "c-workers", "admitted", rack_podset(("r3", 4))),
        ]
    }
    said = verdict(report, BLOCK, HOSTS)
    assert (said.outcome, said.now) == ("admitted", {"b1": 5})
    report["results"][1]["outcome"] = "waits"
    assert verdict(report, BLOCK, HOSTS).outcome == "waits"
    report["results"][0]["outcome"] = "denied"
    assert verdict(report, BLOCK, HOSTS).outcome == "denied"


def test_a_domain_is_read_through_the_nodes_of_a_finer_one() -> None:
    assert domain_of(["r2"], [RACK], BLOCK, HOSTS) == "b1"
    assert domain_of(["r3-h1"], ["kubernetes.io/hostname"], RACK, HOSTS) == "r3"
    assert domain_of(["b0"], [BLOCK], RACK, HOSTS) == "?"  # a block holds two racks


def test_a_refused_group_must_be_neither_admitted_nor_held() -> None:
    row = Row("skew", REFUSED, lambda ns: [], 4, 4, RACK)
    fate = Fate(REFUSED, "refused by the API server: no matches for kind")
    for outcome in ("denied", "not-checked", "error"):
        assert compare(row, Verdict(outcome, "x"), fate) == ("n/a", [])
    for outcome in ("admitted", "waits", CRASHED):
        assert compare(row, Verdict(outcome, "x"), fate)[1]
    assert compare(Row("x", FITS, lambda ns: [], 4, 4, RACK), Verdict("denied", "x"), fate)[1]


def test_a_scheduler_error_row_needs_that_reason() -> None:
    error = {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": SCHEDULER_ERROR}
    fate = Fate(NEVER, "never", {}, error)
    refused_row = Row("mixed", NEVER, lambda ns: [], 4, 4, RACK, refused_as=SCHEDULER_ERROR)
    assert compare(refused_row, Verdict("denied", "x"), fate) == ("n/a", [])
    assert compare(Row("plain", NEVER, lambda ns: [], 4, 4, RACK), Verdict("denied", "x"), fate)[1]


def test_the_v137_dump_holds_composite_pod_groups() -> None:
    assert COMPOSITE_POD_GROUPS in ",".join(kinds_for_state(V1_37))
    assert COMPOSITE_POD_GROUPS not in ",".join(kinds_for_state(V1_36))


def test_the_rows_are_written_in_v137_shapes() -> None:
    assert len({r.name for r in ROWS_V137}) == len(ROWS_V137)
    assert {FITS, WAITS, NEVER, REFUSED} <= {r.intent for r in ROWS_V137}
    for row in ROWS_V137:
        objects = row.objects("table")
        apis = {o["apiVersion"] for o in objects if o["kind"] in ("Workload", "PodGroup")}
        assert apis <= ({"scheduling.k8s.io/v1alpha2"} if row.intent == REFUSED else {V1_37.scheduling_api})
        groups = {o["metadata"]["name"] for o in objects if o["kind"] == "PodGroup"}
        assert {leaf.group for leaf in row.leaves} <= groups, row.name
        if row.composite:
            assert [o["metadata"]["name"] for o in objects if o["kind"] == "CompositePodGroup"] == [
                row.composite
            ]
        for job in (o for o in objects if o["kind"] == "Job"):
            named = "schedulingGroup" in job["spec"]["template"]["spec"]
            gang = row.min_count is not None and not named
            assert ("scheduling" in job["spec"]) == gang, row.name
