"""An engine that times each placement it makes, for the scorer histogram (the engines
themselves are pure computation and never read a clock)."""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable

from scorer.request import Engine, GroupRequest, RawResult
from scorer.tree import Tree


class TimedEngine:
    """An engine that tells ``note`` how long each placement took (the server's scorer
    histogram; a decision process's list sent back with its answer). A pair made in one call
    (`place_group_both`) is timed as one and noted as two halves."""

    def __init__(self, engine: Engine, note: Callable[[float], object]) -> None:
        self.NAME = engine.NAME
        self._engine = engine
        self._note = note

    def place_group(self, tree: Tree, free: array[int], request: GroupRequest) -> RawResult:
        started = time.perf_counter()
        try:
            return self._engine.place_group(tree, free, request)
        finally:
            self._note(time.perf_counter() - started)

    def place_group_both(
        self, tree: Tree, free: array[int], other: array[int], request: GroupRequest
    ) -> tuple[RawResult, RawResult]:
        started = time.perf_counter()
        try:
            return self._engine.place_group_both(tree, free, other, request)
        finally:
            half = (time.perf_counter() - started) / 2
            self._note(half)
            self._note(half)
