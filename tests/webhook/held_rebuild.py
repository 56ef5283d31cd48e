"""A Mirror's rebuild (or node edit) held on its worker thread until the test lets it go: what the
test applies meanwhile arrives during the rebuild, ordered by events, never by timing."""

from __future__ import annotations

import asyncio
import threading
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from webhook.live import mirror as mirror_module
from webhook.live.assemble import DefaultLevels, Inputs, NodeEdit
from webhook.live.mirror import Mirror
from webhook.live.usage import SnapshotKey
from webhook.state.cluster import ClusterState

HANG_GUARD_SECONDS = 60.0  # a test that dies mid-rebuild must not leave its thread waiting forever


class HeldRebuild:
    """Stands in for the mirror's `_made`: the next rebuild waits on its thread between `begin`
    and `finish`; any other runs straight through."""

    def __init__(self) -> None:
        self._real = mirror_module._made
        self._armed: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._go = threading.Event()
        self._fail = False
        self._task: asyncio.Task[None] | None = None

    def made(
        self, inputs: Inputs | NodeEdit, defaults: DefaultLevels
    ) -> tuple[ClusterState, dict[SnapshotKey, array[int]]]:
        armed, self._armed = self._armed, None
        if armed is not None:
            loop, started = armed
            loop.call_soon_threadsafe(started.set)
            self._go.wait(HANG_GUARD_SECONDS)
            if self._fail:
                raise RuntimeError("a rebuild that fails (aborted)")
        return self._real(inputs, defaults)

    @property
    def open(self) -> bool:
        return self._task is not None

    async def begin(self, mirror: Mirror) -> None:
        """Start a publish and return once its rebuild has taken its copy and waits."""
        started = asyncio.Event()
        self._go, self._fail = threading.Event(), False
        self._armed = (asyncio.get_running_loop(), started)
        self._task = asyncio.create_task(mirror.publish_once())
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait({self._task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        self._armed = None
        assert started.is_set(), "the publish made no rebuild to hold"

    async def finish(self, fail: bool = False) -> None:
        """Let the held rebuild end (``fail``: raise, as a failed rebuild does) and its publish land."""
        task, self._task = self._task, None
        assert task is not None, "no rebuild is held"
        self._fail = fail
        self._go.set()
        await task

    def release(self) -> None:
        self._go.set()


@contextmanager
def holding() -> Iterator[HeldRebuild]:
    """The mirror's rebuilds go through a `HeldRebuild` for the duration."""
    held = HeldRebuild()
    try:
        with mock.patch.object(mirror_module, "_made", held.made):
            yield held
    finally:
        held.release()
