"""The must-wait figure of one PodSet: the one number `check`, `map`, `/topology` and the tracker say.

A PodSet that fits the empty cluster but not the free capacity now is told how much room there
is, counted by the rule Kueue uses for its mode: a required level counts its best single domain,
preferred, unconstrained and implied may spread, so they count the whole topology; slices count
slices. That count is the placement's own ``fit_count`` of ``total_count``; the warning text
(``messages.waits``), the picture's "closest now" and the tracker's "what frees it" are all
built here from the same placement, so they cannot disagree.

Where the gang goes once capacity frees is not known now (it depends on what frees first): the
empty-cluster placement is only Kueue's tie-break among the domains that would hold it, and is
kept as such (``tie_break``, with how many domains are candidates), never as a landing place.
"""

from __future__ import annotations

from dataclasses import dataclass

from scorer.model import Assignment, Mode
from webhook.decide import messages
from webhook.decide.verdicts import PodSetVerdict


@dataclass(frozen=True, slots=True)
class MustWait:
    """``held`` of ``needed`` ``unit`` fit now, in the best ``level`` domain (``required``) or the
    whole topology; ``closest`` is that best domain now (None when the count spans the topology);
    ``candidates`` of ``domains`` domains of the level hold the gang on an empty cluster, where
    Kueue's order breaks the tie as ``tie_break``."""

    pod_set: str
    level: str
    required: bool
    held: int
    needed: int
    unit: str
    closest: tuple[str, ...] | None
    candidates: int
    domains: int
    tie_break: Assignment | None
    message: str

    @property
    def short(self) -> int:
        return max(self.needed - self.held, 0)

    @property
    def where(self) -> str:
        return f"the best {messages.short_level(self.level)}" if self.required else "the topology"

    @property
    def phrase(self) -> str:
        """The figure as the warning words it: "the best block has room for 10 of 15 pods now (5 short)"."""
        return messages.room(self.where, self.held, self.needed, self.unit == "pods")


def must_wait(v: PodSetVerdict, level: str) -> MustWait | None:
    """The figure of a PodSet that does not fit now; None when it does, or was not placed.

    ``level`` is the level it is judged at: the one it asks for, else the topology's lowest.
    """
    now, never = v.now, v.never
    if now is None or never is None or now.fits:
        return None
    required = v.request.mode is Mode.REQUIRED
    row_now, row_empty = now.level_row(level), never.level_row(level)
    return MustWait(
        pod_set=v.name,
        level=level,
        required=required,
        held=now.fit_count,
        needed=now.total_count,
        unit="pods" if now.unit == "pod" else "slices",
        closest=row_now.best_domain if required and row_now is not None else None,
        candidates=row_empty.fitting_domains if row_empty is not None else 0,
        domains=row_empty.domains if row_empty is not None else 0,
        tie_break=never.assignment,
        message=messages.waits(v.name, level, now, required),
    )
