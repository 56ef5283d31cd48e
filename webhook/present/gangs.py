"""The waiting gangs in words and as marks on the picture, from each PodSet's must-wait figure.

"Now" is the figure `check`'s warning states (room in the best domain of the level, or in the
whole topology for a gang that may spread) and the domain closest to holding it. "Once capacity
frees" is not a place: it depends on what frees first. What is known is how many domains of the
level hold the gang on an empty cluster, and which of them Kueue's order would pick there — a
tie-break, said as one, and never drawn as where the gang goes.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide.messages import room, short_level
from webhook.figures.fragmentation import FlavorFigures
from webhook.figures.waiting import WaitingGang, WaitingPodSet
from webhook.present.order import path_key

Path = tuple[str, ...]
MAX_NAMED = 4  # a spread tie-break names at most this many top-level domains


def waiting_for(waiting: Sequence[WaitingGang], figures: FlavorFigures) -> list[WaitingGang]:
    """The gangs judged on this flavor and topology."""
    return [g for g in waiting if g.flavor == figures.flavor and g.topology == figures.topology]


def flavor_of(gang: WaitingGang, figures: Sequence[FlavorFigures]) -> FlavorFigures | None:
    """The figures of the flavor a gang was judged on (None: a policy default topology, or gone)."""
    return next((f for f in figures if waiting_for([gang], f)), None)


def numbered(waiting: Sequence[WaitingGang]) -> dict[tuple[str, str, str], int]:
    """W1, W2, …: one number per workload, in list order, the same in the text and the picture."""
    numbers: dict[tuple[str, str, str], int] = {}
    for gang in waiting:
        numbers.setdefault(gang.key, len(numbers) + 1)
    return numbers


def needs_text(ps: WaitingPodSet) -> str:
    level = short_level(ps.level) if ps.level else "any level"
    sliced = (
        f", slices of {ps.slice_size} per {short_level(ps.slice_level)}"
        if ps.slice_size > 1 and ps.slice_level
        else ""
    )
    return f"{ps.count} x {ps.gpus_per_pod} GPU {ps.mode} {level}{sliced}"


def phrase(ps: WaitingPodSet) -> str:
    """check's figure in check's words (``messages.room``, which its warning is made of)."""
    f = ps.figure
    return room(f.where, f.held, f.needed, f.unit == "pods")


def now_text(ps: WaitingPodSet) -> str:
    """check's figure, in check's words, and the domain closest to holding it (when one counts)."""
    f = ps.figure
    closest = f"; closest now: {','.join(f.closest)}" if f.closest else ""
    return f"{phrase(ps)}{closest}"


def once_text(ps: WaitingPodSet, figures: FlavorFigures | None) -> str:
    """How many domains could take it once capacity frees, and the empty-cluster tie-break."""
    f = ps.figure
    picks = tie_break(ps, figures, None if f.required else 1) if figures is not None else []
    named = ", ".join(",".join(p) for p in picks[:MAX_NAMED]) + (" …" if len(picks) > MAX_NAMED else "")
    if figures is None:
        return "in a domain not drawn (judged without a TAS flavor)"
    if not f.required:
        return f"spread over the topology as room frees (on an empty cluster Kueue would use {named or '?'})"
    noun = short_level(f.level)
    if f.candidates <= 1:
        return f"only {named or '?'} holds it, even on an empty cluster"
    return (
        f"any of the {f.candidates} {noun}s that hold it when empty "
        f"(tie: on an empty cluster Kueue's order picks {named or '?'})"
    )


def closest(ps: WaitingPodSet, depth: int) -> Path | None:
    """The closest domain now, cut to ``depth`` levels (the picture may draw fewer)."""
    found = ps.figure.closest
    return found[:depth] if found else None


def tie_break(ps: WaitingPodSet, figures: FlavorFigures, depth: int | None = None) -> list[Path]:
    """The domains of the empty-cluster placement, at the PodSet's level (or ``depth`` levels).

    Kueue writes host names alone when hostname is the lowest level: they are found by name.
    """
    placed = ps.figure.tie_break
    if placed is None:
        return []
    levels = figures.levels
    if depth is None:
        depth = levels.index(ps.figure.level) + 1 if ps.figure.level in levels else len(levels)
    hosts = {d.path[-1]: d.path for d in figures.domains if figures.is_host_level(d.level)}
    found = set()
    for domain in placed.domains:
        full = domain.values if len(domain.values) == len(levels) else hosts.get(domain.values[-1])
        if full is not None:
            found.add(tuple(full[:depth]))
    return sorted(found, key=path_key)


def keep_paths(waiting: Sequence[WaitingGang], figures: FlavorFigures) -> set[Path]:
    """The domains a collapsed picture must still show: each gang's closest and its tie-break,
    and the best domain of each shape at each level (the shape table names them)."""
    keep: set[Path] = {s.best_domain for s in figures.shapes if s.best_domain}
    for gang in waiting_for(waiting, figures):
        for ps in gang.pod_sets:
            near = closest(ps, len(figures.levels))
            keep.update([near] if near else [])
            keep.update(tie_break(ps, figures, None if ps.figure.required else 1))
    return keep
