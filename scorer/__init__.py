"""tasgate's topology scorer: Kueue's TAS placement as pure computation.

Two engines implement the same contract (`scorer.request`): the compiled `scorer._core`
and its pure-Python twin `scorer._reference`; `scorer.engines` picks one.
"""

from __future__ import annotations

from scorer.cluster import Cluster
from scorer.engines import IMPLEMENTATION, default_engine, engines
from scorer.request import Engine, EngineError
from scorer.snapshot import View

__all__ = ["IMPLEMENTATION", "Cluster", "Engine", "EngineError", "View", "default_engine", "engines"]
