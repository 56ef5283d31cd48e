"""`live.heap`: what a state build leaves for the cycle collector to walk, and the GIL hand-off."""

from __future__ import annotations

import gc
import sys
import threading
import weakref

from webhook.live import heap
from webhook.live.usage import UsageBook


class _Cell:
    """A small object that can take part in a reference cycle (and be weakly referenced)."""

    def __init__(self) -> None:
        self.other: object = None


def test_large_containers_of_a_build_leave_the_collectors_view_and_small_ones_stay() -> None:
    with heap.quiet():
        nodes = tuple(_Cell() for _ in range(heap.LARGE_CONTAINER))
        index = {f"n{i}": [i] for i in range(heap.LARGE_CONTAINER)}
        few = tuple(_Cell() for _ in range(3))
    assert not gc.is_tracked(nodes) and not gc.is_tracked(index)
    assert gc.is_tracked(few)
    index["n0"] = [0]  # a tracked value stored again: CPython tracks the dict again
    assert gc.is_tracked(index)


def test_what_an_untracked_container_holds_is_never_collected_early_and_is_freed_with_it() -> None:
    a, b = _Cell(), _Cell()
    a.other, b.other = b, a  # a cycle, held by the large tuple only
    alive = weakref.ref(a)
    with heap.quiet():
        held = (a, *range(heap.LARGE_CONTAINER))
    del a, b
    gc.collect()
    assert alive() is not None and not gc.is_tracked(held)
    del held  # reference counting frees the tuple; the cycle is then the collector's again
    gc.collect()
    assert alive() is None


def test_a_cycle_made_during_a_build_is_still_collected() -> None:
    with heap.quiet():
        a, b = _Cell(), _Cell()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
    gc.collect()
    assert alive() is None


def test_quiet_restores_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    with heap.quiet():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with heap.quiet():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_gil_is_handed_to_the_loop_within_a_millisecond() -> None:
    before = sys.getswitchinterval()
    try:
        heap.share_the_gil()
        assert sys.getswitchinterval() == heap.SWITCH_INTERVAL_S == 0.001
    finally:
        sys.setswitchinterval(before)


def test_dismantle_frees_what_only_it_holds_and_leaves_what_others_hold() -> None:
    shared, mine = _Cell(), _Cell()
    inner = _Cell()
    mine.other = [inner, {"k": (_Cell(),)}]  # a small graph nobody else holds
    big = tuple(_Cell() for _ in range(heap.PIECE + 1))  # freed whole, never taken apart
    state = _Cell()
    state.other = (mine, shared, big)
    gone = [weakref.ref(mine), weakref.ref(inner), weakref.ref(big[0]), weakref.ref(state)]
    work: list[object] = [state]
    del mine, inner, big, state  # the caller's only reference is the one it hands over
    taken = heap.dismantle(work)
    assert all(ref() is None for ref in gone)
    assert isinstance(shared, _Cell) and sys.getrefcount(shared) == 2, "only dereferenced"
    assert taken >= 6


def test_a_cycle_handed_to_dismantle_is_left_to_the_collector() -> None:
    a, b = _Cell(), _Cell()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    heap.dismantle([a])
    del a, b
    assert ref() is not None
    gc.collect()
    assert ref() is None


def test_release_frees_off_the_callers_thread() -> None:
    freed = threading.Event()
    cell = _Cell()
    finalizer = weakref.finalize(cell, freed.set)
    heap.release(cell)
    del cell
    assert freed.wait(10), "the reaper dropped the last reference"
    assert not finalizer.alive


def test_a_pod_event_leaves_the_pods_usage_out_of_the_collectors_view() -> None:
    """The collector stops tracking a dict that holds only untracked values; one tracked value
    stored in it tracks it again, in the youngest generation, which then walks all of it (at
    100,000 pods 0.5-0.7 ms a young collection, on the event loop). A pod's usage is stored
    untracked, so a pod event never brings the dict back."""
    book = UsageBook()
    book.replace({f"team/p{i}": (f"n{i % 7}", {"cpu": 1000 + i, "pods": 1}, False) for i in range(1000)})
    gc.collect()
    assert not gc.is_tracked(book.pods)
    node = "n" + str(3)  # made at run time: a constant tuple would be untracked from the start
    assert book.set("team/new", (node, {"cpu": 7, "pods": 1}, False))
    assert not gc.is_tracked(book.pods)
    assert book.pods["team/new"] == ("n3", (("cpu", 7), ("pods", 1)), False)
    fresh = dict(book.pods)
    gc.collect()
    fresh["team/other"] = (node, tuple(sorted({"cpu": 7}.items())), False)
    assert gc.is_tracked(fresh)  # what the book avoids: a plain tuple stored tracks the dict
