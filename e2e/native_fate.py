"""The scheduler's side of the native proof table (e2e/native_table.py): what the kube-scheduler
(v1.36.5, or v1.37.0) did with a row's group, observed through the API and its log, never assumed.

A row's group is one PodGroup, or (v1.37) a CompositePodGroup whose fate is that of its leaf
PodGroups: only leaves hold pods and get the scheduler's condition (v1.37.0 writes none on a
CompositePodGroup), and the composite started once ``min_groups`` leaves did (its gang's
``minGroupCount``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from e2e.native_pods import Settled, pod_scheduled_condition
from e2e.native_row import ERROR, FITS, NAMESPACE, NEVER, WAITS, Leaf, Row
from e2e.native_scenario import BLOCKER_NAMESPACE, blocker_pods
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

    kind: str  # FITS, WAITS, NEVER or REFUSED, as observed
    text: str
    placed: dict[str, int] = field(default_factory=dict)  # bound pods per domain of the key
    condition: dict[str, Any] | None = None  # the PodGroup's scheduled condition (leaves' merged)
    pod_conditions: list[str] = field(default_factory=list)  # distinct PodScheduled=False texts
    gated: bool = False  # never: GangScheduling kept every pod out of the queue (no cycle at all)


@dataclass(frozen=True)
class Observed:
    """The row's PodGroups as they are now: one, or a composite row's leaves."""

    parts: tuple[tuple[Leaf, Settled], ...]
    min_groups: int = 1
    logged: frozenset[str] = frozenset()  # leaves whose successful cycle the scheduler logged

    @property
    def pods(self) -> list[dict[str, Any]]:
        return [p for _, s in self.parts for p in s.pods]

    @property
    def bound_nodes(self) -> list[str]:
        return sorted(n for _, s in self.parts for n in s.bound_nodes)

    @property
    def condition(self) -> dict[str, Any] | None:
        return merged([s.condition for _, s in self.parts], [leaf.group for leaf, _ in self.parts])

    @property
    def started(self) -> bool:
        """``min_groups`` leaves started: each with ``started_at`` pods bound and the scheduler
        saying the group was scheduled: its condition True, or its own "Successfully scheduled a
        pod group" line (``logged``). The condition alone is no proof either way: a later cycle for
        the group's leftover pods (basic, or ``minCount`` below the count) may patch it back to
        False when the scheduler's PodGroup lister has not yet seen the True
        (``updatePodGroupCondition`` guards on the lister), as happened under load to
        basic-rack-7x4 with 5 of its pods bound."""
        done = [
            leaf
            for leaf, s in self.parts
            if (s.scheduled or leaf.group in self.logged) and len(s.bound_nodes) >= leaf.started_at
        ]
        return len(done) >= self.min_groups


def merged(conditions: Sequence[dict[str, Any] | None], groups: Sequence[str]) -> dict[str, Any] | None:
    """One condition standing for several leaves': None until each has one; True only when all
    are; the reasons (one when they agree) and each leaf's message."""
    if len(conditions) == 1:
        return conditions[0]
    if any(c is None for c in conditions):
        return None
    have = [c for c in conditions if c is not None]
    reasons = sorted({str(c.get("reason")) for c in have})
    return {
        "type": have[0].get("type"),
        "status": "True" if all(c.get("status") == "True" for c in have) else "False",
        "reason": "/".join(reasons),
        "message": "; ".join(f"{g}: {c.get('message')}" for g, c in zip(groups, have, strict=True)),
    }


def leaves(row: Row, group: str) -> tuple[Leaf, ...]:
    return row.leaves or (Leaf(group, row.pods, row.started_at),)


