"""A v1.37 CompositePodGroup placed as the kube-scheduler's composite cycle places it.

``compositePodGroupSchedulingPlacementAlgorithm`` (``pkg/scheduler/schedule_one_podgroup.go``,
v1.37.0) makes one placement per value of the composite's topology key (every node when it has
none); inside each, ``compositePodGroupSchedulingDefaultAlgorithm`` runs the child groups in
``GetChildGroups`` order (creation time, then name), each placed by its own PodGroup cycle *among
the placement's nodes*, the pods of earlier children assumed. GangScheduling's
``PlacementFeasible`` counts children: a placement is feasible once ``minGroupCount`` of them are
placed, and is abandoned as soon as the children left cannot reach it (early stop).

Each child is placed by `scorer.native.place_native` (the one PodGroup placement), so a child's
domain inside the placement is the scheduler's choice; where it is a random tie the next
children may see other nodes free, so a placement that fails after such a tie is ``uncertain``
(never a reason to deny). Which nodes of the child's domain its pods take is not modelled pod by
pod: they are assumed first-fit in node-name order, exact for the free capacity later siblings
see when the pods are of one shape.

The feasible placements are scored as a PodGroup's are (``findBestCompositePodGroupPlacement`` ->
``findBestPlacement``): ``NodeResourcesFit.ScorePlacement`` (MostAllocated over the placement's
summed cpu and memory, every assumed pod of the subtree included) plus ``PodGroupPodsCount``
(the subtree's pods, normalised by the largest); the highest total wins, ties at random (the
lowest value is reported, with the tie). Each child's placement inside the winner is what the
scheduler binds it to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scorer._reference_native import MAX_SCORE, most_allocated
from scorer.model import PODS, Node
from scorer.native import (
    NO_KEY,
    NON_ZERO,
    SCORED,
    NativePlacement,
    NativeRequest,
    place_native,
    schedulable_for,
    taken_on,
)

Usage = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class CompositeDomain:
    """One placement of the composite: which children it placed, whether that is enough."""

    value: str
    placed: tuple[str, ...]
    failed: tuple[str, ...]
    feasible: bool
    uncertain: bool  # failed after a child's domain was a random tie
    placements: tuple[tuple[str, NativePlacement], ...] = ()  # each placed child's, inside it
    fit_score: int = 0  # NodeResourcesFit.ScorePlacement, the subtree's pods assumed
    pods: int = 0  # the subtree's pods bound and placed (PodGroupPodsCount before normalising)
    pods_score: int = 0


@dataclass(frozen=True)
class CompositePlacement:
    fits: bool
    key: str | None
    min_groups: int
    domains: tuple[CompositeDomain, ...]
    labelled_nodes: int
    domain: str | None = None  # the winner (the lowest value among tied totals)
    tied: tuple[str, ...] = ()

    @property
    def chosen(self) -> CompositeDomain | None:
        return next((d for d in self.domains if d.value == self.domain), None)

    @property
    def uncertain(self) -> bool:
        return not self.fits and any(d.uncertain for d in self.domains)

    @property
    def most(self) -> int:
        """The most children any one placement took."""
        return max((len(d.placed) for d in self.domains), default=0)


def place_composite(
    nodes: Sequence[Node],
    key: str | None,
    min_groups: int,
    children: Sequence[NativeRequest],
    usage: Usage | None,
    empty: bool,
    nonzero: Mapping[str, tuple[int, int]] | None = None,
) -> CompositePlacement:
    """Place ``children`` (in the scheduler's order) inside one domain of ``key``."""
    labelled = [n for n in nodes if key is None or key in n.labels]
    values = sorted({n.labels[key] for n in labelled}) if key is not None else [NO_KEY]
    domains = []
    for value in values:
        inside = [n for n in labelled if key is None or n.labels[key] == value]
        domains.append(_place_inside(value, inside, min_groups, children, usage, empty, nonzero))
    scored = _scored(domains)
    best = max((d.fit_score + d.pods_score for d in scored if d.feasible), default=None)
    tied = tuple(d.value for d in scored if d.feasible and d.fit_score + d.pods_score == best)
    return CompositePlacement(
        bool(tied), key, min_groups, tuple(scored), len(labelled), tied[0] if tied else None, tied
    )


def _scored(domains: list[CompositeDomain]) -> list[CompositeDomain]:
    """PodGroupPodsCount normalised by the most pods any feasible placement holds."""
    most = max((d.pods for d in domains if d.feasible), default=0)
    return [replace(d, pods_score=d.pods * MAX_SCORE // most) if d.feasible and most else d for d in domains]


def _place_inside(
    value: str,
    inside: Sequence[Node],
    min_groups: int,
    children: Sequence[NativeRequest],
    usage: Usage | None,
    empty: bool,
    nonzero: Mapping[str, tuple[int, int]] | None,
) -> CompositeDomain:
    assumed: dict[str, dict[str, int]] = {}
    placed: list[tuple[str, NativePlacement]] = []
    failed: list[str] = []
    tied = False
    added, pods = [0] * len(SCORED), 0
    for i, child in enumerate(children):
        if len(placed) + len(children) - i < min_groups:  # PlacementFeasible's early stop
            failed.extend(c.name for c in children[i:])
            break
        found = place_native(inside, child, usage, empty, nonzero=nonzero, assumed=assumed)
        if not found.fits or found.domain is None:
            failed.append(child.name)
            continue
        placed.append((child.name, found))
        tied = tied or len(found.tied) > 1
        where = [n for n in inside if child.key is None or n.labels.get(child.key) == found.domain]
        _assume(where, child, found.count, usage, empty, assumed)
        shapes = list(child.pods[: found.count]) if child.pods else [child.requests] * found.count
        for j, r in enumerate(SCORED):
            added[j] += sum(shape.get(r, 0) or NON_ZERO[r] for shape in shapes)
        pods += found.count + child.scheduled
    feasible = len(placed) >= min_groups
    alloc = [sum(n.allocatable.get(r, 0) for n in inside) for r in SCORED]
    used = [
        sum(taken_on(n, usage, empty, None).get(r, 0) + _extra(n.name, j, empty, nonzero) for n in inside)
        for j, r in enumerate(SCORED)
    ]
    return CompositeDomain(
        value,
        tuple(name for name, _ in placed),
        tuple(failed),
        feasible,
        tied and not feasible,
        tuple(placed),
        most_allocated(alloc, used, added, 1) if feasible else 0,
        pods,
    )


def _extra(node: str, j: int, empty: bool, nonzero: Mapping[str, tuple[int, int]] | None) -> int:
    """What the node's bound pods count beyond their requests in NonZeroRequested."""
    return 0 if empty or nonzero is None else nonzero.get(node, (0, 0))[j]


def _assume(
    nodes: Sequence[Node],
    child: NativeRequest,
    count: int,
    usage: Usage | None,
    empty: bool,
    assumed: dict[str, dict[str, int]],
) -> None:
    """Put ``count`` of the child's pods on ``nodes`` first-fit, into ``assumed``."""
    shapes = list(child.pods) if child.pods else [child.requests] * count
    for shape in shapes[:count]:
        want = {**shape, PODS: 1}
        for node in sorted(nodes, key=lambda n: n.name):
            if not schedulable_for(node, child, empty):
                continue
            taken = taken_on(node, usage, empty, assumed)
            if all(node.allocatable.get(r, 0) - taken.get(r, 0) >= v for r, v in want.items() if v > 0):
                mine = assumed.setdefault(node.name, {})
                for r, v in want.items():
                    mine[r] = mine.get(r, 0) + v
                break
