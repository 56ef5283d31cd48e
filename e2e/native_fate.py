"""The scheduler's side of the native proof table (e2e/native_table.py): what the v1.36.5
kube-scheduler did with a row's group, observed through the API and its log, never assumed."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e.native_pods import Settled, pod_scheduled_condition
from e2e.native_rows import ERROR, FITS, NAMESPACE, NEVER, WAITS, Row
from e2e.native_world import NativeWorld, wait_until

NEVER_CYCLES = 3
NEVER_SECONDS = 5.0  # and this long: five of the scheduler's 1 s maximum backoff (e2e/native.py)
DECIDE_TIMEOUT = 120.0
# A gang GangScheduling keeps out of the queue is retried on no event the row causes; after the
# cluster is freed it is watched this long (many times the 1 s backoff) for any cycle or binding.
GATED_WATCH_SECONDS = 10.0


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


def started(settled: Settled, row: Row, logged: bool = False) -> bool:
    """``started_at`` pods bound, and the scheduler said the group was scheduled: its
    ``PodGroupScheduled=True``, or its own "Successfully scheduled a pod group" line (``logged``).
    The condition alone is no proof either way: a later cycle for the group's leftover pods
    (basic, or ``minCount`` below the count) may patch it back to False when the scheduler's
    PodGroup lister has not yet seen the True (``updatePodGroupCondition`` guards on the lister),
    as happened under load to basic-rack-7x4 with 5 of its pods bound."""
    return (settled.scheduled or logged) and len(settled.bound_nodes) >= row.started_at


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
        if shut_out or started(state, row, world.scheduled_logged(NAMESPACE, group)):
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
    if started(now, row, world.scheduled_logged(NAMESPACE, group)):
        return Fate(FITS, describe(now, row), per_domain(now, row.key, hosts), now.condition)
    world.free_blockers()
    world.sync_scheduler(NAMESPACE)  # cycles from here on see the freed cluster
    if shut_out:
        return watch_gated(world, row, group)
    before = world.cycles(NAMESPACE, group)
    last, _ = decide(world, row, group, before, "on the empty cluster")
    if started(last, row, world.scheduled_logged(NAMESPACE, group)):
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
