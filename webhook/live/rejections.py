"""The objects the live writer left out, and the one log line each gets.

Nodes, pods and Workloads are parsed as their events arrive (`live.parsed`): their rejections
are kept here, per kind and object, until the object parses or goes. The other kinds are parsed
by each rebuild (`build_state`), whose state carries their rejections. `merged` is what a
published state carries: the rebuild's rejections and the current event-parsed ones. Every
change bumps ``version``; ``published`` is the version the last published state holds, so the
writer knows a new generation is due (`pending`) without a rebuild.

Each rejection is logged once, when it first appears in a published state: an object that stays
broken across rebuilds, resourceVersions and heartbeats is not logged again; one that is fixed
and breaks again (or breaks another way) is, as is its return to the state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from webhook.state.rejected import EVENT_PARSED_KINDS, Rejected

log = logging.getLogger("tasgate.live")


class Rejections:
    """Event-parsed rejections by watched kind and object key; what was last logged."""

    def __init__(self) -> None:
        self.by_kind: dict[str, dict[str, Rejected]] = {}
        self.version = 0  # bumped on every change
        self.published = 0  # the version the last published state holds
        self.logged: frozenset[Rejected] = frozenset()
        self._current: tuple[int, tuple[Rejected, ...]] = (0, ())
        self._last: tuple[Rejected, ...] = ()  # the tuple `logged` was made of

    def replace(self, kind: str, found: Mapping[str, Rejected]) -> None:
        """A fresh list of ``kind``: its rejections are exactly ``found``."""
        if self.by_kind.get(kind, {}) != found:
            self.by_kind[kind] = dict(found)
            self.version += 1

    def set(self, kind: str, key: str, found: Rejected | None) -> bool:
        """Object ``key`` of ``kind`` is now rejected as ``found`` (None: it is not); whether
        that changed anything."""
        kept = self.by_kind.setdefault(kind, {})
        if kept.get(key) == found:
            return False
        if found is None:
            kept.pop(key, None)
        else:
            kept[key] = found
        self.version += 1
        return True

    @property
    def pending(self) -> bool:
        """Whether the last published state lacks a change."""
        return self.version != self.published

    def current(self) -> tuple[Rejected, ...]:
        """The event-parsed rejections, sorted (kept until the next change)."""
        if self._current[0] != self.version:
            found = sorted(r for kept in self.by_kind.values() for r in kept.values())
            self._current = (self.version, tuple(found))
        return self._current[1]

    def merged(self, built: tuple[Rejected, ...]) -> tuple[Rejected, ...]:
        """``built``'s rejections of kinds a rebuild parses, with the current event-parsed ones."""
        kept = [r for r in built if r.kind not in EVENT_PARSED_KINDS]
        return tuple(sorted([*kept, *self.current()])) if kept else self.current()

    def log_new(self, published: tuple[Rejected, ...]) -> None:
        """Log each rejection of a newly published state that the last one logged did not hold."""
        if published is self._last:
            return  # the usual case: a usage-only generation shares its predecessor's tuple
        self._last, now = published, frozenset(published)
        for found in sorted(now - self.logged):
            log.error("%s left out of the cluster state: %s", found.subject, found.why)
        for back in sorted(self.logged - now):
            log.info("%s is no longer left out of the cluster state (fixed or gone)", back.subject)
        self.logged = now
