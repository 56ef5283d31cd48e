"""tasgate's topology scorer: Kueue's TAS placement as pure computation.

Two engines implement the same contract (`scorer.request`): the compiled `scorer._core`
and its pure-Python twin `scorer._reference`. `IMPLEMENTATION` names the one in use; the
webhook refuses to report ready on the twin unless told to, so a missing build is never silent.
"""

from __future__ import annotations

import importlib
from typing import cast

from scorer import _reference
from scorer.cluster import Cluster
from scorer.request import Engine
from scorer.snapshot import View


def _load_compiled() -> Engine | None:
    try:
        return cast(Engine, importlib.import_module("scorer._core"))
    except ImportError:  # the extension was not built: the twin still gives the same answers
        return None


_compiled = _load_compiled()

IMPLEMENTATION = "compiled" if _compiled is not None else "reference"


def engines() -> dict[str, Engine]:
    """Every engine available here, by name."""
    found: dict[str, Engine] = {"reference": _reference}
    if _compiled is not None:
        found["compiled"] = _compiled
    return found


def default_engine() -> Engine:
    return engines()[IMPLEMENTATION]


__all__ = ["IMPLEMENTATION", "Cluster", "Engine", "View", "default_engine", "engines"]
