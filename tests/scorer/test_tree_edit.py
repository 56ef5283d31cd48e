"""A cluster edited node event by node event equals a fresh build of the new nodes: both trees
field for field, both free capacities, the node set, and every placement on both views."""

from __future__ import annotations

from array import array
from dataclasses import replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scorer import Cluster
from scorer.cluster_edit import edit_cluster
from scorer.engines import engines
from scorer.ledger import FreeLedger
from scorer.model import HOSTNAME_LABEL, Node, Taint
from tests.scorer.strategies import TAINTS, levels, pod_set

Assigned = list[tuple[tuple[str, ...], tuple[tuple[str, int], ...]]]


@st.composite
def a_node(draw: st.DrawFn, name: str, lvls: tuple[str, ...], shared_hosts: bool) -> Node:
    labels = {lvl: f"{lvl[0]}{draw(st.integers(0, 3))}" for lvl in lvls if lvl != HOSTNAME_LABEL}
    labels[HOSTNAME_LABEL] = f"h{draw(st.integers(0, 3))}" if shared_hosts else f"h-{name}"
    if draw(st.booleans()):
        labels["pool"] = draw(st.sampled_from(["a", "b"]))
    if draw(st.integers(0, 9)) == 0:
        del labels[draw(st.sampled_from(lvls))]  # no longer carries a level: leaves the flavor
    alloc = {"cpu": draw(st.sampled_from([0, 4000, 8000])), "pods": draw(st.sampled_from([1, 4, 110]))}
    if draw(st.integers(0, 3)) > 0:
        alloc["nvidia.com/gpu"] = draw(st.sampled_from([0, 4, 8]))
    if draw(st.integers(0, 7)) == 0:
        alloc["example.com/rare"] = 1  # a column only some nodes have: appears and goes
    taints: tuple[Taint, ...] = ()
    if draw(st.integers(0, 2)) == 0:
        taints = tuple(draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)))
    ready, cordoned = draw(st.integers(0, 4)) > 0, draw(st.integers(0, 4)) == 0
    return Node(name, labels, alloc, taints, ready, cordoned)


@st.composite
def histories(draw: st.DrawFn) -> tuple:
    lvls = draw(levels())
    shared = draw(st.integers(0, 4)) == 0
    count = draw(st.integers(0, 12))
    start = {f"n{i:02d}": draw(a_node(f"n{i:02d}", lvls, shared)) for i in range(count)}
    batches = []
    for _ in range(draw(st.integers(1, 4))):
        batch = {}
        for _ in range(draw(st.integers(1, 3))):
            name = f"n{draw(st.integers(0, count + 2)):02d}"
            batch[name] = None if draw(st.integers(0, 4)) == 0 else draw(a_node(name, lvls, shared))
        batches.append(batch)
    usage = {f"n{i:02d}": {"cpu": 1000, "pods": 1} for i in range(count + 3) if draw(st.booleans())}
    assigned: Assigned = [
        (tuple(f"{lvl[0]}{draw(st.integers(0, 3))}" for lvl in lvls), (("nvidia.com/gpu", 2), ("pods", 1)))
        for _ in range(draw(st.integers(0, 3)))
    ]
    if lvls[-1] == HOSTNAME_LABEL:
        assigned = [((f"h-n{draw(st.integers(0, count)):02d}",), r) for _, r in assigned]
    flavor = draw(st.sampled_from([{}, {"pool": "a"}]))
    requests = [draw(pod_set(f"ps{i}", lvls, None)) for i in range(2)]
    return lvls, start, batches, usage, assigned, flavor, requests


def _built(
    lvls: tuple, nodes: dict, flavor: dict, usage: dict, assigned: Assigned, generation: int
) -> Cluster:
    ordered = [nodes[name] for name in sorted(nodes)]
    cluster = Cluster.build("t", lvls, ordered, flavor, usage=usage, generation=generation)
    ledger = FreeLedger(cluster)
    for values, requests in assigned:
        ledger.add_domain(values, requests, 1)
    return ledger.publish(generation)


