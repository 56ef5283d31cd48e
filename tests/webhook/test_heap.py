"""`live.heap`: what a state build leaves for the cycle collector to walk, states let go of off the
loop without freeing what is still held, and the GIL hand-off."""

from __future__ import annotations

import copy
import dataclasses
import gc
import queue
import sys
import threading
import weakref
from collections.abc import Iterator

import pytest

from webhook.live import heap


class _Cell:
    """A small object that can take part in a reference cycle (and be weakly referenced)."""

    def __init__(self, other: object = None) -> None:
        self.other = other


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The test's freezes undone after it (the test process's heap is not a server's)."""
    measured = dataclasses.replace(heap._HEAP)
    try:
        yield
    finally:
        gc.unfreeze()
        heap._HEAP = measured


def _walked(obj: object) -> bool:
    """Whether some collection would walk ``obj``: tracked, in a generation the collector visits."""
    return any(found is obj for generation in range(3) for found in gc.get_objects(generation))


def test_a_published_build_leaves_every_collections_walk(frozen_heap: None) -> None:
    heap.before_build()
    nodes = tuple(_Cell() for _ in range(5000))  # what a build makes: a container of one entry per node
    index = {f"n{i}": [i] for i in range(5000)}
    assert _walked(nodes) and _walked(index)
    heap.after_build(first=True)
    assert gc.is_tracked(nodes) and not _walked(nodes) and not _walked(index)  # frozen, not hidden
    made_later = [_Cell()]
    assert _walked(made_later), "only what was alive at the freeze"


def test_what_was_garbage_before_a_build_is_collected_not_frozen(frozen_heap: None) -> None:
    a = _Cell()
    a.other = _Cell(a)  # a cycle nobody holds: only the collector can free it
    gone = weakref.ref(a)
    del a
    heap.before_build()
    assert gone() is None
    heap.after_build(first=True)


def test_a_frozen_state_is_still_freed_when_its_last_reference_goes(frozen_heap: None) -> None:
    heap.before_build()
    state = _Cell((tuple(_Cell() for _ in range(100)), {"k": [1, 2]}))
    alive = weakref.ref(state)
    heap.after_build(first=True)
    del state  # acyclic: reference counting frees it, frozen or not
    assert alive() is None


def test_a_cycle_that_dies_frozen_is_reclaimed_once_the_heap_has_grown(
    frozen_heap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    heap.before_build()
    a = _Cell()
    a.other = _Cell(a)
    gone = weakref.ref(a)
    heap.after_build(first=True)
    del a  # alive at the freeze, garbage after it: no collection sees it
    gc.collect()
    assert gone() is not None
    monkeypatch.setattr(heap, "RECLAIM_GROWTH", 0.5)  # as if the heap had doubled
    heap.after_build()
    assert gone() is not None, "measured at most every RECLAIM_CHECK_S, not per build"
    monkeypatch.setattr(heap, "RECLAIM_CHECK_S", 0.0)
    monkeypatch.setattr(heap, "RECLAIM_GROWTH", 2.0)
    heap.after_build()
    assert gone() is not None, "the heap has not grown: nothing reclaimed"
    monkeypatch.setattr(heap, "RECLAIM_GROWTH", 0.5)
    heap.after_build()
    assert gone() is None


def test_the_gil_is_handed_to_the_loop_within_a_millisecond() -> None:
    before = sys.getswitchinterval()
    try:
        heap.share_the_gil()
        assert sys.getswitchinterval() == heap.SWITCH_INTERVAL_S == 0.001
    finally:
        sys.setswitchinterval(before)


def _state() -> _Cell:
    """A state-like graph: small containers, a large one, cells several levels down."""
    leaf = _Cell("leaf")
    big = tuple(_Cell(i) for i in range(heap.PIECE + 1))  # dropped whole, never split
    return _Cell({"snapshots": {"k": (leaf, [leaf, {"deep": _Cell([1, 2, 3])}])}, "nodes": big})


def test_dismantle_frees_what_only_it_holds() -> None:
    state = _state()
    parts = state.other
    assert isinstance(parts, dict)
    gone = [weakref.ref(state), weakref.ref(parts["nodes"][0]), weakref.ref(parts["snapshots"]["k"][0])]
    del parts
    work: list[object] = [state]
    del state  # the caller's only reference is the one it hands over
    assert heap.dismantle(work) >= 4  # the state, its attributes, their dicts
    assert work == [] and all(ref() is None for ref in gone)


def test_dismantle_never_frees_a_state_still_referenced() -> None:
    """A reader still deciding on a state the holder let go of keeps all of it, at every depth:
    taking a state apart only drops the reaper's references, whoever else holds some."""
    state = _state()
    reader = state  # a decision thread's own reference
    shared_leaf = state.other["snapshots"]["k"][0]  # type: ignore[index]
    before = copy.deepcopy(state)
    refs = [weakref.ref(state), weakref.ref(shared_leaf), weakref.ref(state.other["nodes"][-1])]  # type: ignore[index]
    work: list[object] = [state]
    del state
    heap.dismantle(work)
    assert all(ref() is not None for ref in refs)
    assert _shape(reader) == _shape(before)
    del reader
    gc.collect()
    assert refs[0]() is None


def _shape(obj: object) -> object:
    """What a graph of cells and containers holds, compared by value."""
    if isinstance(obj, _Cell):
        return ("cell", _shape(obj.other))
    if isinstance(obj, dict):
        return {k: _shape(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [type(obj).__name__, *(_shape(v) for v in obj)]
    return obj


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


class _Reaper:
    """`release` into a queue of the test's; `run` takes apart what is in it on a thread named
    "reaper"; ``ran_on``: the threads the finalizers of `watch`ed objects ran on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.released: queue.SimpleQueue[object] = queue.SimpleQueue()
        monkeypatch.setattr(heap, "_reaper", lambda: self.released)
        self.ran_on: list[str] = []

    def watch(self, obj: object) -> None:
        weakref.finalize(obj, lambda: self.ran_on.append(threading.current_thread().name))

    def run(self) -> list[str]:
        def drain() -> None:
            while not self.released.empty():
                heap.dismantle([self.released.get()])

        thread = threading.Thread(target=drain, name="reaper")
        thread.start()
        thread.join(10)
        return self.ran_on


@pytest.fixture
def reaper(monkeypatch: pytest.MonkeyPatch) -> _Reaper:
    return _Reaper(monkeypatch)


def test_the_holder_hands_its_last_reference_over_and_the_reaper_frees_it(reaper: _Reaper) -> None:
    state = _state()
    reaper.watch(state)
    heap.release(state)
    del state
    assert reaper.ran_on == [], "kept for the reaper, not freed by the caller"
    assert reaper.run() == ["reaper"]


def test_release_of_a_state_a_reader_holds_leaves_it_whole(reaper: _Reaper) -> None:
    state = _state()
    before = _shape(state)
    reaper.watch(state)
    heap.release(state)  # the holder hands its reference over; this reader keeps its own
    assert reaper.run() == []
    assert _shape(state) == before
