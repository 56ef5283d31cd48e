"""The rows of the v1.37.0 native proof table (e2e/native_table.py, tests/e2e_native137): each a
workload for the cluster of e2e/native_scenario.py, in v1.37 shapes (docs/native-v137.md), and
the fate it was written to meet in kube-scheduler v1.37.0.

The v1.36 rows that mean the same on v1.37 (hand-written gangs: rack, block, host, minCount,
basic; Jobs, now asking for their gang in ``spec.scheduling``), and what only v1.37 has: a Job
left basic, a Job gang with ``minCount`` and a topology key of its own, CompositePodGroups (a gang
of child groups in one block), a group whose pods' priority is not its own (``SchedulerError``),
group preemption, and a v1.36 object sent to v1.37 (refused: ``v1alpha2`` is not served).

Not here, though v1.36 has them: rack-min2-of-4x4 and basic-rack-7x4, whose v1.37 fate is a race.
When a PodGroup appears, the v1.37 queue moves its parked pods into the root group one at a time
(``PriorityQueue.AddPodGroup`` → ``addPodGroupMember``) while the scheduling loop pops: the first
pod makes the group's queue entry, and once popped the rest wait in ``pendingPodGroupPods`` for
the next cycle. A gang waits in PreEnqueue for ``minCount`` pods, so the first cycle sees from
``minCount`` to all of them; a basic group may be placed on its first pod alone. Then the domain
differs: basic-rack-7x4 was once bound 3 in r2 (the first pod's fullest rack, the rest pinned there)
instead of 5 in r1, and rack-min2-of-4x4 may start as 3 in r2 instead of 4 in r0. The rows kept
here end the same from any such first cycle.

Free now: racks r0 16 GPUs (hosts 0/8/8), r1 20 (4/8/8), r2 12 (0/4/8), r3 22 (6/8/8); blocks b0
36, b1 34; 19 slots of 4 GPUs, 7 whole free nodes. Empty: 24 per rack, 48 per block, 96 in all.
The blockers have no PriorityClass (priority 0); ``first`` is 1000 (native_scenario.PRIORITY_CLASSES).
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e.kueue_scenario import BLOCK, RACK
from e2e.native_k8s import V1_36, V1_37
from e2e.native_row import FITS, NEVER, REFUSED, WAITS, Leaf, Row
from e2e.native_scenario import (
    HOSTNAME,
    Child,
    Shape,
    child_group_name,
    composite_group,
    composite_name,
    hand_written,
    indexed_job,
    job_in_group,
)

V = V1_37
SCHEDULER_ERROR = "SchedulerError"


def job_row(
    name: str,
    intent: str,
    pods: int,
    gpus: int,
    *,
    gang: bool = True,
    min_count: int | None = None,
    key: str | None = None,
) -> Row:
    """An Indexed Job the Job controller makes a Workload and PodGroup for: a gang (``min_count``,
    default its parallelism; ``key`` in ``spec.scheduling.schedulingConstraints``), or basic."""

    def objects(ns: str) -> list[dict[str, object]]:
        return [indexed_job(name, ns, pods, gpus, k8s=V, gang=gang, min_count=min_count, key=key)]

    started = (min_count or pods) if gang else None
    return Row(name, intent, objects, pods, started, key, job=True)


def group_row(
    name: str,
    intent: str,
    pods: int,
    gpus: Shape | int | Sequence[Shape],
    min_count: int | None,
    key: str | None,
    *,
    priority_class: str | None = None,
    refused_as: str = "Unschedulable",
) -> Row:
    """A hand-written v1beta1 Workload and PodGroup (``priority_class`` on both) and its pods."""

    def objects(ns: str) -> list[dict[str, object]]:
        return hand_written(name, ns, pods, gpus, min_count, key, k8s=V, priority_class=priority_class)

    return Row(name, intent, objects, pods, min_count, key, refused_as=refused_as)


def composite_row(
    name: str, intent: str, children: Sequence[Child], min_groups: int | None, key: str | None
) -> Row:
    """A CompositePodGroup (gang ``min_groups`` of its child groups, basic for None; ``key``) over
    one PodGroup per child: the row's fate is its leaves' (e2e/native_fate.py)."""
    leaves = tuple(
        Leaf(child_group_name(name, c.template), c.pods, c.min_count if c.min_count is not None else 1)
        for c in children
    )
    return Row(
        name,
        intent,
        lambda ns: composite_group(name, ns, children, min_groups, key, k8s=V),
        sum(c.pods for c in children),
        None,
        key,
        composite=composite_name(name),
        leaves=leaves,
        min_groups=min_groups or 1,
    )


def job_group_row(
    name: str, intent: str, pods: int, gpus: int, key: str, min_count: int | None = None
) -> Row:
    """An Indexed Job whose pods join a hand-written PodGroup (gang ``min_count``, default ``pods``)."""
    m = pods if min_count is None else min_count
    return Row(name, intent, lambda ns: job_in_group(name, ns, pods, gpus, m, key, k8s=V), pods, m, key)


def skew_row(name: str) -> Row:
    """A v1.36 manifest (``scheduling.k8s.io/v1alpha2`` Workload and PodGroup, ``podGroupTemplateRef``)
    sent to v1.37.0, which serves no v1alpha2: its pods are created, the group objects refused."""
    return Row(name, REFUSED, lambda ns: hand_written(name, ns, 4, 4, 4, RACK, k8s=V1_36), 4, 4, RACK)


FIRST = Shape(4, priority_class="first")
ON_R3 = Shape(4, priority_class="first", node_selector=((RACK, "r3"),))

ROWS_V137: tuple[Row, ...] = (
    # Jobs asking for their gang (spec.scheduling.schedulingPolicy.gang; minCount = parallelism).
    job_row("job-4x4", FITS, 4, 4),
    job_row("job-3x2", FITS, 3, 2),
    job_row("job-7x8-exact", FITS, 7, 8),  # the 7 whole free nodes
    job_row("job-10x8-wait", WAITS, 10, 8),  # 7 whole nodes free now, 12 when empty
    job_row("job-20x4-fragmented", WAITS, 20, 4),  # 80 GPUs <= 84 free, but only 19 slots of 4
    job_row("job-2x16-too-big", NEVER, 2, 16),  # a pod larger than any node
    job_row("job-13x8-too-many", NEVER, 13, 8),  # 104 GPUs > 96
    # minCount 5 of 6 and a rack key in spec.scheduling, both copied into the Job's PodGroup: r1 and
    # r3 hold 5 slots of 4 GPUs.
    job_row("job-rack-min5-of-6x4", FITS, 6, 4, min_count=5, key=RACK),
    # No spec.scheduling: v1.37's Job controller still makes a Workload and PodGroup, basic. 13 x 8
    # GPUs is a never-fit gang (above) but a basic group: the 7 whole free nodes take 7 pods.
    job_row("job-basic-4x4", FITS, 4, 4, gang=False),
    job_row("job-basic-13x8-starts", FITS, 13, 8, gang=False),
    # Hand-written v1beta1 Workload + PodGroup (spec.workloadRef) and pods.
    group_row("rack-4x4", FITS, 4, 4, 4, RACK),  # r0, r1, r3 hold it; r0 is the fullest
    group_row("rack-3x4", FITS, 3, 4, 3, RACK),  # r2 exactly
    group_row("rack-6x4-wait", WAITS, 6, 4, 6, RACK),  # 24 GPUs: a rack only when empty
    group_row("rack-3x8-wait", WAITS, 3, 8, 3, RACK),  # 3 whole nodes in one rack: only when empty
    group_row("rack-7x4-never", NEVER, 7, 4, 7, RACK),  # 28 > 24 per rack (the cluster has room)
    group_row("rack-2x12-never", NEVER, 2, 12, 2, RACK),  # a pod larger than any node
    group_row("rack-min2-of-4x8", FITS, 4, 8, 2, RACK),  # 2 whole nodes in r0: starts with 2
    group_row("rack-min5-of-6x4", FITS, 6, 4, 5, RACK),  # 5 slots in r1 and r3: starts with 5
    group_row("rack-min7-of-8x4-never", NEVER, 8, 4, 7, RACK),  # 28 GPUs of quorum > 24 (early stop)
    group_row("block-8x4", FITS, 8, 4, 8, BLOCK),  # b0 9 slots, b1 8: b1 is the fuller
    group_row("block-4x8", FITS, 4, 8, 4, BLOCK),  # whole nodes: b0 has 4, b1 3
    group_row("block-10x4-wait", WAITS, 10, 4, 10, BLOCK),  # 40 > 36 now, <= 48 empty
    group_row("block-13x4-never", NEVER, 13, 4, 13, BLOCK),  # 52 > 48
    group_row("basic-rack-3x4", FITS, 3, 4, None, RACK),  # r2 exactly, from its first pod too
    group_row("basic-2x4", FITS, 2, 4, None, None),
    group_row("host-2x3", FITS, 2, 3, 2, HOSTNAME),  # r3-h0 (6 free) is the fullest host
    group_row("host-2x8-never", NEVER, 2, 8, 2, HOSTNAME),
    group_row("zone-key-unlabelled-never", NEVER, 2, 4, 2, "topology.example.com/zone"),
    job_group_row("job-in-rack-group-3x4", FITS, 3, 4, RACK),
    # 4 pods joining a PodGroup of minCount 5: GangScheduling's PreEnqueue keeps all 4 out of the
    # queue, and the Job never makes a fifth.
    job_group_row("job-4-in-min5-group", NEVER, 4, 4, RACK, min_count=5),
    # Priority. The pods and their PodGroup both of class `first`: placed as rack-4x4.
    group_row("priority-rack-4x4", FITS, 4, FIRST, 4, RACK, priority_class="first"),
    # Pods of class `first` (1000) in a PodGroup without it (0): validatePodGroup refuses the group
    # as a SchedulerError before any placement, every cycle, though r0 would hold it.
    group_row("mixed-priority-rack-4x4-never", NEVER, 4, FIRST, 4, RACK, refused_as=SCHEDULER_ERROR),
    # Preemption: 6 x 4 GPUs of class `first`, only on r3 (nodeSelector), which has 5 slots: the
    # group preempts the lower-priority blocker on r3-h0 (2 GPUs), then binds all 6 in r3.
    group_row("preempt-rack-6x4-r3", FITS, 6, ON_R3, 6, RACK, priority_class="first"),
    # CompositePodGroups (v1alpha3): a gang of 2 child groups in one block, each child a rack gang.
    # leader 1 x 4 + workers 4 x 4: b1 (leader r2, workers r3), as captured.
    composite_row(
        "composite-block-leader-workers",
        FITS,
        (Child("leader", 1, 4, 1, RACK), Child("workers", 4, 4, 4, RACK)),
        2,
        BLOCK,
    ),
    # Two rack gangs of 5 x 4 GPUs in one block: no block has two racks with 5 slots now (b0: r0 4,
    # r1 5; b1: r2 3, r3 5); any block when empty.
    composite_row(
        "composite-two-racks-wait",
        WAITS,
        (Child("a", 5, 4, 5, RACK), Child("b", 5, 4, 5, RACK)),
        2,
        BLOCK,
    ),
    # 7 x 4 + 6 x 4 GPUs (each fits a block alone) = 52 > 48 per block: never together.
    composite_row(
        "composite-block-52-never",
        NEVER,
        (Child("a", 7, 4, 7), Child("b", 6, 4, 6)),
        2,
        BLOCK,
    ),
    # Version skew: a v1alpha2 Workload and PodGroup (what v1.36 serves) sent to v1.37.
    skew_row("skew-v1alpha2-rack-4x4"),
)
