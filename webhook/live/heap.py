"""Keep the cycle collector and the GIL from stalling the event loop behind a state build.

A collection holds the GIL while it walks every container in the generations it collects and
every reference each one holds: neither the event loop nor a decision thread runs meanwhile. A
state is made of large containers (at 50,000 nodes each node edit leaves a few of one entry per
node: the node tuples, the leaf index), and a young collection that found a few edits' worth
took 30-37 ms; a full one walks every state still held. Reference counting, not the collector,
frees them: a state is acyclic.

`gc.freeze` moves every object alive now to a generation no collection walks; reference counting
still frees a frozen object when its last reference goes. So the one writer (``live.mirror``),
which knows when it builds, owns the heap: it collects just before each build (`before_build`:
cheap, everything older is frozen) and freezes right after publishing what the build made
(`after_build`). A cycle the collector has not found by then (made garbage while the build ran,
or alive at the freeze and dead later) stays frozen until the heap has grown to `RECLAIM_GROWTH`
times its size at the last reclaim; the frozen heap is then unfrozen, collected and frozen
again (one full pass, logged). In bench-live's runs the freezes kept no cycle beyond those the
start-up's own freeze keeps. No build turns the collector off, and no object is hidden from it
one by one.

A state let go of is freed by its owner off the loop (`release`: the holder drops the states it
kept), in pieces, so no single deallocation cascades through a whole state while holding the GIL.
"""

from __future__ import annotations

import functools
import gc
import logging
import math
import queue
import sys
import threading
import time
from dataclasses import dataclass

log = logging.getLogger("tasgate.live")

# The longest a thread running Python keeps the GIL while another asks for it. CPython's 5 ms
# default let a node edit on the writer's thread hold the event loop 8-17 ms at a time at 50,000
# nodes (the loop waits once per wake-up); 1 ms keeps those waits under 2 ms.
SWITCH_INTERVAL_S = 0.001

# The frozen heap is reclaimed (one full pass over it) when the heap has grown this many times
# over since the last reclaim: what cycles died frozen can pin is at most about the live heap
# again. The heap is measured in Python's allocated blocks (`sys.getallocatedblocks`: about a
# millisecond at 50,000 nodes, a walk of the allocator's pools; `gc.get_freeze_count` walks
# every frozen object, 12 ms), at most once per `RECLAIM_CHECK_S`.
RECLAIM_GROWTH = 2.0
RECLAIM_CHECK_S = 10.0


@dataclass
class _Heap:
    """The heap's size after the last settle or reclaim (what `RECLAIM_GROWTH` scales; 0: not
    measured yet), and when it was last compared."""

    baseline: int = 0
    checked_at: float = -math.inf


_HEAP = _Heap()


def settle() -> None:
    """Collect what is garbage now, then freeze the rest out of every later pass (start-up)."""
    gc.collect()
    gc.freeze()
    _HEAP.baseline = sys.getallocatedblocks()


def share_the_gil() -> None:
    """Let the event loop take the GIL back from a busy thread within ``SWITCH_INTERVAL_S``."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def before_build() -> None:
    """The writer is about to build a state: collect what is garbage now, so the freeze after the
    build cannot keep it. Cheap: only what was made since the last build is not frozen."""
    gc.collect()


def after_build(first: bool = False) -> None:
    """The writer published a state it built: freeze it (and all else alive) out of every later
    collection. The ``first`` (the first sync) sets the size the heap is measured against; after
    a later one the frozen heap is reclaimed once the heap has grown `RECLAIM_GROWTH` times over."""
    gc.freeze()
    now = time.monotonic()
    if first or _HEAP.baseline == 0:
        _HEAP.baseline, _HEAP.checked_at = sys.getallocatedblocks(), now
    elif now - _HEAP.checked_at >= RECLAIM_CHECK_S:
        _HEAP.checked_at = now
        if sys.getallocatedblocks() > RECLAIM_GROWTH * _HEAP.baseline:
            reclaim()


def reclaim() -> int:
    """Unfreeze, collect and freeze again: the cycles that died frozen are found; how many
    objects were garbage. One full pass over the heap, holding the GIL: rare by design."""
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    _HEAP.baseline = sys.getallocatedblocks()
    log.info("frozen heap reclaimed: %d objects were garbage", found)
    return found


# How `release` takes a state apart: an object is split into its referents (each dropped on its
# own) down to `DEPTH` levels, at most `SPLITS` objects per release; a container of more than
# `PIECE` entries is dropped whole (one call: a tuple or dict of one entry per node, its entries
# mostly shared, about a millisecond). At 50,000 nodes a state dropped whole held the GIL up to
# 3.7-7.3 ms; split to depth 4 (some 60 objects a state), its longest single drop was 2.7 ms.
PIECE = 64
DEPTH = 4
SPLITS = 4096
_PLAIN = (tuple, list, dict, set, frozenset)


def release(obj: object) -> None:
    """Let go of ``obj`` off the caller's thread: the reaper drops the caller's reference to it
    in pieces (`dismantle`). The caller hands its reference over; what anyone else still holds
    stays as it is."""
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
    """Drop every object in ``work`` (the caller's references to them), children after their
    parent: each object down to `DEPTH` levels (`SPLITS` at most) is split into what it
    references before its own reference is dropped, so freeing a state runs as many short
    deallocations, with the GIL handed over between them, never one long cascade. How many
    objects were split.

    Only references are dropped, never an object changed: what someone else holds (a tree
    shared with the current state, a reader's state) loses the reaper's reference and nothing
    else. A cycle among the parts is left to the collector, as it would be anyway."""
    split = 0
    pending = [(obj, 0) for obj in work]
    work.clear()
    while pending:
        obj, depth = pending.pop()
        small = not (type(obj) in _PLAIN and len(obj) > PIECE)  # type: ignore[arg-type]
        if small and depth < DEPTH and split < SPLITS:
            pending.extend((part, depth + 1) for part in gc.get_referents(obj) if not isinstance(part, type))
            split += 1
        del obj
    return split
