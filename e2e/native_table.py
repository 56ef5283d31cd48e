"""The native-scheduling proof table: tasgate's verdict and placement against the real scheduler,
v1.36.5 (rows: e2e/native_rows.py) or v1.37.0 (e2e/native_rows_v137.py).

Each row is a workload submitted to the real cluster of
e2e/native_scenario.py. Before it goes in, the cluster is dumped as docs/cli.md's ``--state``
(plus PodGroups, Workloads and Jobs) and ``tasgate check -o json`` judges the manifest on that
dump. Then the scheduler's own fate of the group is observed, never assumed:

- **bound**: within ``NEVER_CYCLES`` PodGroup cycles and ``NEVER_SECONDS``, the PodGroup is
  ``PodGroupScheduled=True`` with every pod (or, for a gang whose ``minCount`` is below its
  count, at least ``minCount``) bound: tasgate must say ``admitted``, and
  its ``now`` placement must put the same number of pods in each domain of the topology key;
- otherwise every blocker pod is deleted (the cluster is empty) and the row watched again:
  **waited, then bound** when the group binds then: tasgate must say ``waits`` and its
  ``whenEmpty`` placement must have the same shape (pods per domain; which of several empty,
  equal domains the scheduler takes is its random tie-break);
- **never**: the group stays ``Unschedulable`` through ``NEVER_CYCLES`` more PodGroup cycles and
  ``NEVER_SECONDS`` on the empty cluster (the scheduler's own count, its ``--v=2`` log, from the
  moment a sentinel pod shows
  its cache has seen the deletions), or, for a gang short of pods, GangScheduling's PreEnqueue
  keeps every pod out of the queue (its ``scheduling_queue`` log line per pod: no cycle, no
  condition) and nothing changes for ``GATED_WATCH_SECONDS`` on the empty cluster: tasgate must
  say ``denied``. A never-fit group's condition must carry the row's ``refused_as`` reason:
  ``Unschedulable``, or (v1.37) ``SchedulerError`` for a group the scheduler refuses before any
  placement (its pods' priority is not the group's);
- **refused**: the API server refuses the row's group objects (``kubectl create`` fails, e.g. a
  version it does not serve): the group never runs, so tasgate must neither admit it nor say it
  waits, and must not crash on it (``denied``, an error or ``not-checked`` agree; the table
  prints which, with tasgate's message).

A CompositePodGroup row (v1.37) is observed through its leaf PodGroups (e2e/native_fate.py). Which
of a row's documents gives tasgate's verdict: e2e/native_verdict.py; the scheduler's side:
e2e/native_fate.py.

A row whose scheduler fate is not the one it was written for fails too (it would not test what
its name says), and so does a denial of a group the scheduler places (a false denial).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import KubectlError
from e2e.native_fate import Fate, observe
from e2e.native_nodes import prepare
from e2e.native_row import ERROR, FITS, NAMESPACE, NEVER, REFUSED, WAITS, Row
from e2e.native_scenario import group_name
from e2e.native_verdict import JUDGED, Verdict, finish_check, start_check, verdict
from e2e.native_world import NativeWorld

EXPECTED_OUTCOME = {FITS: "admitted", WAITS: "waits", NEVER: "denied"}
CRASHED = "crashed"  # tasgate check exited with neither 0 nor 1, or printed no JSON


@dataclass
class Outcome:
    row: Row
    verdict: Verdict
    fate: Fate
    placement: str  # "agree", "n/a" or what differs
    problems: list[str]


def run_row(world: NativeWorld, row: Row, workdir: Path) -> Outcome:
    """Dump, check, submit, observe, compare; the cluster is cleared and its blockers back after."""
    directory = workdir / row.name
    if row.setup is not None:
        world.create(row.setup(NAMESPACE))
        world.wait_running(NAMESPACE)
    undo = prepare(world, row, NAMESPACE)
    # The scheduler's cache must hold what the dump holds: the last row's pods deleted, blockers
    # back (a cycle on a cache still holding the last row's pods chose another rack).
    world.sync_scheduler(NAMESPACE)
    state = world.dump_state(directory / "state")
    objects = row.objects(NAMESPACE)
    manifest = directory / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    check = start_check(manifest, state)
    try:
        fate = submit_and_observe(world, row, objects)
    except (AssertionError, KubectlError) as exc:  # a wait timed out, kubectl failed: the row fails
        fate = Fate(ERROR, f"error: {exc}")
    finally:
        world.clear(NAMESPACE)
        undo()
        world.restore_blockers()
        said = checked(check, row, world)
    agree, problems = compare(row, said, fate)
    if problems:
        problems.extend("scheduler: " + line for line in world.scheduler_lines(NAMESPACE, row.name))
    return Outcome(row, said, fate, agree, problems)


def submit_and_observe(world: NativeWorld, row: Row, objects: list[dict[str, Any]]) -> Fate:
    """Create the row's objects and observe the scheduler; the API server refusing them is the
    row's fate (REFUSED), not a harness error."""
    try:
        world.create_group(objects)
    except KubectlError as exc:
        said = " ".join(str(exc.stderr or exc.stdout or exc).split())
        return Fate(REFUSED, "refused by the API server: " + said.removeprefix("error: "))
    group = world.job_pod_group(NAMESPACE, row.name) if row.job else group_name(row.name)
    return observe(world, row, group)


