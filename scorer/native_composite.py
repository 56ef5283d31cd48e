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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scorer.model import PODS, Node
from scorer.native import NO_KEY, NativeRequest, place_native, schedulable_for, taken_on

Usage = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class CompositeDomain:
    """One placement of the composite: which children it placed, whether that is enough."""

    value: str
    placed: tuple[str, ...]
    failed: tuple[str, ...]
    feasible: bool
    uncertain: bool  # failed after a child's domain was a random tie


@dataclass(frozen=True)
class CompositePlacement:
    fits: bool
    key: str | None
    min_groups: int
    domains: tuple[CompositeDomain, ...]
    labelled_nodes: int

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
    fits = any(d.feasible for d in domains)
    return CompositePlacement(fits, key, min_groups, tuple(domains), len(labelled))


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
    placed: list[str] = []
    failed: list[str] = []
    tied = False
    for i, child in enumerate(children):
        if len(placed) + len(children) - i < min_groups:  # PlacementFeasible's early stop
            failed.extend(c.name for c in children[i:])
            break
        found = place_native(inside, child, usage, empty, nonzero=nonzero, assumed=assumed)
        if not found.fits or found.domain is None:
            failed.append(child.name)
            continue
        placed.append(child.name)
        tied = tied or len(found.tied) > 1
        where = [n for n in inside if child.key is None or n.labels.get(child.key) == found.domain]
        _assume(where, child, found.count, usage, empty, assumed)
    feasible = len(placed) >= min_groups
    return CompositeDomain(value, tuple(placed), tuple(failed), feasible, tied and not feasible)


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
