"""Fragmentation figures: free accelerators per domain and gang-shape fits, counted as Kueue counts pods.

On the embedded sample cluster (its layout is stated in ``webhook/files/sample.py``: 2 blocks x 4
racks x 4 hosts of 8 GPUs, busy GPUs per host in ``BUSY``, one cordoned and one NotReady host)
and on the e2e capture's world (``e2e.kueue_scenario``: nodes as the harness leaves them, Kueue's
queue objects) with the pods of the Job Kueue admitted there, bound where its Workload put them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e.kueue_scenario import FLAVOR, LEVELS, NODE_POOL, TOPOLOGY, queue_objects
from e2e.nodes import node_manifest, ready_status
from tests.webhook.conftest import MANIFESTS, kueue_objects, node, running_pod
from webhook.decide.policy import GangShape, Policy
from webhook.figures import fragmentation
from webhook.figures.fragmentation import (
    MAX_DOMAIN_RUNS,
    FlavorFigures,
    ShapeFigure,
    cluster_figures,
    flavor_figures,
)
from webhook.files import sample
from webhook.files.loader import load
from webhook.files.policy import load_policy
from webhook.state.cluster import ClusterState, build_state

BLOCK, RACK, HOST = sample.BLOCK, sample.RACK, sample.HOST
POOL_R1 = {"pool": "gpu", "block": "b1", "rack": "r1"}  # kueue_objects' flavor "gpu"
SHAPES = (GangShape(8, 8), GangShape(32, 8), GangShape(4, 8), GangShape(2, 4))


def figures_of(state: ClusterState, shapes: tuple[GangShape, ...] = SHAPES) -> FlavorFigures:
    policy = Policy(name="t", gang_shapes=shapes)
    (only,) = cluster_figures(state, policy, per_domain=True)
    return only


def shape_at(f: FlavorFigures, level: str, shape: GangShape) -> ShapeFigure:
    return next(s for s in f.shapes if s.level == level and s.shape == shape)


def sample_expectations() -> dict[tuple[str, ...], tuple[int, int, int, int]]:
    """(total, free, used, unavailable) GPUs and 8-GPU pods per rack, from the sample's own constants."""
    out = {}
    away = {sample.CORDONED, sample.NOT_READY}
    for b in range(1, sample.BLOCKS + 1):
        for r in range(1, sample.RACKS + 1):
            busy = sample.BUSY.get((b, r), 0)
            hosts = [f"b{b}-r{r}-h{h}" for h in range(1, sample.HOSTS + 1)]
            ready = [h for h in hosts if h not in away]
            free = (sample.GPUS - busy) * len(ready)
            pods = len(ready) if busy == 0 else 0
            out[(f"b{b}", f"b{b}-r{r}")] = (sample.GPUS * len(hosts), free, busy * len(ready), pods)
    return out


def test_sample_free_accelerators_and_whole_pods_per_rack(sample_state: ClusterState) -> None:
    f = figures_of(sample_state)
    expected = sample_expectations()
    racks = {d.path: d for d in f.at_level(RACK)}
    assert set(racks) == set(expected)
    for path, (total, free, used, pods) in expected.items():
        d = racks[path]
        assert (d.total, d.free, d.used) == (total, free, used), path
        assert d.total == d.free + d.used + d.unavailable
        by_shape = {s.shape: s for s in d.shapes}
        assert by_shape[GangShape(8, 8)].pods == pods, path
        assert by_shape[GangShape(4, 8)].gangs == pods // 4, path


def test_sample_best_block_has_104_free_gpus_but_room_for_10_eight_gpu_pods(
    sample_state: ClusterState,
) -> None:
    """The issue's example: a GPU sum says 104, whole pods per node say 10 (b2-r1's hosts have 6 free)."""
    f = figures_of(sample_state)
    b2 = next(d for d in f.at_level(BLOCK) if d.path == ("b2",))
    assert (b2.free, b2.unavailable) == (104, 16)
    assert {s.shape: s.pods for s in b2.shapes}[GangShape(8, 8)] == 10
    eight = shape_at(f, BLOCK, GangShape(8, 8))
    assert (eight.best_pods, eight.best_gangs, eight.domains, eight.best_domain) == (10, 1, 2, ("b2",))
    big = shape_at(f, BLOCK, GangShape(32, 8))
    assert (big.best_gangs, big.domains) == (0, 0)
    rack = shape_at(f, RACK, GangShape(4, 8))
    assert (rack.best_gangs, rack.domains) == (1, 4)  # b1-r3, b1-r4, b2-r2, b2-r3 hold 4; b2-r4 only 2
    assert rack.domains == sum(1 for p in sample_expectations().values() if p[3] >= 4)


