"""Which drawn domains a waiting gang lands in once capacity frees: its empty-cluster assignment
(as Kueue writes it: host names alone when hostname is the lowest level) lifted to its level."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide.fragmentation import FlavorFigures
from webhook.decide.waiting import WaitingGang, WaitingPodSet


def waiting_for(waiting: Sequence[WaitingGang], figures: FlavorFigures) -> list[WaitingGang]:
    """The gangs judged on this flavor and topology."""
    return [g for g in waiting if g.flavor == figures.flavor and g.topology == figures.topology]


def landing_domains(
    ps: WaitingPodSet, figures: FlavorFigures, drawn_levels: Sequence[str]
) -> set[tuple[str, ...]]:
    """Paths of the domains, at the PodSet's level (else the lowest drawn one), it lands in."""
    if ps.when_empty is None:
        return set()
    levels = figures.levels
    depth = levels.index(ps.level) + 1 if ps.level in levels else len(levels)
    depth = min(depth, len(drawn_levels))
    hosts = {d.path[-1]: d.path for d in figures.domains if figures.is_host_level(d.level)}
    found = set()
    for domain in ps.when_empty.domains:
        full = domain.values if len(domain.values) == len(levels) else hosts.get(domain.values[-1])
        if full is not None:
            found.add(full[:depth])
    return found
