"""Keep the cycle collector and the GIL from stalling the event loop behind a state build.

A full (generation 2) collection walks every tracked object while holding the GIL: with
kubernetes-asyncio imported and a 10,000-node mirror loaded that is tens of milliseconds in
which neither the event loop nor a decision thread runs, and rebuilds allocate enough to
trigger one every few seconds. `gc.freeze` moves what is alive now to a generation the
collector never walks. Reference counting still frees frozen objects (the mirror's data is
acyclic); only a cycle that is alive at the freeze and dies later would never be reclaimed, so
freezing happens at two moments, not per rebuild: after start-up, and after the first sync.
During a rebuild the collector is paused instead (`quiet`).

Even a young (generation 0) collection is not cheap once a state is made: a collection visits
every reference each young container holds, and each node edit leaves a few containers of one
entry per node (the node tuples, the leaf index) that reference counting, not the collector,
frees. At 50,000 nodes the young generation of fifteen edits took 37 ms to walk, on whichever
thread allocated next (measured with a ``gc.callbacks`` timer). `quiet` therefore takes the
large, acyclic containers a build made out of the collector's view, as CPython itself does for
a tuple of strings.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import queue
import sys
import threading
from collections.abc import Iterator
from typing import TypeVar

# A container with this many entries or more, made by a state build, is left to reference
# counting alone: the build's tuples, lists and dicts never hold a reference back to themselves.
LARGE_CONTAINER = 4096
CONTAINERS = (tuple, list, dict)

# The longest a thread running Python keeps the GIL while another asks for it. CPython's 5 ms
# default let a node edit on the writer's thread hold the event loop 8-17 ms at a time at 50,000
# nodes (the loop waits once per wake-up); 1 ms keeps those waits under 2 ms.
SWITCH_INTERVAL_S = 0.001

_T = TypeVar("_T")

_untrack = ctypes.pythonapi.PyObject_GC_UnTrack
_untrack.argtypes = [ctypes.py_object]
_untrack.restype = None


def settle() -> None:
    """Collect what is garbage now, then freeze the rest out of every later full pass."""
    gc.collect()
    gc.freeze()


def share_the_gil() -> None:
    """Let the event loop take the GIL back from a busy thread within ``SWITCH_INTERVAL_S``."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No cycle collection while a rebuild runs: it allocates hundreds of thousands of short-lived
    containers (acyclic, freed by reference counting as it goes), and a full pass over them in
    the middle of a build would hold the GIL for tens of milliseconds. One rebuild runs at a time.
    Afterwards the large containers it made are untracked (`untrack_large`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        untrack_large()
        if enabled:
            gc.enable()


def acyclic(obj: _T) -> _T:
    """``obj``, a tuple of strings, numbers and such tuples, out of the collector's view now
    rather than at its first collection. Why now: a dict the collector found holding only such
    values it stops tracking, and storing one still-tracked value tracks the dict again, in the
    youngest generation, where the next young collections walk all of it (the pods' usage at
    100,000 pods: 0.5-0.7 ms a collection, on the event loop, after every full collection)."""
    _untrack(obj)
    return obj


def untrack_large() -> int:
    """Untrack every young plain tuple, list or dict of ``LARGE_CONTAINER`` entries or more;
    how many. Safe for any container outside a reference cycle: what it references counts as
    referenced from outside the collected set, so nothing it holds is freed early, and
    reference counting frees the container itself. A dict is tracked again by CPython as soon
    as a tracked value is stored in it."""
    count = 0
    for obj in gc.get_objects(generation=0):
        if type(obj) in CONTAINERS and len(obj) >= LARGE_CONTAINER:
            _untrack(obj)
            count += 1
    return count


# Objects the reaper takes apart before it frees them; a container with more entries than this is
# freed whole (one call: a tuple or dict of one entry per node, shared entries, about a millisecond).
PIECE = 64
_PLAIN = (tuple, list, dict, set, frozenset)


def release(obj: object) -> None:
    """Let go of ``obj`` off the caller's thread: the reaper drops the last reference to it and,
    when that frees it, frees its parts one by one (`dismantle`). The caller must hold no other
    reference it counts on having freed now."""
    _reaper().put(obj)


@functools.cache
def _reaper() -> queue.SimpleQueue[object]:
    """The reaper's queue, its thread started on first use (two racing first uses would start
    two reapers: harmless)."""
    released: queue.SimpleQueue[object] = queue.SimpleQueue()
    threading.Thread(target=_reap_forever, args=(released,), name="tasgate-reaper", daemon=True).start()
    return released


def _reap_forever(released: queue.SimpleQueue[object]) -> None:
    while True:
        dismantle([released.get()])


def dismantle(work: list[object]) -> int:
    """Drop every object in ``work`` (the caller's only reference to them), freeing what nobody
    else holds one object at a time, children after their parent, so no single deallocation
    cascades through a whole state; how many objects were taken apart. An object someone else
    holds (a tree shared with the current state, a node) is only dereferenced."""
    taken = 0
    while work:
        obj = work.pop()
        # 2: ``obj`` here and getrefcount's argument. Nobody else can reach it, so nobody can
        # take a reference meanwhile.
        if sys.getrefcount(obj) == 2 and not (type(obj) in _PLAIN and len(obj) > PIECE):  # type: ignore[arg-type]
            work.extend(child for child in gc.get_referents(obj) if not isinstance(child, type))
            taken += 1
        del obj
    return taken
