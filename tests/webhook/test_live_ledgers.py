"""The writer's ledgers take over copies of free capacity made off the event loop: after a
rebuild or a node edit the loop copies no snapshot's free capacity (at 50,000 nodes one copy
held the loop 1-9 ms), and each ledger's copy is private, never the array a state publishes."""

from __future__ import annotations

import threading
from array import array
from typing import Any

import pytest

from scorer.ledger import FreeLedger
from tests.webhook.test_live_nodes import node_object, start
from webhook.live import mirror as mirror_module
from webhook.live.usage import private_frees
from webhook.state.cluster import ClusterState


def recording(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[Any, array[int]]]]:
    """Patch the mirror's `private_frees` to record what it made and on which thread."""
    made: list[tuple[str, dict[Any, array[int]]]] = []

    def record(state: ClusterState) -> dict[Any, array[int]]:
        frees = private_frees(state)
        made.append((threading.current_thread().name, frees))
        return frees

    monkeypatch.setattr(mirror_module, "private_frees", record)
    return made


async def test_the_ledgers_take_over_copies_made_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    made = recording(monkeypatch)
    mirror = start()
    await mirror.publish_once()
    changed = node_object("n1", "r9", 4, 5, ready=True, cordoned=False, tainted=False)
    mirror.apply("nodes", "MODIFIED", changed)
    await mirror.publish_once()
    assert len(made) == 2, "the rebuild and the node edit"
    loop_thread = threading.current_thread().name
    state = mirror.state
    assert state is not None
    assert all(thread != loop_thread for thread, _ in made)
    ledgers = mirror.usage.ledgers
    assert ledgers and set(ledgers) == set(made[-1][1])
    for key, ledger in ledgers.items():
        assert ledger.free is made[-1][1][key], "taken over, not copied again"
        assert ledger.free is not state.snapshots()[key].now.free, "private to the writer"
        assert ledger.free == state.snapshots()[key].now.free


async def test_a_snapshot_without_a_copy_is_copied_by_its_ledger() -> None:
    mirror = start()
    await mirror.publish_once()
    state = mirror.state
    assert state is not None
    mirror.usage.begin_rebuild()
    mirror.usage.finish_rebuild(state)
    for key, ledger in mirror.usage.ledgers.items():
        published = state.snapshots()[key].now.free
        assert ledger.free == published and ledger.free is not published


async def test_a_ledger_given_a_copy_moves_it_and_not_the_published_array() -> None:
    mirror = start()
    await mirror.publish_once()
    state = mirror.state
    assert state is not None
    cluster = next(iter(state.snapshots().values()))
    before = array("q", cluster.now.free)
    ledger = FreeLedger(cluster, array("q", cluster.now.free))
    node = next(iter(cluster.now.tree.leaf_of_node))
    ledger.add(node, [("nvidia.com/gpu", 1)], 1)
    assert cluster.now.free == before and ledger.free != before
