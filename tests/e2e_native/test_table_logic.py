"""The table's judge on its own (no cluster): it fails on what it must fail on, and only there.

The rows' real verdicts come from ``tasgate check``; these reports are hand-made in the shape of
the contract (per result ``outcome`` and ``podSets[].now/whenEmpty`` with ``assignmentLevels`` and
``assignment: [{values, count}]``), so each way a row can disagree is seen to disagree.
"""

from __future__ import annotations

from typing import Any

from e2e.kueue_scenario import RACK
from e2e.native_fate import Fate
from e2e.native_rows import FITS, NEVER, WAITS, Row, group_row, job_group_row
from e2e.native_scenario import nodes
from e2e.native_table import compare
from e2e.native_verdict import verdict

HOSTS = nodes()
ROW = group_row("rack-4x4", FITS, 4, 4, 4, RACK)


def report(outcome: str, now: dict[str, Any] | None = None, kind: str = "PodGroup") -> dict[str, Any]:
    podset = {"name": "workers", "now": now or {}, "whenEmpty": now or {}}
    return {"results": [{"kind": kind, "outcome": outcome, "reason": "r", "podSets": [podset]}]}


def rack_placement(*pairs: tuple[str, int]) -> dict[str, Any]:
    return {
        "fits": True,
        "assignmentLevels": [RACK],
        "assignment": [{"values": [r], "count": c} for r, c in pairs],
    }


def test_a_matching_verdict_and_placement_agree() -> None:
    said = verdict(report("admitted", rack_placement(("r0", 4))), RACK, HOSTS)
    assert compare(ROW, said, Fate(FITS, "bound", {"r0": 4})) == ("agree", [])


def test_host_level_assignments_are_summed_per_rack() -> None:
    hosts = [{"values": ["r0", "r0-h1"], "count": 2}, {"values": ["r0", "r0-h2"], "count": 2}]
    now = {"assignmentLevels": [RACK, "kubernetes.io/hostname"], "assignment": hosts}
    assert verdict(report("admitted", now), RACK, HOSTS).now == {"r0": 4}
    only_hosts = {
        "assignmentLevels": ["kubernetes.io/hostname"],
        "assignment": [{"values": ["r3-h1"], "count": 4}],
    }
    assert verdict(report("admitted", only_hosts), RACK, HOSTS).now == {"r3": 4}


def test_not_checked_is_a_disagreement() -> None:
    said = verdict(report("not-checked"), RACK, HOSTS)
    _, problems = compare(ROW, said, Fate(FITS, "bound", {"r0": 4}))
    assert any(p.startswith("verdict: tasgate not-checked") for p in problems)


def test_a_denial_of_a_group_the_scheduler_placed_is_a_false_denial() -> None:
    said = verdict(report("denied"), RACK, HOSTS)
    _, problems = compare(ROW, said, Fate(FITS, "bound", {"r0": 4}))
    assert any(p.startswith("FALSE DENIAL") for p in problems)


def test_another_rack_is_a_placement_disagreement() -> None:
    said = verdict(report("admitted", rack_placement(("r1", 4))), RACK, HOSTS)
    agree, problems = compare(ROW, said, Fate(FITS, "bound", {"r0": 4}))
    assert agree != "agree" and problems


def test_a_must_wait_row_compares_the_shape_when_empty() -> None:
    row = group_row("rack-6x4-wait", WAITS, 6, 4, 6, RACK)
    said = verdict(report("waits", rack_placement(("r0", 6))), RACK, HOSTS)
    assert compare(row, said, Fate(WAITS, "waited, then bound", {"r3": 6})) == ("agree", [])
    split = verdict(report("waits", rack_placement(("r0", 3), ("r1", 3))), RACK, HOSTS)
    assert compare(row, split, Fate(WAITS, "waited, then bound", {"r3": 6}))[1]


def test_a_never_fit_needs_the_schedulers_unschedulable_condition() -> None:
    row = group_row("rack-7x4-never", NEVER, 7, 4, 7, RACK)
    said = verdict(report("denied"), RACK, HOSTS)
    unschedulable = {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable"}
    assert compare(row, said, Fate(NEVER, "never", {}, unschedulable)) == ("n/a", [])
    assert compare(row, said, Fate(NEVER, "never", {}, None))[1]


def test_a_row_whose_scheduler_fate_is_not_its_intent_fails() -> None:
    said = verdict(report("admitted", rack_placement(("r0", 4))), RACK, HOSTS)
    _, problems = compare(Row("x", NEVER, lambda ns: [], 4, 4, RACK), said, Fate(FITS, "bound", {"r0": 4}))
    assert any("written for never" in p for p in problems)


def test_a_denial_of_any_document_is_the_rows_verdict() -> None:
    """A denied Workload stops its PodGroups too (PodGroupWorkloadExists): the group never runs."""
    mixed = {
        "results": [{"kind": "Workload", "outcome": "admitted"}, {"kind": "PodGroup", "outcome": "denied"}]
    }
    assert verdict(mixed, RACK, HOSTS).outcome == "denied"
    workload_denied = {
        "results": [{"kind": "Workload", "outcome": "denied"}, {"kind": "PodGroup", "outcome": "admitted"}]
    }
    said = verdict(workload_denied, RACK, HOSTS)
    _, problems = compare(ROW, said, Fate(FITS, "bound", {"r0": 4}))
    assert any(p.startswith("FALSE DENIAL") for p in problems)


def test_the_pod_group_the_scheduler_reads_decides_among_admissions() -> None:
    """A Workload whose template key must wait, its PodGroup (no key) admitted: the PodGroup's."""
    report = {
        "results": [
            {"kind": "Workload", "outcome": "waits", "podSets": []},
            {"kind": "PodGroup", "outcome": "admitted", "podSets": [{"now": rack_placement(("r0", 4))}]},
        ]
    }
    said = verdict(report, RACK, HOSTS)
    assert said.outcome == "admitted" and said.now == {"r0": 4} and "Workload waits" in said.others


def test_a_gated_never_needs_no_unschedulable_condition() -> None:
    """GangScheduling's PreEnqueue keeps a gang short of pods out of the queue: no cycle, no
    condition. A gated fate stands for the condition; an ungated never without it still fails."""
    row = job_group_row("job-4-in-min5-group", NEVER, 4, 4, RACK, min_count=5)
    said = verdict(report("denied", kind="Job"), RACK, HOSTS)
    assert compare(row, said, Fate(NEVER, "never (gated)", gated=True)) == ("n/a", [])
    assert compare(row, said, Fate(NEVER, "never", {}, None))[1]
    admitted = verdict(report("admitted", kind="Job"), RACK, HOSTS)
    assert compare(row, admitted, Fate(NEVER, "never (gated)", gated=True))[1]


def test_a_row_the_harness_could_not_decide_fails() -> None:
    said = verdict(report("admitted", rack_placement(("r0", 4))), RACK, HOSTS)
    assert compare(ROW, said, Fate("error", "error: timed out"))[1] == ["error: timed out"]
