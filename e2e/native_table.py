"""The native-scheduling proof table: tasgate's verdict and placement against the v1.36.5 scheduler.

Each row is a workload submitted to the real cluster of e2e/native_scenario.py. Before it goes in,
the cluster is dumped as docs/cli.md's ``--state`` (plus PodGroups and Workloads) and
``tasgate check -o json`` judges the manifest on that dump. Then the scheduler's own fate of the
group is observed, never assumed:

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
  say ``denied``. Which of a row's documents gives tasgate's verdict: e2e/native_verdict.py.

A row whose scheduler fate is not the one it was written for fails too (it would not test what
its name says), and so does a denial of a group the scheduler places (a false denial).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.kueue_scenario import BLOCK, RACK
from e2e.native_scenario import Shape, bound_pod, group_name, hand_written, indexed_job, job_in_group
from e2e.native_verdict import JUDGED, Verdict, finish_check, start_check, verdict
from e2e.native_world import NativeWorld, Settled, pod_scheduled_condition, wait_until

NAMESPACE = "table"
ROWS_ENV = "TASGATE_NATIVE_ROWS"  # comma-separated row names: run only those (debugging)
NEVER_CYCLES = 3
NEVER_SECONDS = 5.0  # and this long: five of the scheduler's 1 s maximum backoff (e2e/native.py)
FITS, WAITS, NEVER, ERROR = "fits", "waits", "never", "error"
EXPECTED_OUTCOME = {FITS: "admitted", WAITS: "waits", NEVER: "denied"}
DECIDE_TIMEOUT = 120.0
# A gang GangScheduling keeps out of the queue is retried on no event the row causes; after the
# cluster is freed it is watched this long (many times the 1 s backoff) for any cycle or binding.
GATED_WATCH_SECONDS = 10.0


@dataclass(frozen=True)
class Row:
    """One workload of the table and the fate it was written to meet in the real scheduler."""

    name: str
    intent: str  # FITS, WAITS or NEVER
    objects: Callable[[str], list[dict[str, Any]]]
    pods: int
    min_count: int | None  # gang minCount; None for basic
    key: str | None  # the topology key; None: the whole cluster is one domain
    job: bool = False  # the Job controller makes the PodGroup
    setup: Callable[[str], list[dict[str, Any]]] | None = None  # bound pods the row adds first

    @property
    def started_at(self) -> int:
        """How many bound pods mean the group started (a basic group: any)."""
        return self.min_count if self.min_count is not None else 1


def job_row(name: str, intent: str, pods: int, gpus: int) -> Row:
    return Row(name, intent, lambda ns: [indexed_job(name, ns, pods, gpus)], pods, pods, None, job=True)


def group_row(name: str, intent: str, pods: int, gpus: int, min_count: int | None, key: str | None) -> Row:
    return Row(
        name, intent, lambda ns: hand_written(name, ns, pods, gpus, min_count, key), pods, min_count, key
    )


def cpu_heavy_rack_row() -> Row:
    """5 × 4 GPUs (1 cpu, 8 GiB each) at rack after a cpu-only pod took 16 cpu of r3: r1 (20 GPUs
    free) and r3 (22) hold it. A GPU best fit takes r1; the scheduler's placement score,
    MostAllocated over cpu and memory only, takes r3, whose cpu and memory are the more used."""
    name, shape = "rack-5x4-cpu-scored", Shape(4, cpu=1, gib=8)
    return Row(
        name,
        FITS,
        lambda ns: hand_written(name, ns, 5, shape, 5, RACK),
        5,
        5,
        RACK,
        setup=lambda ns: [bound_pod("cpu-hog", ns, "r3-h1", Shape(0, cpu=16, gib=128))],
    )


def mixed_rack_row(name: str, intent: str, shapes: Sequence[Shape]) -> Row:
    """A rack gang of pods of different sizes, created in the order given."""
    pods = len(shapes)
    return Row(name, intent, lambda ns: hand_written(name, ns, pods, shapes, pods, RACK), pods, pods, RACK)


def job_group_row(
    name: str, intent: str, pods: int, gpus: int, key: str, min_count: int | None = None
) -> Row:
    """An Indexed Job of ``pods`` whose pods join a hand-written PodGroup (gang ``min_count``,
    default ``pods``). With ``min_count`` above ``pods`` the gang is short of pods for ever."""
    m = pods if min_count is None else min_count
    return Row(name, intent, lambda ns: job_in_group(name, ns, pods, gpus, m, key), pods, m, key)


def template_key_only_row(name: str, pods: int, gpus: int) -> Row:
    """A Workload whose template asks for one rack, and the PodGroup stamped from it without the
    key: the scheduler reads the PodGroup, so ``pods`` too many for a rack still bind (the row's
    key is the PodGroup's: none)."""
    objects = lambda ns: hand_written(name, ns, pods, gpus, pods, None, template_key=RACK)  # noqa: E731
    return Row(name, FITS, objects, pods, pods, None)


# Free now: racks r0 16 (hosts 0/8/8), r1 20 (4/8/8), r2 12 (0/4/8), r3 22 (6/8/8); blocks b0 36,
# b1 34; 19 slots of 4 GPUs, 7 whole free nodes. Empty: 24 per rack, 48 per block, 96 in all.
ROWS: tuple[Row, ...] = (
    job_row("job-4x4", FITS, 4, 4),
    job_row("job-3x2", FITS, 3, 2),
    job_row("job-10x8-wait", WAITS, 10, 8),  # 7 whole nodes free now, 12 when empty
    job_row("job-20x4-fragmented", WAITS, 20, 4),  # 80 GPUs <= 84 free, but only 19 slots of 4
    job_row("job-2x16-too-big", NEVER, 2, 16),  # a pod larger than any node
    job_row("job-13x8-too-many", NEVER, 13, 8),  # 104 GPUs > 96
    group_row("rack-4x4", FITS, 4, 4, 4, RACK),  # r0, r1, r3 hold it; r0 is the fullest
    group_row("rack-3x4", FITS, 3, 4, 3, RACK),  # r2 exactly
    group_row("rack-6x4-wait", WAITS, 6, 4, 6, RACK),  # 24 GPUs: a rack only when empty
    group_row("rack-3x8-wait", WAITS, 3, 8, 3, RACK),  # 3 whole nodes in one rack: only when empty
    group_row("rack-7x4-never", NEVER, 7, 4, 7, RACK),  # 28 > 24 per rack (the cluster has room)
    group_row("rack-2x12-never", NEVER, 2, 12, 2, RACK),  # a pod larger than any node
    group_row("rack-min2-of-4x8", FITS, 4, 8, 2, RACK),  # 2 whole nodes in r0: starts with 2
    group_row("rack-min2-of-4x4", FITS, 4, 4, 2, RACK),  # all 4 fit in r0 (r2 holds 3, as full)
    group_row("rack-min5-of-6x4", FITS, 6, 4, 5, RACK),  # 5 slots in r1 and r3: starts with 5
    group_row("rack-min7-of-8x4-never", NEVER, 8, 4, 7, RACK),  # 28 GPUs of quorum > 24
    group_row("block-8x4", FITS, 8, 4, 8, BLOCK),  # b0 9 slots, b1 8: b1 is the fuller
    group_row("block-4x8", FITS, 4, 8, 4, BLOCK),  # whole nodes: b0 has 4, b1 3
    group_row("block-10x4-wait", WAITS, 10, 4, 10, BLOCK),  # 40 > 36 now, <= 48 empty
    group_row("block-13x4-never", NEVER, 13, 4, 13, BLOCK),  # 52 > 48
    group_row("basic-rack-3x4", FITS, 3, 4, None, RACK),
    group_row("basic-2x4", FITS, 2, 4, None, None),
    job_group_row("job-in-rack-group-3x4", FITS, 3, 4, RACK),
    cpu_heavy_rack_row(),
    # One 8-GPU pod and three of 4 GPUs (20 GPUs) at rack; the scheduler tries a group's pods in
    # priority order. Big pod first: r1 holds it (8 on a free host, the 4s on the rest). Big pod
    # last: each pod goes to the least allocated host of the rack, so the three 4s take three hosts
    # and no host keeps 8 free, in every rack, even empty: it never fits, though a packing exists.
    mixed_rack_row("rack-mixed-8-first", FITS, [Shape(8, priority_class="first"), *[Shape(4)] * 3]),
    mixed_rack_row("rack-mixed-8-last", NEVER, [*[Shape(4)] * 3, Shape(8, priority_class="last")]),
    # The template says rack, its PodGroup nothing: 7 × 4 GPUs never fit a rack (24), but bind
    # across racks. A denial of the Workload would stop a group that runs (PodGroupWorkloadExists).
    template_key_only_row("template-rack-7x4-group-keyless", 7, 4),
    # A Job of 4 pods joining a PodGroup of minCount 5: GangScheduling's PreEnqueue keeps all 4 out
    # of the queue until 5 exist, and the Job never makes a fifth.
    job_group_row("job-4-in-min5-group", NEVER, 4, 4, RACK, min_count=5),
)


def selected_rows() -> tuple[Row, ...]:
    """ROWS, or only those named in ``$TASGATE_NATIVE_ROWS``."""
    names = [n for n in os.environ.get(ROWS_ENV, "").split(",") if n]
    unknown = set(names) - {row.name for row in ROWS}
    if unknown:
        raise ValueError(f"{ROWS_ENV} names no row {sorted(unknown)}")
    return tuple(row for row in ROWS if not names or row.name in names)


# --- the scheduler's side -----------------------------------------------------------------------


@dataclass
class Fate:
    """What the scheduler did with a row's group."""

    kind: str  # FITS, WAITS or NEVER, as observed
    text: str
    placed: dict[str, int] = field(default_factory=dict)  # bound pods per domain of the key
    condition: dict[str, Any] | None = None  # the PodGroup's PodGroupScheduled
    pod_conditions: list[str] = field(default_factory=list)  # distinct PodScheduled=False texts
    gated: bool = False  # never: GangScheduling kept every pod out of the queue (no cycle at all)


def per_domain(settled: Settled, key: str | None, hosts: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    if key is None:
        return {"*": len(settled.bound_nodes)} if settled.bound_nodes else {}
    return dict(Counter(hosts[node].get(key, "?") for node in settled.bound_nodes))


def started(settled: Settled, row: Row) -> bool:
    return settled.scheduled and len(settled.bound_nodes) >= row.started_at


def describe(settled: Settled, row: Row) -> str:
    n = len(settled.bound_nodes)
    return "bound" if n == row.pods else f"started {n}/{row.pods}"


def decide(world: NativeWorld, row: Row, group: str, since: int, what: str) -> tuple[Settled, bool]:
    """Until the group has started, or the scheduler ran ``NEVER_CYCLES`` more unschedulable
    cycles on it after its ``since``-th (one failed cycle alone is no verdict: a first cycle can
    run before every pod of the group is in the scheduler's active queue), or every pod of it is
    gated (True: no cycle ever runs, see ``gated``)."""
    later: list[tuple[Settled, bool]] = []
    start = time.monotonic()

    def decided() -> bool:
        state, settled = world.now(NAMESPACE, group, row.pods)
        shut_out = gated(world, state, row)
        later[:] = [(state, shut_out)]
        if shut_out or started(state, row):
            return True
        # Cycles alone are no clock: v1.36.5 retries a gang's leftover pod in a tight loop (hundreds
        # of "Unable to schedule a pod group" lines a second), and a pod still carries the
        # PodScheduled=False of an earlier cycle while a later one binds it.
        waited = time.monotonic() - start >= NEVER_SECONDS
        return settled and waited and world.cycles(NAMESPACE, group) >= since + NEVER_CYCLES

    wait_until(f"{group} started or {NEVER_CYCLES} more cycles {what}", decided, DECIDE_TIMEOUT)
    return later[0]


def gated(world: NativeWorld, state: Settled, row: Row) -> bool:
    """Every one of the row's pods exists, none is bound or was ever tried (no PodScheduled
    condition), the PodGroup has no condition, and the scheduler logged GangScheduling's PreEnqueue
    keeping each out of the queue for want of ``minCount`` pods."""
    names = [p["metadata"]["name"] for p in state.pods]
    untried = all(pod_scheduled_condition(p) is None and not p["spec"].get("nodeName") for p in state.pods)
    if len(names) != row.pods or not untried or state.condition is not None:
        return False
    return world.gated(NAMESPACE, names) == set(names)


def observe(world: NativeWorld, row: Row, group: str) -> Fate:
    """The scheduler's fate for the row (see the module docstring); leaves the blockers deleted
    when it had to free the cluster."""
    hosts = world.node_labels
    now, shut_out = decide(world, row, group, 0, "now")
    if started(now, row):
        return Fate(FITS, describe(now, row), per_domain(now, row.key, hosts), now.condition)
    world.free_blockers()
    world.sync_scheduler(NAMESPACE)  # cycles from here on see the freed cluster
    if shut_out:
        return watch_gated(world, row, group)
    before = world.cycles(NAMESPACE, group)
    last, _ = decide(world, row, group, before, "on the empty cluster")
    if started(last, row):
        return Fate(
            WAITS, "waited, then " + describe(last, row), per_domain(last, row.key, hosts), last.condition
        )
    cycles = world.cycles(NAMESPACE, group) - before
    reason = (last.condition or {}).get("reason")
    texts = sorted(
        {f"{c.get('reason')}: {c.get('message')}" for c in map(pod_scheduled_condition, last.pods) if c}
    )
    placed = per_domain(last, row.key, hosts)
    return Fate(NEVER, f"never ({reason}, {cycles} cycles empty)", placed, last.condition, texts)


def watch_gated(world: NativeWorld, row: Row, group: str) -> Fate:
    """A gated group on the empty cluster: never, if it stays untried through the watch."""
    time.sleep(GATED_WATCH_SECONDS)
    last, _ = world.now(NAMESPACE, group, row.pods)
    if started(last, row):
        return Fate(
            WAITS, "waited, then " + describe(last, row), per_domain(last, row.key, world.node_labels)
        )
    if not gated(world, last, row) or world.cycles(NAMESPACE, group):
        return Fate(ERROR, f"error: a gated group changed on the empty cluster: {last.condition}")
    text = f"never (gated: {row.pods} pods, minCount {row.min_count}; {GATED_WATCH_SECONDS:g}s empty)"
    return Fate(NEVER, text, gated=True)


# --- a row end to end ---------------------------------------------------------------------------


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
    state = world.dump_state(directory / "state")
    objects = row.objects(NAMESPACE)
    manifest = directory / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    check = start_check(manifest, state)
    try:
        world.create_group(objects)
        group = world.job_pod_group(NAMESPACE, row.name) if row.job else group_name(row.name)
        fate = observe(world, row, group)
    except AssertionError as exc:  # a wait that timed out: the row fails, the table goes on
        fate = Fate(ERROR, f"error: {exc}")
    finally:
        world.clear(NAMESPACE)
        world.restore_blockers()
        said = verdict(finish_check(check), row.key, world.node_labels)
    agree, problems = compare(row, said, fate)
    return Outcome(row, said, fate, agree, problems)


def compare(row: Row, said: Verdict, fate: Fate) -> tuple[str, list[str]]:
    """The placement column and every disagreement of the row."""
    problems = []
    if fate.kind == ERROR:
        return "n/a", [fate.text]
    if fate.kind != row.intent:
        problems.append(f"the scheduler's fate is {fate.kind}, the row was written for {row.intent}")
    want = EXPECTED_OUTCOME[fate.kind]
    if said.outcome != want:
        false_denial = said.outcome == "denied" and fate.kind != NEVER
        label = "FALSE DENIAL" if false_denial else "verdict"
        problems.append(f"{label}: tasgate {said.outcome} ({said.detail}), the scheduler {fate.text}")
    if fate.kind == NEVER and not fate.gated and (fate.condition or {}).get("reason") != "Unschedulable":
        problems.append(
            f"a never-fit group without the scheduler's Unschedulable condition: {fate.condition}"
        )
    agree = placement_agreement(row, said, fate)
    if agree not in ("agree", "n/a"):
        problems.append(f"placement: {agree}")
    return agree, problems


def placement_agreement(row: Row, said: Verdict, fate: Fate) -> str:
    if fate.kind == NEVER:
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
    lines.append("never-fits as the scheduler left them (PodGroupScheduled; the pods' PodScheduled=False):")
    for o in outcomes:
        if o.fate.kind == NEVER and o.fate.gated:
            lines.append(
                f"  {o.row.name}: no condition, no pod tried: GangScheduling PreEnqueue, {o.fate.text}"
            )
        elif o.fate.kind == NEVER:
            c = o.fate.condition or {}
            lines.append(f"  {o.row.name}: {c.get('status')} {c.get('reason')}: {c.get('message')}")
            lines.extend(f"    pod {text}" for text in o.fate.pod_conditions)
    bad = [o for o in outcomes if o.problems]
    lines.append(f"{len(outcomes)} workloads, {len(outcomes) - len(bad)} agree, {len(bad)} disagree")
    for o in bad:
        lines.extend(f"  {o.row.name}: {p}" for p in o.problems)
    return "\n".join(lines)