def _by_key(cluster: Cluster, assigned: Assigned) -> dict[object, list]:
    hostname = cluster.now.tree.hostname_leaves
    found: dict[object, list] = {}
    for values, requests in assigned:
        found.setdefault(values[-1] if hostname else values, []).append(requests)
    return found


def _same(edited: Cluster, fresh: Cluster, requests: list) -> None:
    assert edited.nodes == fresh.nodes
    assert edited.now.tree == fresh.now.tree
    assert list(edited.now.free) == list(fresh.now.free)
    assert edited.never.tree == fresh.never.tree
    assert list(edited.never.free) == list(fresh.never.free)
    assert (edited.never.tree is edited.now.tree) == (fresh.never.tree is fresh.now.tree)
    assert edited.away_counts() == Cluster.build("t", fresh.levels, fresh.nodes).away_counts()
    assert edited.largest_allocatable() == fresh.largest_allocatable()
    for engine in engines().values():
        for view in ("now", "never"):
            got = getattr(edited, view).place(requests, engine=engine)
            assert got == getattr(fresh, view).place(requests, engine=engine), view


@settings(max_examples=400, deadline=None)
@given(histories())
def test_an_edited_cluster_equals_a_fresh_build(history: tuple) -> None:
    lvls, nodes, batches, usage, assigned, flavor, requests = history
    cluster = _built(lvls, nodes, flavor, usage, assigned, 0)
    for generation, batch in enumerate(batches, 1):
        changes = [(nodes.get(name), after) for name, after in batch.items()]
        changes = [(b, a) for b, a in changes if b is not None or a is not None]
        for name, after in batch.items():
            if after is None:
                nodes.pop(name, None)
            else:
                nodes[name] = after
        fresh = _built(lvls, nodes, flavor, usage, assigned, generation)
        edited = edit_cluster(
            cluster, changes, flavor, free=cluster.now.free, usage=usage,
            assigned=_by_key(cluster, assigned), generation=generation,
        )  # fmt: skip
        event("rebuilt" if edited is None else "edited in place")
        if edited is None:
            cluster = fresh
            continue
        _same(edited, fresh, requests)
        cluster = edited


def test_a_node_that_moves_to_a_new_rack_is_edited_in_place() -> None:
    lvls = ("block", "rack", HOSTNAME_LABEL)
    nodes = {
        f"n{i}": Node(f"n{i}", {"block": "b0", "rack": f"r{i // 2}", HOSTNAME_LABEL: f"n{i}"}, {"pods": 4})
        for i in range(6)
    }
    cluster = _built(lvls, nodes, {}, {}, [], 0)
    moved = replace(nodes["n1"], labels={"block": "b1", "rack": "rx", HOSTNAME_LABEL: "n1"})
    cordoned = replace(nodes["n4"], unschedulable=True)
    edited = edit_cluster(
        cluster, [(nodes["n1"], moved), (nodes["n4"], cordoned)], {}, free=cluster.now.free,
        usage={}, assigned={}, generation=1,
    )  # fmt: skip
    assert edited is not None
    nodes.update(n1=moved, n4=cordoned)
    fresh = _built(lvls, nodes, {}, {}, [], 1)
    assert edited.now.tree == fresh.now.tree and edited.never.tree == fresh.never.tree
    assert "n4" not in edited.now.tree.leaf_of_node and "n4" in edited.never.tree.leaf_of_node


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-1, 20), max_size=30), st.integers(0, 30), st.integers(0, 30), st.integers(-1, 9))
def test_the_compiled_shift_and_its_twin_agree(values: list[int], lo: int, hi: int, at: int) -> None:
    from scorer import _core  # noqa: PLC0415
    from scorer.tree_edit import _shift_from  # noqa: PLC0415

    lo, hi = min(lo, hi, len(values)), min(max(lo, hi), len(values))
    compiled, twin = array("i", values), array("i", values)
    _core.shift_from(compiled, lo, hi, at, -1 if at % 2 else 1)
    _shift_from(twin, lo, hi, at, -1 if at % 2 else 1)
    assert compiled == twin
