"""Which domains the picture and the text show: all of a small level, the ones that matter of a
large one, and the rest summed in one "… and K more" entry per parent.

At 10,000 nodes a box or a line per host is not readable, and the hosts a person needs are few:
the waiting gangs' candidates (the domain closest to holding each now, the empty-cluster
tie-break), the shapes' best domains and, per level, the emptiest and the fullest few. A level
of at most ``SHOW_ALL`` domains is shown whole; the ancestors of every shown domain are shown, so
the tree stays a tree.
Figures in, a tree of figures out: no engine run, no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from webhook.decide.messages import short_level
from webhook.figures.fragmentation import DomainFigure, FlavorFigures
from webhook.present.order import path_key

SHOW_ALL = 64  # a level with at most this many domains is shown whole
EXTREMES = 4  # else: its emptiest and fullest this many, besides the waiting gangs' candidates

Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Hidden:
    """The children of one shown domain (or of the root) left out, summed."""

    level: str
    count: int
    free: int
    total: int
    used: int
    unavailable: int
    tainted: int = 0

    @property
    def label(self) -> str:
        noun = short_level(self.level) + ("s" if self.count != 1 else "")
        return f"… and {self.count} more {noun}"

    @property
    def figure(self) -> str:
        parts = [f"{self.unavailable} unavailable"] * bool(self.unavailable)
        parts += [f"{self.tainted} tainted"] * bool(self.tainted)
        return f"{self.free}/{self.total}" + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True, slots=True)
class Shown:
    """The shown tree: ``children[()]`` are the shown top-level domains; ``hidden[p]`` sums the
    children of ``p`` left out; ``collapsed`` names the levels shown in part, with their counts."""

    children: Mapping[Path, tuple[DomainFigure, ...]]
    hidden: Mapping[Path, Hidden]
    collapsed: tuple[tuple[str, int, int], ...]  # level, shown, of

    def kids(self, path: Path) -> tuple[DomainFigure, ...]:
        return self.children.get(path, ())

    @property
    def note(self) -> str:
        """What was left out, for the reader: "rack: 12 of 200 shown"."""
        if not self.collapsed:
            return ""
        parts = ", ".join(f"{short_level(level)}: {n} of {of} shown" for level, n, of in self.collapsed)
        return (
            f"{parts} (the waiting gangs' candidates, the shapes' best domains, the {EXTREMES} emptiest "
            f"and {EXTREMES} fullest of each level; the rest summed)"
        )


def collapse(figures: FlavorFigures, keep: Collection[Path], levels: Sequence[str] | None = None) -> Shown:
    """The shown tree of ``levels`` (default: all): ``keep`` (paths, any level) always shown."""
    drawn = tuple(levels if levels is not None else figures.levels)
    by_level: dict[str, list[DomainFigure]] = {level: [] for level in drawn}
    for d in figures.domains:
        if d.level in by_level:
            by_level[d.level].append(d)
    picked: set[Path] = set()
    collapsed = []
    for level in drawn:
        chosen = _choose(by_level[level], keep)
        picked.update(chosen)
        if len(chosen) < len(by_level[level]):
            collapsed.append(level)
    shown = {p[:n] for p in picked for n in range(1, len(p) + 1)}
    tree = _tree(by_level, drawn, shown)
    counts = tuple(
        (level, sum(1 for d in by_level[level] if d.path in shown), len(by_level[level]))
        for level in collapsed
    )
    return Shown(tree[0], tree[1], counts)


def _choose(domains: list[DomainFigure], keep: Collection[Path]) -> set[Path]:
    """All of a small level; else the kept ones and the emptiest and fullest by free share.

    Ties go by the tree's order (natural order is for what is shown: sorting every host of a
    50,000-node level by its name would cost more than all the rest of the page).
    """
    if len(domains) <= SHOW_ALL:
        return {d.path for d in domains}
    share = [_free_share(d) for d in domains]
    fullest = heapq.nsmallest(EXTREMES, range(len(domains)), key=lambda i: (share[i], i))
    emptiest = heapq.nsmallest(EXTREMES, range(len(domains)), key=lambda i: (-share[i], i))
    chosen = {domains[i].path for i in (*fullest, *emptiest)}
    kept = set(keep)
    return chosen | {d.path for d in domains if d.path in kept}


def _free_share(d: DomainFigure) -> float:
    return d.free / d.total if d.total > 0 else 0.0


def _tree(
    by_level: Mapping[str, list[DomainFigure]], drawn: Sequence[str], shown: set[Path]
) -> tuple[dict[Path, tuple[DomainFigure, ...]], dict[Path, Hidden]]:
    """Shown children per parent in natural order, and the left-out ones summed per shown parent."""
    children: dict[Path, list[DomainFigure]] = {}
    left: dict[Path, list[DomainFigure]] = {}
    for level in drawn:
        for d in by_level[level]:
            parent = d.path[:-1]
            if parent and parent not in shown:
                continue
            (children if d.path in shown else left).setdefault(parent, []).append(d)
    hidden = {
        parent: Hidden(
            kids[0].level,
            len(kids),
            sum(d.free for d in kids),
            sum(d.total for d in kids),
            sum(d.used for d in kids),
            sum(d.unavailable for d in kids),
            sum(d.tainted for d in kids),
        )
        for parent, kids in left.items()
    }
    ordered = {
        parent: tuple(sorted(kids, key=lambda d: path_key(d.path))) for parent, kids in children.items()
    }
    return ordered, hidden