def test_small_pods_fill_what_big_ones_cannot(sample_state: ClusterState) -> None:
    """4-GPU pods fit the half-used hosts of b1-r2 that hold no 8-GPU pod; 6-free hosts hold one each."""
    f = figures_of(sample_state)
    racks = {d.path: {s.shape: s for s in d.shapes} for d in f.at_level(RACK)}
    assert racks[("b1", "b1-r2")][GangShape(2, 4)].pods == 4
    assert racks[("b2", "b2-r1")][GangShape(2, 4)].pods == 4
    assert racks[("b1", "b1-r3")][GangShape(2, 4)].pods == 8


def test_per_domain_fits_equal_the_engine_on_that_domain_alone(sample_state: ClusterState) -> None:
    """Masking the rest of the tree is the same as a cluster of only that domain's nodes."""
    f = figures_of(sample_state)
    for d in f.at_level(RACK):
        alone = [
            o
            for o in sample.sample_objects()
            if o["kind"] != "Node" or o["metadata"]["name"].startswith(d.path[1])
        ]
        (sub,) = cluster_figures(build_state(alone), Policy(name="t", gang_shapes=SHAPES))
        for shape in SHAPES:
            row = shape_at(sub, RACK, shape)
            assert {s.shape: s.pods for s in d.shapes}[shape] == row.best_pods, (d.path, shape)


def test_host_level_has_totals_but_no_per_domain_runs(sample_state: ClusterState) -> None:
    f = figures_of(sample_state)
    hosts = f.at_level(HOST)
    assert len(hosts) == 32 and all(h.shapes == () for h in hosts)
    cordoned = next(h for h in hosts if h.path[-1] == sample.CORDONED)
    assert (cordoned.total, cordoned.free, cordoned.unavailable) == (8, 0, 8)
    assert f.is_host_level(HOST) and not f.is_host_level(RACK)


def test_default_shapes_come_from_the_policy(sample_state: ClusterState) -> None:
    (f,) = cluster_figures(sample_state, load_policy("default"))
    assert {s.shape.text for s in f.shapes} == {"8x8", "32x8"}
    assert all(d.shapes == () for d in f.domains), "per-domain fits only when asked for"


def test_a_flavor_without_accelerators_has_no_shape_figures() -> None:
    objects = [
        *kueue_objects(),
        node("cpu-1", POOL_R1, gpus=0),
        node("cpu-2", {**POOL_R1, "rack": "r2"}, gpus=0),
    ]
    (f,) = cluster_figures(build_state(objects), Policy(name="t"), per_domain=True)
    assert f.accelerator == "" and f.shapes == ()
    assert f.notes == (
        "no gang-shape figures: no node of this flavor has " + " or ".join(Policy("t").gpu_resources),
    )
    assert all((d.total, d.free) == (0, 0) for d in f.domains)


def test_gpu_node_taints_are_tolerated_by_the_shapes_but_condition_taints_are_not() -> None:
    dedicated = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    pressure = [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]
    objects = [
        *kueue_objects(),
        node("g1", POOL_R1, taints=dedicated),
        node("g2", POOL_R1, taints=pressure),
    ]
    f = figures_of(build_state(objects), (GangShape(1, 8),))
    assert shape_at(f, "rack", GangShape(1, 8)).best_pods == 1


def test_overcommitted_hosts_count_as_zero_free() -> None:
    objects = [*kueue_objects(), node("g1", POOL_R1), running_pod("p", "g1", 12)]
    f = figures_of(build_state(objects), (GangShape(1, 8),))
    (rack,) = f.at_level("rack")
    assert (rack.total, rack.free, rack.used) == (8, 0, 8)


def test_per_domain_runs_are_bounded(monkeypatch: pytest.MonkeyPatch, sample_state: ClusterState) -> None:
    monkeypatch.setattr(fragmentation, "MAX_DOMAIN_RUNS", 4)
    f = figures_of(sample_state)
    assert f.notes == ("per-domain fits left out: more than 4 domains",)
    assert all(d.shapes == () for d in f.domains)
    assert f.shapes, "the per-level figures stay"
    assert MAX_DOMAIN_RUNS >= 512


# ------------------------------------------------------------------ the e2e capture's world


def captured_world() -> list[dict[str, Any]]:
    """16 Ready 8-GPU nodes as ``e2e.kueue_scenario.add_gpu_nodes`` makes them, Kueue's queue
    objects, and the pods of the Job Kueue admitted, on the hosts its Workload assigned."""
    objects: list[dict[str, Any]] = copy.deepcopy(queue_objects("kueue-capture"))
    for i in range(16):
        b, r = divmod(i // 4, 2)
        n = node_manifest(f"n{i}", {**NODE_POOL, LEVELS[0]: f"b{b}", LEVELS[1]: f"b{b}-r{r}"})
        objects.append({**n, **ready_status()})
    job = load([str(MANIFESTS / "kueue_stored" / "job-admitted.yaml")])[0].obj
    workload = load([str(MANIFESTS / "kueue_stored" / "job-workload.yaml")])[0].obj
    assignment = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    (slice_,) = assignment["slices"]
    values = slice_["valuesPerLevel"][0]["individual"]
    hosts = [values["prefix"] + root for root in values["roots"]]
    for i, host in enumerate(hosts):
        spec = copy.deepcopy(job["spec"]["template"]["spec"])
        spec["nodeName"] = host
        meta = {"name": f"train-{i}", "namespace": "kueue-capture"}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": spec,
                "status": {"phase": "Running"},
            }
        )
    return objects


