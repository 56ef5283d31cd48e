"""Remembered request plans (`scorer.request.Plan`) give the answers a cold view gives.

A plan holds what a placement's request takes from the tree and the request's shape alone
(resource columns, taint classes left out, resolved levels, per-level constants); it is keyed
by the topology request, the requested names and the tolerations. Every shape here is placed
on one warm view, in two orders and twice, and must equal a fresh cluster's answer, on both
engines; the compiled record builders must equal the dataclasses' own constructors.
"""

from __future__ import annotations

import dataclasses
import random
from array import array

import pytest

from scorer import Cluster, engines
from scorer import _reference as twin
from scorer.model import (
    HOSTNAME_LABEL,
    LevelCapacity,
    Mode,
    Node,
    Placement,
    PodSetRequest,
    SelectorRequirement,
    SelectorTerm,
    SliceLayer,
    Taint,
    Toleration,
    TopologyRequest,
)
from scorer.request import PLAN_CACHE_SIZE, GroupRequest, plans

LEVELS = ("block", "rack", HOSTNAME_LABEL)
GPU = "example.com/gpu"
ENGINES = sorted(engines())


def nodes() -> list[Node]:
    out = []
    for i in range(12):
        block, rack = f"b{i // 6}", f"b{i // 6}r{i // 3}"
        labels = {"block": block, "rack": rack, HOSTNAME_LABEL: f"n{i}", "pool": "a" if i % 4 else "b"}
        taints = (Taint("dedicated", "NoSchedule", "infer"),) if i in (1, 7) else ()
        usage = {GPU: 2, "cpu": 1000} if i % 5 == 0 else {}
        out.append(Node(f"n{i}", labels, {GPU: 4, "cpu": 16000, "pods": 20}, taints, usage=usage))
    return out


def gang(name: str, count: int, topology: TopologyRequest, **extra: object) -> PodSetRequest:
    return PodSetRequest(name, count, {GPU: 2, "cpu": 1000}, topology, **extra)  # type: ignore[arg-type]


BLOCK = TopologyRequest(Mode.REQUIRED, "block")
LAYERS = (SliceLayer("rack", 4), SliceLayer(HOSTNAME_LABEL, 2))
TOLERATE = (Toleration("dedicated", "Equal", "infer", "NoSchedule"),)
NOT_N0 = (SelectorTerm((SelectorRequirement(HOSTNAME_LABEL, "NotIn", ("n0",)),)),)
SHAPES: dict[str, tuple[PodSetRequest, ...]] = {
    "block": (gang("w", 6, BLOCK),),
    "block, tolerating the taint": (gang("w", 6, BLOCK, tolerations=TOLERATE),),
    "block, more than fits": (gang("w", 20, BLOCK),),
    "block, more than fits, tolerating": (gang("w", 20, BLOCK, tolerations=TOLERATE),),
    "selector": (gang("w", 4, BLOCK, node_selector={"pool": "a"}),),
    "affinity": (gang("w", 4, BLOCK, affinity=NOT_N0),),
    "same names, other order": (PodSetRequest("w", 6, {"cpu": 1000, GPU: 2}, BLOCK),),
    "cpu only": (PodSetRequest("w", 6, {"cpu": 1000}, BLOCK),),
    "a resource no node has": (PodSetRequest("w", 1, {"example.com/fpga": 1}, BLOCK),),
    "leader and workers": (
        PodSetRequest("lead", 1, {"cpu": 500}, TopologyRequest(Mode.REQUIRED, "block", group="g")),
        gang("w", 5, TopologyRequest(Mode.REQUIRED, "block", group="g")),
    ),
    "workers and leader, leader first in input": (
        gang("w", 5, TopologyRequest(Mode.REQUIRED, "block", group="g")),
        PodSetRequest("lead", 1, {"cpu": 500}, TopologyRequest(Mode.REQUIRED, "block", group="g")),
    ),
    "sliced": (gang("w", 6, TopologyRequest(Mode.REQUIRED, "block", slice_level="rack", slice_size=3)),),
    "multi-layer": (
        gang("w", 8, TopologyRequest(Mode.REQUIRED, "block", slice_layers=LAYERS)),
    ),
    "multi-layer, more than fits": (
        gang("w", 16, TopologyRequest(Mode.REQUIRED, "block", slice_layers=LAYERS)),
    ),
    "preferred": (gang("w", 10, TopologyRequest(Mode.PREFERRED, "rack")),),
    "implied": (gang("w", 3, TopologyRequest()),),
    "unresolvable level": (gang("w", 2, TopologyRequest(Mode.REQUIRED, "zone")),),
    "two PodSets, two groups": (gang("a", 4, BLOCK), gang("b", 4, BLOCK)),
}  # fmt: skip


