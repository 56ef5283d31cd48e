"""What the kube-scheduler says only in its log, as patterns over its lines (v1.36.5 and v1.37.0):
its count of a group's failed cycles, a successful group cycle, GangScheduling's PreEnqueue gates
and (v1.37) the queue parking a pod whose group objects it has not seen. No API object records
these; e2e/native_world.py reads them from the running scheduler's log. The line texts are the
v1.36.5 and v1.37.0 sources' (``pkg/scheduler/schedule_one_podgroup.go``,
``backend/queue/scheduling_queue.go``, ``framework/plugins/gangscheduling``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

# GangScheduling's PreEnqueue statuses (pkg/scheduler/framework/plugins/gangscheduling, v1.36.5)
MIN_COUNT_GATE = "waiting for minCount pods from a gang to appear in scheduling queue"
GROUP_GATE = "waiting for pods's pod group"
# v1.37.0 with CompositePodGroup on: PreEnqueue first builds the pod's group hierarchy from the
# scheduler's cache, which fails while the PodGroup (or its parent) is missing
# (preEnqueueWithHierarchies, cache.BuildHierarchySnapshotFromPod).
HIERARCHY_GATE = "failed to build hierarchy snapshot"
GROUP_GATES = (GROUP_GATE, HIERARCHY_GATE)
# v1.37.0 keeps a pod whose PodGroup (or parent CompositePodGroup) it has not seen out of the queue
# before any PreEnqueue, and logs it at --vmodule=scheduling_queue=5 (PriorityQueue.Add).
INCOMPLETE_GROUP = "Pod with pod group added to incompletePodGroupPods"
# v1.37.0 puts a root group back in its queue after every failed attempt and says so at V(3),
# within the profile's --vmodule=scheduling_queue=5 (PriorityQueue.AddAttemptedPodGroupIfNeeded),
# naming the root and event="ScheduleAttemptFailure": unschedulable, waiting on its preemption, or
# an error.
ATTEMPT_FAILED = "Pod group moved to an internal scheduling queue"


def cycle_pattern(minor: int, namespace: str, group: str) -> re.Pattern[str]:
    """A scheduler log line for one failed cycle of the root group ``namespace/group``: v1.36, its
    "Unable to schedule a pod group" line (``--v=2``); v1.37, the root's failed attempt
    (``ATTEMPT_FAILED``, ``--vmodule=scheduling_queue=5``), which also follows a ``SchedulerError``
    (a group refused before any placement, e.g. its pods' priority not its own, logs no "Unable to
    schedule" line) and a cycle waiting on its preemption."""
    key = re.escape(f"{namespace}/{group}")
    if minor >= 37:
        line = '"' + re.escape(ATTEMPT_FAILED) + '"'
        return re.compile(line + '.*podGroup="' + key + '".*event="ScheduleAttemptFailure"')
    return re.compile(r'"Unable to schedule a pod group".*podGroup="' + key + '"')


def scheduled_pattern(namespace: str, group: str) -> re.Pattern[str]:
    """The scheduler's ``--v=2`` line for a successful cycle of PodGroup ``namespace/group``; v1.37
    puts ``podGroupType`` first and names each leaf of a CompositePodGroup in a line of its own."""
    key = re.escape(f"{namespace}/{group}")
    return re.compile(r'"Successfully scheduled a pod group"(?: \w+="[^"]*")* podGroup="' + key + '"')


def gate_pattern(namespace: str, reasons: Sequence[str]) -> re.Pattern[str]:
    """GangScheduling's PreEnqueue keeping a pod of ``namespace`` out of the queue for one of
    ``reasons`` (``--vmodule=scheduling_queue=4``); group 1 is the pod's name."""
    return re.compile(
        r'"Status after running PreEnqueue plugin" pod="' + re.escape(namespace) + r'/([^"]+)"'
        r'.*plugin="GangScheduling".*(?:' + "|".join(map(re.escape, reasons)) + ")"
    )


def parked_pattern(namespace: str) -> re.Pattern[str]:
    """v1.37's queue parking a pod of ``namespace`` until its group objects appear
    (``INCOMPLETE_GROUP``); group 1 is the pod's name."""
    return re.compile(
        '"' + re.escape(INCOMPLETE_GROUP) + r'[^"]*".*pod="' + re.escape(namespace) + r'/([^"]+)"'
    )


def named_pods(pattern: re.Pattern[str], text: str) -> set[str]:
    """The pod names ``pattern`` (group 1) finds in the lines of ``text``."""
    return {m.group(1) for m in map(pattern.search, text.splitlines()) if m}