def test_captured_world_with_kueues_admitted_job_running() -> None:
    state = build_state(captured_world())
    (f,) = cluster_figures(
        state, Policy(name="t", gang_shapes=(GangShape(4, 8), GangShape(8, 8))), per_domain=True
    )
    assert (f.topology, f.flavor) == (TOPOLOGY, FLAVOR)
    racks = {d.path[-1]: d for d in f.at_level(LEVELS[1])}
    assert racks["b0-r0"].free == 0 and racks["b0-r0"].used == 32, "Kueue put the Job on rack b0-r0"
    assert [racks[r].free for r in ("b0-r1", "b1-r0", "b1-r1")] == [32, 32, 32]
    four = shape_at(f, LEVELS[1], GangShape(4, 8))
    assert (four.best_gangs, four.domains) == (1, 3)
    eight = shape_at(f, LEVELS[0], GangShape(8, 8))
    assert (eight.best_gangs, eight.domains, eight.best_domain) == (1, 1, ("b1",))
    blocks = {d.path[-1]: d for d in f.at_level(LEVELS[0])}
    assert blocks["b0"].free == 32 and blocks["b1"].free == 64


def test_flavor_figures_of_an_empty_now_view() -> None:
    """Every node cordoned: totals stay, nothing is free, no shape is placed (and nothing breaks)."""
    objects = [*kueue_objects(), node("g1", POOL_R1, cordoned=True)]
    state = build_state(objects)
    flavor = state.flavors["gpu"]
    cluster = state.flavor_snapshot(flavor, state.topologies[flavor.topology_name or ""])
    f = flavor_figures(cluster, "topo", flavor.name, ("nvidia.com/gpu",), SHAPES, per_domain=True)
    assert f.topology == "topo" and len(f.domains) == 3, "block, rack, host"
    assert f.shapes == () and f.notes == ("no gang fits: no node of this flavor is Ready and uncordoned now",)
    assert all((d.free, d.unavailable) == (0, d.total) for d in f.domains)


def test_without_hosts_the_other_levels_are_unchanged(sample_state: ClusterState) -> None:
    """What /metrics asks for: no hostname-level domains, every other figure the same."""
    flavor = sample_state.flavors["tas-flavor"]
    cluster = sample_state.flavor_snapshot(flavor, sample_state.topologies["default"])
    full = flavor_figures(cluster, "default", flavor.name, ("nvidia.com/gpu",), SHAPES)
    lean = flavor_figures(cluster, "default", flavor.name, ("nvidia.com/gpu",), SHAPES, hosts=False)
    assert lean.at_level(HOST) == () and len(full.at_level(HOST)) == 32
    assert lean.domains == tuple(d for d in full.domains if d.level != HOST)
    assert lean.shapes == full.shapes


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(st.integers(0, 8), min_size=1, max_size=24),
    racks=st.integers(1, 4),
    gpus_per_pod=st.sampled_from((1, 2, 3, 4, 8)),
    pods=st.integers(1, 12),
)
def test_fits_are_whole_pods_per_node_summed_per_domain(
    free: list[int], racks: int, gpus_per_pod: int, pods: int
) -> None:
    """The oracle Kueue's counting reduces to for a GPU-only pod: floor(free / request) per node,
    summed per domain; whole gangs = that // pods; a free-GPU sum is what the gauge says."""
    objects: list[dict[str, Any]] = [*kueue_objects()]
    rack_of = {}
    for i, f in enumerate(free):
        rack = f"r{i % racks}"
        rack_of[f"g{i}"] = rack
        objects.append(node(f"g{i}", {**POOL_R1, "rack": rack}))
        if f < 8:
            objects.append(running_pod(f"busy-{i}", f"g{i}", 8 - f))
    shape = GangShape(pods, gpus_per_pod)
    f = figures_of(build_state(objects), (shape,))
    per_rack: dict[str, tuple[int, int]] = {}
    for i, amount in enumerate(free):
        got = per_rack.get(rack_of[f"g{i}"], (0, 0))
        per_rack[rack_of[f"g{i}"]] = (got[0] + amount, got[1] + amount // gpus_per_pod)
    for d in f.at_level("rack"):
        assert (d.free, d.shapes[0].pods) == per_rack[d.path[-1]]
    best = shape_at(f, "rack", shape)
    assert best.best_gangs == max(p for _, p in per_rack.values()) // pods
    assert best.domains == sum(1 for _, p in per_rack.values() if p >= pods)
    block = shape_at(f, "block", shape)
    assert block.best_pods == sum(p for _, p in per_rack.values())
