"""The gangs recently told to wait, for the topology picture: bounded, newest kept.

Fed by the decision path (one note per mutating review that was not a dry run); a gang judged
again replaces its older entry, a gang the lifecycle tracker sees admitted is dropped
(`drop_started`: Kueue's start writes no longer reach tasgate), and entries older than
``max_age`` seconds are dropped, so the list never holds more than ``limit`` gangs whatever the
request rate.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection

from webhook.figures.waiting import WaitingGang
from webhook.serve.brief import Brief

LIMIT = 50
MAX_AGE = 3600.0


class RecentWaiting:
    def __init__(self, limit: int = LIMIT, max_age: float = MAX_AGE) -> None:
        self.limit, self.max_age = limit, max_age
        self.version = 0  # bumped on every change, so a rendered picture knows when it is stale
        self._gangs: OrderedDict[tuple[str, str, str], tuple[float, WaitingGang]] = OrderedDict()
        self._lock = threading.Lock()

    def note(self, brief: Brief | None) -> None:
        """Keep a must-wait verdict's gang; any other verdict of the same workload drops it."""
        if brief is None:
            return
        gang = brief.waiting
        key = (brief.kind, brief.namespace, brief.name)
        with self._lock:
            if gang is None:
                if self._gangs.pop(key, None) is not None:
                    self.version += 1
                return
            self._gangs.pop(key, None)
            self._gangs[key] = (time.monotonic(), gang)
            while len(self._gangs) > self.limit:
                self._gangs.popitem(last=False)
            self.version += 1

    def drop_started(self, started: Collection[tuple[str, str]]) -> None:
        """Forget the gangs whose workload (namespace, name) is admitted or further along."""
        with self._lock:
            gone = [key for key in self._gangs if (key[1], key[2]) in started]
            for key in gone:
                del self._gangs[key]
            self.version += 1 if gone else 0

    def current(self) -> tuple[WaitingGang, ...]:
        """The gangs still young enough, oldest first."""
        cutoff = time.monotonic() - self.max_age
        with self._lock:
            while self._gangs and next(iter(self._gangs.values()))[0] < cutoff:
                self._gangs.popitem(last=False)
                self.version += 1
            return tuple(gang for _, gang in self._gangs.values())
