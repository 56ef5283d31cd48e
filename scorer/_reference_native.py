"""Pure-Python twin of the compiled native mode: the kube-scheduler v1.36.5 PodGroup placement.

The readable oracle the tests hold ``scorer._native`` to. It follows the scheduler's
``podGroupSchedulingPlacementAlgorithm`` (``pkg/scheduler/schedule_one_podgroup.go``) with the
default plugins the ``TopologyAwareWorkloadScheduling`` and ``GangScheduling`` gates enable:

1. ``TopologyPlacementGenerator`` (``plugins/topologyaware``): one placement per value of the
   PodGroup's topology key, holding every node that carries that value (nodes without the
   key are in none); when pods of the group are already bound, only their domain.
2. Per placement, the default per-pod algorithm: each queued pod is filtered and bound in
   turn (assumed, then forgotten). For pods of one shape, a domain takes
   ``min(queued, sum over its schedulable nodes of the pods each still fits)``, whatever
   node order the per-pod scores pick; ``GangScheduling``'s Permit succeeds once bound +
   assumed pods reach ``minCount``.
3. Feasible placements are scored: ``NodeResourcesFit.ScorePlacement`` (MostAllocated on the
   placement's summed cpu and memory, the group's pods included, weight 1) plus
   ``PodGroupPodsCount`` (bound + assumed pods, normalised to 0..100 by the largest, weight
   1). The highest total wins; equal totals are broken at random (``Randomizer``), so the
   twin reports how many share the best and picks the lowest index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NAME = "reference"
MAX_SCORE = 100  # fwk.MaxScore / MaxNodeScore


@dataclass(frozen=True)
class NativeRaw:
    """Per domain: capacity, pods placed, the two scores, feasibility; the winner and ties."""

    capacity: list[int]
    placed: list[int]
    fit_score: list[int]
    pods_score: list[int]
    feasible: list[bool]
    best: int
    n_best: int


def node_fit(free: Sequence[int], req: Sequence[int]) -> int:
    """NodeResourcesFit's filter, repeated: pods of this shape the node still takes."""
    fits = [max(have, 0) // want for have, want in zip(free, req, strict=True) if want > 0]
    return min(fits) if fits else 0


def most_allocated(alloc: Sequence[int], used: Sequence[int], score_req: Sequence[int], placed: int) -> int:
    """``mostResourceScorer`` over the placement's sums (``scorePlacement``), Go integer maths."""
    total = weights = 0
    for capacity, before, per_pod in zip(alloc, used, score_req, strict=True):
        if capacity == 0:
            continue
        requested = min(before + placed * per_pod, capacity)
        total += requested * MAX_SCORE // capacity
        weights += 1
    return total // weights if weights else 0


def _rows(matrix: Sequence[Sequence[int]]) -> Sequence[Sequence[int]]:
    """A 2-D memoryview (what the compiled engine takes) as rows; lists pass through."""
    return matrix.tolist() if isinstance(matrix, memoryview) else matrix  # type: ignore[return-value]


def place(
    node_domain: Sequence[int],
    node_ok: Sequence[int],
    free: Sequence[Sequence[int]],
    req: Sequence[int],
    alloc: Sequence[Sequence[int]],
    used: Sequence[Sequence[int]],
    score_req: Sequence[int],
    count: int,
    min_count: int,
    scheduled: int,
    required_domain: int,
) -> NativeRaw:
    """Same contract as ``scorer._native.place`` (without the shape checks)."""
    free, alloc, used = (_rows(m) for m in (free, alloc, used))
    n_domains = len(alloc)
    capacity = [0] * n_domains
    for d, ok, row in zip(node_domain, node_ok, free, strict=True):
        if d >= 0 and ok:
            capacity[d] += node_fit(row, req)
    placed = [min(count, c) for c in capacity]
    extra = [[p * x for x in score_req] for p in placed]
    return _scored(capacity, placed, extra, alloc, used, min_count, scheduled, required_domain)


def node_score(
    cap: Sequence[int], used_nz: Sequence[int], used: Sequence[int], nz: Sequence[int], act: Sequence[int]
) -> int:
    """One pod's per-node score: NodeResourcesFit (LeastAllocated, cpu and memory weight 1,
    non-zero requests) + NodeResourcesBalancedAllocation (actual requests), as in Go."""
    least = weights = 0
    for c, u, p in zip(cap, used_nz, nz, strict=True):
        if c == 0:
            continue
        requested = u + p
        least += 0 if requested > c else (c - requested) * MAX_SCORE // c
        weights += 1
    least = least // weights if weights else 0
    if not any(act):  # isBestEffortPod: BalancedAllocation scores 0
        return least
    with_pod = _balanced([u + p for u, p in zip(used, act, strict=True)], cap)
    without = _balanced(list(used), cap)
    return least + MAX_SCORE // 2 + (MAX_SCORE // 2 + with_pod - without) // 2


def _balanced(requested: Sequence[int], cap: Sequence[int]) -> int:
    fractions = [min(r / c, 1.0) for r, c in zip(requested, cap, strict=True) if c != 0]
    std = abs((fractions[0] - fractions[1]) / 2) if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_SCORE)