def checked(check: subprocess.Popen[str], row: Row, world: NativeWorld) -> Verdict:
    """tasgate's verdict; a crash (an exit code but 0 and 1, no JSON) is the row's verdict too."""
    try:
        return verdict(finish_check(check), row.key, world.node_labels)
    except (AssertionError, ValueError) as exc:
        return Verdict(CRASHED, str(exc)[-600:])


def compare(row: Row, said: Verdict, fate: Fate) -> tuple[str, list[str]]:
    """The placement column and every disagreement of the row."""
    problems = []
    if fate.kind == ERROR:
        return "n/a", [fate.text]
    if fate.kind != row.intent:
        problems.append(f"the scheduler's fate is {fate.kind}, the row was written for {row.intent}")
    if fate.kind == REFUSED:
        if said.outcome in ("admitted", "waits", CRASHED):
            problems.append(f"verdict: tasgate {said.outcome} ({said.detail}), the API server {fate.text}")
        return "n/a", problems
    want = EXPECTED_OUTCOME[fate.kind]
    if said.outcome != want:
        false_denial = said.outcome == "denied" and fate.kind != NEVER
        label = "FALSE DENIAL" if false_denial else "verdict"
        problems.append(f"{label}: tasgate {said.outcome} ({said.detail}), the scheduler {fate.text}")
    if fate.kind == NEVER and not fate.gated and (fate.condition or {}).get("reason") != row.refused_as:
        problems.append(
            f"a never-fit group without the scheduler's {row.refused_as} condition: {fate.condition}"
        )
    agree = placement_agreement(row, said, fate)
    if agree not in ("agree", "n/a"):
        problems.append(f"placement: {agree}")
    return agree, problems


def placement_agreement(row: Row, said: Verdict, fate: Fate) -> str:
    if fate.kind in (NEVER, REFUSED):
        return "n/a"
    predicted = said.now if fate.kind == FITS else said.when_empty
    if predicted is None:
        return f"tasgate gave no placement; bound {fate.placed}"
    if row.key is None:
        same = sum(predicted.values()) == sum(fate.placed.values())
        return (
            "agree" if same else f"tasgate {sum(predicted.values())} pods, bound {sum(fate.placed.values())}"
        )
    if fate.kind == FITS:
        return "agree" if predicted == fate.placed else f"tasgate {predicted}, bound {fate.placed}"
    shape = sorted(predicted.values()) == sorted(fate.placed.values())
    return "agree" if shape else f"tasgate {predicted} when empty, bound {fate.placed}"


def table(outcomes: Sequence[Outcome]) -> str:
    """One line per row: name, tasgate's verdict, the scheduler's result, placement agreement."""
    lines = [f"{'workload':<32} {'tasgate':<28} {'scheduler':<42} placement", "-" * 122]
    for o in outcomes:
        said = o.verdict.outcome + (f" ({o.verdict.detail})" if o.verdict.outcome not in JUDGED else "")
        where = " ".join(f"{d}:{n}" for d, n in sorted(o.fate.placed.items()))
        column = f"{o.placement} ({where})" if o.placement == "agree" and where else o.placement
        lines.append(f"{o.row.name:<32} {said[:28]:<28} {o.fate.text[:42]:<42} {column}")
    lines.append("never-fits as the scheduler left them (PodGroup condition; the pods' PodScheduled=False):")
    for o in outcomes:
        if o.fate.kind == NEVER and o.fate.gated:
            lines.append(
                f"  {o.row.name}: no condition, no pod tried: GangScheduling PreEnqueue, {o.fate.text}"
            )
        elif o.fate.kind == NEVER:
            c = o.fate.condition or {}
            lines.append(f"  {o.row.name}: {c.get('status')} {c.get('reason')}: {c.get('message')}")
            lines.extend(f"    pod {text}" for text in o.fate.pod_conditions)
    refused = [o for o in outcomes if o.fate.kind == REFUSED]
    if refused:
        lines.append("refused by the API server (and tasgate's word on each):")
    for o in refused:
        said = f"tasgate {o.verdict.outcome}: {o.verdict.detail}"
        lines.append(f"  {o.row.name}: {o.fate.text.removeprefix('refused by the API server: ')}; {said}")
    bad = [o for o in outcomes if o.problems]
    lines.append(f"{len(outcomes)} workloads, {len(outcomes) - len(bad)} agree, {len(bad)} disagree")
    for o in bad:
        lines.extend(f"  {o.row.name}: {p}" for p in o.problems)
    return "\n".join(lines)
