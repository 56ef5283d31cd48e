"""The rows of the native proof table (e2e/native_table.py): each a workload for the cluster of
e2e/native_scenario.py and the fate it was written to meet in the v1.36.5 scheduler."""

from __future__ import annotations

import os
from collections.abc import Sequence

from e2e.kueue_scenario import BLOCK, RACK
from e2e.native_row import ERROR, FITS, NAMESPACE, NEVER, ROWS_ENV, WAITS, Row
from e2e.native_rows_more import MORE_ROWS
from e2e.native_scenario import HOSTNAME, Shape, bound_pod, hand_written, indexed_job, job_in_group

__all__ = ["ERROR", "FITS", "NAMESPACE", "NEVER", "ROWS", "WAITS", "Row", "selected_rows"]


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
    group_row("basic-rack-7x4", FITS, 7, 4, None, RACK),
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
    # One host as the domain: 2 x 3 GPUs fit r3-h0 (6 free) and every free host; r3-h0 is the
    # fullest. 2 x 8 GPUs never share a host.
    group_row("host-2x3", FITS, 2, 3, 2, HOSTNAME),
    group_row("host-2x8-never", NEVER, 2, 8, 2, HOSTNAME),
    # nodeSelector block b1: of its racks r3 (22 free) holds 4 x 4 GPUs, r2 (12) only 3; r0, the
    # fullest rack that holds it, is filtered out. A selector for the one host r2-h0 (8 GPUs when
    # empty) leaves a gang of 3 x 4 GPUs no placement, though its rack holds 6 such pods.
    mixed_rack_row("rack-4x4-selector-b1", FITS, [Shape(4, node_selector=((BLOCK, "b1"),))] * 4),
    mixed_rack_row(
        "rack-3x4-selector-one-host-never", NEVER, [Shape(4, node_selector=((HOSTNAME, "r2-h0"),))] * 3
    ),
    # A key no node carries: the scheduler generates no placement at all, so the group never runs.
    group_row("zone-key-unlabelled-never", NEVER, 2, 4, 2, "topology.example.com/zone"),
    *MORE_ROWS,
)


def selected_rows(rows: tuple[Row, ...] = ROWS) -> tuple[Row, ...]:
    """``rows`` (this table's), or only those named in ``$TASGATE_NATIVE_ROWS``."""
    names = [n for n in os.environ.get(ROWS_ENV, "").split(",") if n]
    unknown = set(names) - {row.name for row in rows}
    if unknown:
        raise ValueError(f"{ROWS_ENV} names no row {sorted(unknown)}")
    return tuple(row for row in rows if not names or row.name in names)