def place_pods(
    node_domain: Sequence[int],
    node_ok: Sequence[int],
    free: Sequence[Sequence[int]],
    pods: Sequence[Sequence[int]],
    node_cap: Sequence[Sequence[int]],
    node_used: Sequence[Sequence[int]],
    pods_nz: Sequence[Sequence[int]],
    pods_act: Sequence[Sequence[int]],
    alloc: Sequence[Sequence[int]],
    used: Sequence[Sequence[int]],
    min_count: int,
    scheduled: int,
    required_domain: int,
) -> NativeRaw:
    """Pods of several shapes, in queue order: the per-pod cycle run in each domain (filter on
    the node's free capacity, bind to the best-scored node, lowest index among ties where the
    scheduler picks at random), then the placement scores on what was placed."""
    free, pods, node_cap, node_used, pods_nz, pods_act, alloc, used = (
        _rows(m) for m in (free, pods, node_cap, node_used, pods_nz, pods_act, alloc, used)
    )
    n_domains = len(alloc)
    placed = [0] * n_domains
    extra = [[0, 0] for _ in range(n_domains)]
    for d in range(n_domains):
        nodes = [n for n, nd in enumerate(node_domain) if nd == d and node_ok[n]]
        room = {n: list(free[n]) for n in nodes}
        nz_used = {n: list(node_used[n]) for n in nodes}
        act_used = {n: list(node_used[n]) for n in nodes}
        for p, want in enumerate(pods):
            best, best_score = -1, -1
            for n in nodes:
                if any(w > 0 and w > have for w, have in zip(want, room[n], strict=True)):
                    continue
                score = node_score(node_cap[n], nz_used[n], act_used[n], pods_nz[p], pods_act[p])
                if score > best_score:
                    best, best_score = n, score
            if best < 0:
                continue
            room[best] = [have - w for have, w in zip(room[best], want, strict=True)]
            nz_used[best] = [u + x for u, x in zip(nz_used[best], pods_nz[p], strict=True)]
            act_used[best] = [u + x for u, x in zip(act_used[best], pods_act[p], strict=True)]
            placed[d] += 1
            extra[d] = [e + x for e, x in zip(extra[d], pods_nz[p], strict=True)]
    return _scored(placed, placed, extra, alloc, used, min_count, scheduled, required_domain)


def _scored(
    capacity: list[int],
    placed: list[int],
    extra: list[list[int]],
    alloc: Sequence[Sequence[int]],
    used: Sequence[Sequence[int]],
    min_count: int,
    scheduled: int,
    required_domain: int,
) -> NativeRaw:
    """Feasibility (Permit at minCount) and the two placement scores, given what each domain took."""
    n_domains = len(alloc)
    feasible = [
        p > 0 and scheduled + p >= min_count and required_domain in (-1, d) for d, p in enumerate(placed)
    ]
    most = max((scheduled + p for p, f in zip(placed, feasible, strict=True) if f), default=0)
    fit_score = [0] * n_domains
    pods_score = [0] * n_domains
    best, n_best, best_total = -1, 0, -1
    for d in range(n_domains):
        if not feasible[d]:
            continue
        fit_score[d] = most_allocated(alloc[d], used[d], extra[d], 1)
        pods_score[d] = (scheduled + placed[d]) * MAX_SCORE // most
        total = fit_score[d] + pods_score[d]
        if total > best_total:
            best, n_best, best_total = d, 1, total
        elif total == best_total:
            n_best += 1
    return NativeRaw(capacity, placed, fit_score, pods_score, feasible, best, n_best)