def cold(name: str, engine: str, flavor: tuple[Toleration, ...] = ()) -> tuple[Placement, ...]:
    cluster = Cluster.build("t", LEVELS, nodes(), flavor_tolerations=flavor, engine=engines()[engine])
    return cluster.now.place(SHAPES[name])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("flavor", [(), TOLERATE], ids=["no flavor tolerations", "flavor tolerates"])
def test_a_warm_view_answers_every_shape_as_a_cold_one(engine: str, flavor: tuple[Toleration, ...]) -> None:
    want = {name: cold(name, engine, flavor) for name in SHAPES}
    cluster = Cluster.build("t", LEVELS, nodes(), flavor_tolerations=flavor, engine=engines()[engine])
    order = list(SHAPES)
    for shuffle in (False, True):
        if shuffle:
            random.Random(7).shuffle(order)
        for name in order * 2:
            assert cluster.now.place(SHAPES[name]) == want[name], name
    assert len(plans(cluster.now.tree)) <= len(SHAPES) + 2, "one plan per group shape"


def test_tolerations_are_part_of_the_key() -> None:
    untolerated, tolerated = (
        cold("block, more than fits", "reference"),
        cold("block, more than fits, tolerating", "reference"),
    )
    assert untolerated[0].excluded != tolerated[0].excluded, "the taint leaves nodes out only untolerated"
    flavor = cold("block, more than fits", "reference", TOLERATE)
    assert flavor == tolerated, "flavor tolerations count too"


def test_plans_are_shared_by_every_view_of_a_tree_and_bounded() -> None:
    cluster = Cluster.build("t", LEVELS, nodes())
    cluster.now.place(SHAPES["block"])
    later = cluster.with_free(array("q", cluster.now.free), generation=2)
    assert plans(later.now.tree) is plans(cluster.now.tree)
    for count in range(1, PLAN_CACHE_SIZE + 10):
        asks = PodSetRequest("w", 1, {f"r{count}": 1}, BLOCK)
        assert later.now.place([asks])[0].reason, "no node has the resource"
        assert len(plans(later.now.tree)) <= PLAN_CACHE_SIZE
    assert later.now.place(SHAPES["block"]) == cold("block", ENGINES[-1])


@pytest.mark.parametrize("engine", ENGINES)
def test_the_engine_never_writes_a_plans_arrays(engine: str) -> None:
    cluster = Cluster.build("t", LEVELS, nodes(), engine=engines()[engine])
    for shape in SHAPES.values():
        cluster.now.place(shape)
    before = {key: _arrays(plan) for key, plan in plans(cluster.now.tree).items()}
    for shape in SHAPES.values():
        cluster.now.place(shape)
    assert {key: _arrays(plan) for key, plan in plans(cluster.now.tree).items()} == before


def _arrays(plan: object) -> object:
    if isinstance(plan, str):
        return plan
    return [list(v) for v in dataclasses.astuple(plan) if isinstance(v, array)]  # type: ignore[call-overload]


@pytest.mark.skipif("compiled" not in engines(), reason="the compiled engine is not built")
def test_compiled_records_equal_the_dataclasses_own() -> None:
    from scorer import _core  # noqa: PLC0415 - only when built

    fields = tuple(f.name for f in dataclasses.fields(Placement))
    values = ("w", False, None, "why", 3, 8, "slice", (), True, 12, (("taint", 2),))
    made = _core.frozen(Placement, fields, values)
    assert made == Placement(*values) and hash(made) == hash(Placement(*values))
    with pytest.raises(TypeError):
        _core.frozen(Placement, fields, values[:-1])
    for cls in (Placement, LevelCapacity, GroupRequest):
        assert not hasattr(cls, "__post_init__"), f"{cls.__name__}: frozen() would skip it"
    level_fields = tuple(f.name for f in dataclasses.fields(LevelCapacity))
    paths = (("b0",), ("b0", "r0"), ("b0", "r0", "n0"))
    columns = (("block", "rack", "host"), (1, 1, 1), paths, [9, 4, 2], [3, 1, 0], [1, 1, 0], [0, 1, -1])
    rows = _core.level_rows(LevelCapacity, level_fields, *columns)
    assert rows == twin.level_rows(LevelCapacity, level_fields, *columns)
    assert rows[2] == LevelCapacity("host", 2, 0, 0, 1, None) and rows[1].best_domain == ("b0", "r0")
    with pytest.raises(ValueError):
        _core.level_rows(LevelCapacity, level_fields, *columns[:-1], [0])
    names = ("cpu", GPU, "pods")
    for asks in ({}, {"cpu": 1500, GPU: 2}, {"pods": 3, "other": 9}):
        assert _core.amounts(asks, names, 2) == twin.amounts(asks, names, 2), asks
    assert list(_core.amounts({"cpu": 7}, names, 0)) == [8, 0, 0]
    for engine in (_core, twin):
        with pytest.raises(IndexError):
            engine.amounts({}, names, 3)
        with pytest.raises(OverflowError):
            engine.amounts({"pods": 2**63 - 1}, names, 2)