def per_domain(state: Observed, key: str | None, hosts: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    if key is None:
        return {"*": len(state.bound_nodes)} if state.bound_nodes else {}
    return dict(Counter(hosts[node].get(key, "?") for node in state.bound_nodes))


def describe(state: Observed, row: Row) -> str:
    n = len(state.bound_nodes)
    return "bound" if n == row.pods else f"started {n}/{row.pods}"


def look(world: NativeWorld, row: Row, group: str) -> tuple[Observed, bool]:
    """The row's group as it is, and whether every leaf is settled (``NativeWorld.now``)."""
    parts, settled = [], True
    for leaf in leaves(row, group):
        state, done = world.now(NAMESPACE, leaf.group, leaf.pods)
        parts.append((leaf, state))
        settled = settled and done
    return relogged(world, Observed(tuple(parts), row.min_groups)), settled


def relogged(world: NativeWorld, state: Observed) -> Observed:
    """``state`` with the leaves whose successful cycle the scheduler has logged by now."""
    logged = frozenset(leaf.group for leaf, _ in state.parts if world.scheduled_logged(NAMESPACE, leaf.group))
    return replace(state, logged=logged)


def decide(world: NativeWorld, row: Row, group: str, since: int, what: str) -> tuple[Observed, bool]:
    """Until the group has started, or the scheduler ran ``NEVER_CYCLES`` more failed cycles on it
    after its ``since``-th (one failed cycle alone is no verdict: a first cycle can run before
    every pod of the group is in the scheduler's active queue), or every pod of it is gated
    (True: no cycle ever runs, see ``gated``)."""
    later: list[tuple[Observed, bool]] = []
    start = time.monotonic()
    root = row.composite or group

    def decided() -> bool:
        state, settled = look(world, row, group)
        shut_out = gated(world, state, row)
        later[:] = [(state, shut_out)]
        if shut_out or state.started:
            return True
        # Cycles alone are no clock: v1.36.5 retries a gang's leftover pod in a tight loop (hundreds
        # of "Unable to schedule a pod group" lines a second), and a pod still carries the
        # PodScheduled=False of an earlier cycle while a later one binds it.
        waited = time.monotonic() - start >= NEVER_SECONDS
        return settled and waited and world.cycles(NAMESPACE, root) >= since + NEVER_CYCLES

    wait_until(f"{root} started or {NEVER_CYCLES} more cycles {what}", decided, DECIDE_TIMEOUT)
    return later[0]


def gated(world: NativeWorld, state: Observed, row: Row) -> bool:
    """Every one of the row's pods exists, none is bound or was ever tried (no PodScheduled
    condition), no PodGroup has a condition, and the scheduler logged GangScheduling's PreEnqueue
    keeping each out of the queue for want of ``minCount`` pods."""
    names = [p["metadata"]["name"] for p in state.pods]
    untried = all(pod_scheduled_condition(p) is None and not p["spec"].get("nodeName") for p in state.pods)
    if len(names) != row.pods or not untried or any(s.condition is not None for _, s in state.parts):
        return False
    return world.gated(NAMESPACE, names) == set(names)


def observe(world: NativeWorld, row: Row, group: str) -> Fate:
    """The scheduler's fate for the row (see the module docstring); leaves the blockers deleted
    when it had to free the cluster."""
    hosts = world.node_labels
    root = row.composite or group
    now, shut_out = decide(world, row, group, 0, "now")
    now = relogged(world, now)
    if now.started:
        text = describe(now, row)
        # Every blocker runs when a row starts (the table restores them); the scheduler evicts
        # lower-priority ones for a group it preempts for (v1.37), maybe before this looks.
        blockers = {p["metadata"]["name"] for p in blocker_pods()}
        preempted = sorted(blockers - world.pod_names(BLOCKER_NAMESPACE))
        if preempted:
            text += f", {len(preempted)} preempted: {' '.join(preempted)}"
        return Fate(FITS, text, per_domain(now, row.key, hosts), now.condition)
    world.free_blockers()
    world.sync_scheduler(NAMESPACE)  # cycles from here on see the freed cluster
    if shut_out:
        return watch_gated(world, row, group)
    before = world.cycles(NAMESPACE, root)
    last, _ = decide(world, row, group, before, "on the empty cluster")
    last = relogged(world, last)
    if last.started:
        placed = per_domain(last, row.key, hosts)
        return Fate(WAITS, "waited, then " + describe(last, row), placed, last.condition)
    cycles = world.cycles(NAMESPACE, root) - before
    reason = (last.condition or {}).get("reason")
    texts = sorted(
        {f"{c.get('reason')}: {c.get('message')}" for c in map(pod_scheduled_condition, last.pods) if c}
    )
    placed = per_domain(last, row.key, hosts)
    return Fate(NEVER, f"never ({reason}, {cycles} cycles empty)", placed, last.condition, texts)


def watch_gated(world: NativeWorld, row: Row, group: str) -> Fate:
    """A gated group on the empty cluster: never, if it stays untried through the watch."""
    time.sleep(GATED_WATCH_SECONDS)
    last, _ = look(world, row, group)
    if last.started:
        placed = per_domain(last, row.key, world.node_labels)
        return Fate(WAITS, "waited, then " + describe(last, row), placed)
    if not gated(world, last, row) or world.cycles(NAMESPACE, row.composite or group):
        return Fate(ERROR, f"error: a gated group changed on the empty cluster: {last.condition}")
    text = f"never (gated: {row.pods} pods, minCount {row.min_count}; {GATED_WATCH_SECONDS:g}s empty)"
    return Fate(NEVER, text, gated=True)
