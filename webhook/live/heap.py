"""Keep the cycle collector's full passes off what lives for the whole process.

A full (generation 2) collection walks every tracked object while holding the GIL: with
kubernetes-asyncio imported and a 10,000-node mirror loaded that is tens of milliseconds in
which neither the event loop nor a decision thread runs, and rebuilds allocate enough to
trigger one every few seconds. `gc.freeze` moves what is alive now to a generation the
collector never walks. Reference counting still frees frozen objects (the mirror's data is
acyclic); only a cycle that is alive at the freeze and dies later would never be reclaimed, so
freezing happens at two moments, not per rebuild: after start-up, and after the first sync.
During a rebuild the collector is paused instead (`quiet`).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def settle() -> None:
    """Collect what is garbage now, then freeze the rest out of every later full pass."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No cycle collection while a rebuild runs: it allocates hundreds of thousands of short-lived
    containers (acyclic, freed by reference counting as it goes), and a full pass over them in
    the middle of a build would hold the GIL for tens of milliseconds. One rebuild runs at a time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
