"""Which drawn domains a waiting gang lands in once capacity frees: its empty-cluster assignment
(as Kueue writes it: host names alone when hostname is the lowest level) lifted to its level."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide.fragmentation import FlavorFigures
from webhook.decide.waiting import WaitingGang, WaitingPodSet


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


def landing_text(ps: WaitingPodSet, figures: FlavorFigures | None) -> str:
    """Where the PodSet lands once capacity frees, as domain IDs."""
    if figures is None:
        return "a domain not drawn (judged without a TAS flavor)"
    return " ".join(sorted(",".join(p) for p in landing_domains(ps, figures, figures.levels))) or "unknown"


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
