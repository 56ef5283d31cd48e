"""The live mirror: the one writer that turns watch events into published cluster states.

Ages and freshness are read on a stopped clock (``stop_the_clock``: the monotonic clock the
freshness, holder and publisher modules read, moved only by the test), so they are exact figures
rather than wall-clock measurements a loaded machine stretches; what the tests wait for (a
publish, a rebuild entered, the publisher re-armed) they wait for as events, with a bound."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from webhook.live import freshness, publisher
from webhook.live import holder as holder_module
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.state.cluster import ClusterState

NAMES = [k.name for k in kinds()]


class Clock:
    """A monotonic clock that moves only when told (``now``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


def stop_the_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The clock ``live.freshness``, ``live.holder`` and ``live.publisher`` read, stopped (each
    module's own ``time``: asyncio and everything else keep the real one)."""
    stopped = Clock()
    for module in (freshness, holder_module, publisher):
        monkeypatch.setattr(module, "time", stopped)
    return stopped


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return stop_the_clock(monkeypatch)


async def until(check: Any, timeout: float = 10.0) -> None:
    """Poll ``check`` until it holds (the sleep only paces the poll; a generous bound)."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


def node(name: str, gpus: int = 8, version: str = "1", ready: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": version,
            "labels": {"rack": "r1", "kubernetes.io/hostname": name},
        },
        "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def pod(name: str, node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": phase},
    }


def topology() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }


def synced_mirror() -> Mirror:
    mirror = Mirror(StateHolder(), NAMES)
    for kind in mirror.watched:
        mirror.replace(kind, [])
    return mirror


def test_not_ready_until_every_kind_listed_or_known_absent() -> None:
    mirror = Mirror(StateHolder(), NAMES)
    mirror.replace("nodes", [node("a")])
    mirror.replace("pods", [])
    mirror.replace("namespaces", [])
    assert not mirror.ready and mirror.freshness() is None
    for kind in (
        "topologies",
        "resourceflavors",
        "clusterqueues",
        "cohorts",
        "admissionchecks",
        "provisioningrequestconfigs",
        "multikueueconfigs",
        "workloads",
        "workloadpriorityclasses",
        "trainingruntimes",
        "clustertrainingruntimes",
        "podgroups",
        "volcanopodgroups",
    ):
        mirror.mark_absent(kind)
    mirror.replace("limitranges", [])
    mirror.replace("runtimeclasses", [])
    mirror.replace("priorityclasses", [])
    mirror.replace("deployments", [])  # Kueue's controller, by label: the release judged for
    mirror.replace("configmaps", [])  # its Configuration (feature gates)
    assert not mirror.ready
    mirror.replace("localqueues", [])
    assert mirror.ready and mirror.freshness() is not None


def test_usage_follows_pod_events() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a"), node("b")])
    mirror.replace("pods", [pod("p1", "a", 4)])
    assert gpus_used(mirror.build()) == {"a": 4, "b": 0}
    mirror.apply("pods", "ADDED", pod("p2", "b", 8))
    mirror.apply("pods", "MODIFIED", pod("p1", "a", 4, phase="Succeeded"))
    assert gpus_used(mirror.build()) == {"a": 0, "b": 8}
    mirror.apply("pods", "DELETED", pod("p2", "b", 8))
    state = mirror.build()
    assert state.usage == {} and all(not n.usage for n in state.nodes)


def gpus_used(state: ClusterState) -> dict[str, int]:
    assert state.usage is not None, "live states keep usage apart from nodes"
    return {n.name: state.usage.get(n.name, {}).get("nvidia.com/gpu", 0) for n in state.nodes}


def test_relist_synthesises_deletions_and_generations_grow() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a"), node("b")])
    first = mirror.build()
    mirror.replace("nodes", [node("b", version="2", gpus=4)])  # "a" vanished while the watch was gone
    second = mirror.build()
    assert [n.name for n in second.nodes] == ["b"]
    assert second.nodes[0].allocatable["nvidia.com/gpu"] == 4
    assert second.generation == first.generation + 1


def test_node_parse_is_cached_by_resource_version() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a", version="7")])
    parsed = mirror.nodes["a"][1]
    mirror.apply("nodes", "MODIFIED", node("a", version="7"))
    assert mirror.nodes["a"][1] is parsed
    mirror.apply("nodes", "MODIFIED", node("a", version="8", ready="False"))
    assert mirror.nodes["a"][1].ready is False


def test_broken_objects_are_skipped_not_fatal() -> None:
    mirror = synced_mirror()
    bad = node("bad")
    bad["status"]["allocatable"]["cpu"] = "lots"
    mirror.replace("nodes", [node("a"), bad])
    assert [n.name for n in mirror.build().nodes] == ["a"]


def test_kueue_objects_reach_the_state() -> None:
    mirror = synced_mirror()
    mirror.replace("topologies", [topology()])
    assert mirror.build().topologies["default"].levels == ("rack", "kubernetes.io/hostname")
    mirror.mark_absent("topologies")
    assert not mirror.build().topologies


async def test_publisher_swaps_the_state_and_keeps_it_fresh() -> None:
    holder = StateHolder()
    mirror = Mirror(holder, NAMES, debounce=0.01)
    task = asyncio.create_task(mirror.publish_forever())
    try:
        for kind in mirror.watched:
            mirror.replace(kind, [node("a")] if kind == "nodes" else [])
        await until(lambda: holder.current is not None)
        assert holder.current is not None and [n.name for n in holder.current.nodes] == ["a"]
        before = holder.current
        mirror.apply("nodes", "ADDED", node("b"))
        await until(lambda: holder.current is not before)
        assert holder.current is not before and len(holder.current.nodes) == 2
        assert before is not None and len(before.nodes) == 1, "a published state is never mutated"
    finally:
        task.cancel()


# --- freshness: the watches are connected and current -------------------------------------------


class FakeStream:
    """A watch response: the given lines, then silence for ``hold`` seconds (or until ``ended``
    is set), then the end."""

    def __init__(self, lines: list[bytes], hold: float, ended: asyncio.Event | None = None) -> None:
        self.lines, self.hold, self.ended = list(lines), hold, ended

    async def readline(self) -> bytes:
        if self.lines:
            return self.lines.pop(0)
        if self.ended is not None:
            await self.ended.wait()
        await asyncio.sleep(self.hold)
        self.hold = 0
        return b""


class FakeResponse:
    def __init__(self, lines: list[bytes], hold: float = 0.0, ended: asyncio.Event | None = None) -> None:
        self.status = 200
        self.content = FakeStream(lines, hold, ended)

    async def __aenter__(self) -> FakeResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def release(self) -> None:
        return None


def event(kind: str, obj: dict[str, Any]) -> bytes:
    import orjson  # noqa: PLC0415

    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def aged_mirror(seconds: float) -> Mirror:
    """Every kind synced ``seconds`` ago: what a quiet cluster looks like long after the lists."""
    mirror = synced_mirror()
    for kind in mirror.synced:
        mirror.synced[kind] -= seconds
    return mirror


async def test_an_open_silent_watch_keeps_its_kind_fresh(clock: Clock) -> None:
    """A quiet, healthy cluster never goes stale: a connected watch is current however silent.
    The watch stays open until the test ends it (``ended``), and the silence is clock time."""
    from webhook.live.watch import Cursor, WatchSettings, _watch  # noqa: PLC0415

    (nodes,) = [k for k in kinds() if k.name == "nodes"]
    mirror = aged_mirror(1000.0)
    for kind in mirror.watched:
        mirror.connected(kind)
    mirror.disconnected("nodes")
    mirror.synced["nodes"] -= 1000.0
    ended = asyncio.Event()

    async def lister(**kw: Any) -> FakeResponse:
        assert kw["allow_watch_bookmarks"] is True
        return FakeResponse([], ended=ended)

    cursor = Cursor("10")
    watching = asyncio.create_task(_watch(lister, nodes, mirror, WatchSettings(), cursor))
    await until(lambda: "nodes" in mirror.open)  # the watch is open and has said nothing
    clock.now += 300.0  # nor does it for 300 s
    assert mirror.freshness() == clock.now, "a connected, silent watch is fresh"
    ended.set()  # the API server ends the watch
    assert await watching and cursor.version == "10"
    ended_at = clock.now
    clock.now += 30.0
    assert mirror.freshness() == ended_at, "the kind now ages from the moment its watch ended"


async def test_bookmarks_refresh_and_are_never_applied() -> None:
    from webhook.live.watch import Cursor, WatchSettings, _watch  # noqa: PLC0415

    (nodes,) = [k for k in kinds() if k.name == "nodes"]
    mirror = aged_mirror(1000.0)
    bookmark = {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "42"}}

    async def lister(**kw: Any) -> FakeResponse:
        return FakeResponse([event("BOOKMARK", bookmark), event("ADDED", node("a", version="43"))])

    before = time.monotonic()
    cursor = Cursor("10")
    assert await _watch(lister, nodes, mirror, WatchSettings(), cursor) and cursor.version == "43"
    assert list(mirror.nodes) == ["a"], "the bookmark is not an object"
    assert mirror.synced["nodes"] >= before

    async def only_bookmark(**kw: Any) -> FakeResponse:
        return FakeResponse([event("BOOKMARK", bookmark)])

    mirror.synced["nodes"] -= 1000.0
    before = time.monotonic()
    assert await _watch(only_bookmark, nodes, mirror, WatchSettings(), cursor) and cursor.version == "42"
    assert mirror.synced["nodes"] >= before and list(mirror.nodes) == ["a"]


def test_only_a_disconnected_kind_ages(clock: Clock) -> None:
    mirror = aged_mirror(500.0)
    for kind in mirror.watched:
        mirror.connected(kind)
    assert mirror.freshness() == clock.now
    mirror.disconnected("pods")
    clock.now += 300.0  # the pods watch has been down for 300 s
    assert mirror.freshness() == clock.now - 300.0


async def test_publisher_keeps_a_quiet_connected_cluster_fresh(clock: Clock) -> None:
    """The holder's age (what /readyz and reviews read) stays small on a quiet, connected cluster
    listed long ago: as old as the last change it lacks (here the setup's, 1.25 s of clock time
    ago), never as old as the lists (1000 s)."""
    holder = StateHolder()
    mirror = Mirror(holder, NAMES, debounce=0.01)
    for kind in mirror.watched:
        mirror.replace(kind, [])
        mirror.connected(kind)
        mirror.synced[kind] -= 1000.0  # listed long ago, nothing happened since
    mirror.dirty.clear()
    task = asyncio.create_task(mirror.publish_forever())
    try:
        clock.now += 1.25
        assert holder.age() == 1.25
    finally:
        task.cancel()


def test_updates_that_change_nothing_placement_reads_cost_no_rebuild() -> None:
    mirror = synced_mirror()
    mirror.replace("nodes", [node("a")])
    mirror.replace("pods", [pod("p1", "a", 4)])
    mirror.dirty.clear()
    heartbeat = node("a", version="2")
    heartbeat["metadata"]["annotations"] = {"node.alpha.kubernetes.io/ttl": "0"}
    heartbeat["status"]["images"] = [{"names": ["x"], "sizeBytes": 1}]
    mirror.apply("nodes", "MODIFIED", heartbeat)
    running = pod("p1", "a", 4)
    running["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    mirror.apply("pods", "MODIFIED", running)
    assert not mirror.dirty.is_set(), "a heartbeat and a status update changed nothing placement reads"
    mirror.apply("nodes", "MODIFIED", node("a", gpus=4, version="3"))
    assert mirror.dirty.is_set()
    mirror.dirty.clear()
    mirror.apply("pods", "MODIFIED", pod("p1", "a", 4, phase="Succeeded"))
    assert mirror.dirty.is_set()


async def test_published_states_carry_their_snapshots_built_off_the_loop() -> None:
    holder = StateHolder()
    mirror = Mirror(holder, NAMES, debounce=0.01)
    for kind in mirror.watched:
        mirror.replace(kind, [])
    mirror.replace("nodes", [node("a"), node("b")])
    mirror.replace("topologies", [topology()])
    mirror.replace(
        "resourceflavors",
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "f"},
                "spec": {"topologyName": "default"},
            }
        ],
    )
    task = asyncio.create_task(mirror.publish_forever())
    try:
        await until(lambda: holder.current is not None)
        state = holder.current
        assert state is not None
        assert state._snapshots, "every TAS flavor's snapshot is built before the state is published"
    finally:
        task.cancel()


async def test_freshness_is_read_when_asked_not_kept_by_a_loop(clock: Clock) -> None:
    """No publisher loop runs here: a connected, published, quiet cluster reads fresh however long
    ago anything happened; a change the publisher has not yet published holds it back."""
    holder = StateHolder()
    mirror = Mirror(holder, NAMES, debounce=0.0)
    for kind in mirror.watched:
        mirror.replace(kind, [])
        mirror.connected(kind)
    clock.now += 1000.0
    await mirror.publish_once()
    assert holder.age() == 0.0
    mirror.apply("nodes", "ADDED", node("late"))
    clock.now += 30.0  # the publisher has fallen behind for 30 s
    assert holder.age() == 30.0, "a state behind the watches is as old as its first lack"
    await mirror.publish_once()
    assert holder.age() == 0.0 and mirror.state is not None and len(mirror.state.nodes) == 1


def _connected(holder: StateHolder) -> Mirror:
    mirror = Mirror(holder, NAMES, debounce=0.0)
    for kind in mirror.watched:
        mirror.replace(kind, [node("a")] if kind == "nodes" else [])
        mirror.connected(kind)
    return mirror


async def test_a_state_is_behind_while_its_rebuild_is_in_flight(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    """The rebuild is held (``gate``) once it has started (``entered``); the clock moves 0.5 s
    meanwhile."""
    from webhook.live import mirror as mirror_module  # noqa: PLC0415

    holder = StateHolder()
    mirror = _connected(holder)
    await mirror.publish_once()
    entered, gate, real = threading.Event(), threading.Event(), mirror_module._assemble

    def slow(*args: Any) -> Any:
        entered.set()
        gate.wait(30)
        return real(*args)

    monkeypatch.setattr(mirror_module, "_assemble", slow)
    mirror.apply("nodes", "ADDED", node("b", version="2"))
    publishing = asyncio.create_task(mirror.publish_once())
    try:
        await until(entered.is_set)
        clock.now += 0.5
        assert holder.age() == 0.5, "the published state lacks a 0.5 s old change"
    finally:
        gate.set()
        await publishing
    assert holder.age() == 0.0 and mirror.state is not None and len(mirror.state.nodes) == 2


async def test_a_failed_rebuild_stays_pending_and_is_retried(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    from webhook.live import mirror as mirror_module  # noqa: PLC0415

    holder = StateHolder()
    mirror = _connected(holder)
    await mirror.publish_once()
    real, calls = mirror_module._assemble, [0]

    def once(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("transient")
        return real(*args)

    monkeypatch.setattr(mirror_module, "_assemble", once)
    monkeypatch.setattr(mirror_module, "REBUILD_RETRY_SECONDS", 0.05)
    mirror.apply("nodes", "ADDED", node("b", version="2"))
    mirror.dirty.clear()
    await mirror.publish_once()  # the rebuild fails; the old state stays
    await until(mirror.dirty.is_set)  # the failed rebuild re-armed the publisher
    clock.now += 0.25
    assert holder.age() == 0.25, "node b is not published: the state is behind, and says so"
    mirror.apply("pods", "ADDED", pod("p", "a", 1))  # a later usage-only change: the rebuild is retried
    await mirror.publish_once()
    assert mirror.state is not None and {n.name for n in mirror.state.nodes} == {"a", "b"}
    assert holder.age() == 0.0
