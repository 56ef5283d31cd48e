"""The compiled native mode against its pure-Python twin, on random clusters and pod groups."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer import _reference_native
from scorer.model import Node, Taint
from scorer.native import NativeRequest, native_engines, place_native
from scorer.request import EngineError

compiled = native_engines().get("compiled")


def test_the_compiled_native_mode_is_built() -> None:
    # `make test` installs the extension; comparing the twin with nothing proves nothing.
    assert compiled is not None, "scorer._native is not built (pip install -e . builds it)"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], dict[str, dict[str, int]]]:
    n = draw(st.integers(1, 12))
    nodes, usage = [], {}
    for i in range(n):
        labels = {"kubernetes.io/hostname": f"n{i}"}
        if draw(st.booleans()) or i == 0:
            labels["rack"] = f"r{draw(st.integers(0, 3))}"
        alloc = {
            "cpu": draw(st.integers(0, 16)) * 1000,
            "memory": draw(st.integers(0, 64)) << 30,
            "pods": draw(st.integers(0, 20)),
            "nvidia.com/gpu": draw(st.sampled_from([0, 4, 8])),
        }
        taints = (Taint("dedicated", "NoSchedule"),) if draw(st.integers(0, 5)) == 0 else ()
        nodes.append(Node(f"n{i}", labels, alloc, taints, unschedulable=draw(st.integers(0, 6)) == 0))
        usage[f"n{i}"] = {"cpu": draw(st.integers(0, 8)) * 1000, "pods": draw(st.integers(0, 5))}
    return nodes, usage


requests = st.fixed_dictionaries(
    {
        "cpu": st.integers(0, 4000),
        "memory": st.integers(0, 8).map(lambda g: g << 30),
        "nvidia.com/gpu": st.integers(0, 8),
    }
)


@settings(max_examples=300, deadline=None)
@given(clusters(), requests, st.integers(0, 40), st.integers(1, 40), st.booleans(), st.booleans())
def test_compiled_agrees_with_twin(
    cluster: tuple[list[Node], dict[str, dict[str, int]]],
    want: dict[str, int],
    count: int,
    min_count: int,
    keyed: bool,
    empty: bool,
) -> None:
    nodes, usage = cluster
    req = NativeRequest("g", count, min_count, want, "rack" if keyed else None)
    twin = place_native(nodes, req, usage, empty, engine=_reference_native)  # type: ignore[arg-type]
    fast = place_native(nodes, req, usage, empty, engine=compiled)
    assert fast == twin


def test_compiled_refuses_bad_arrays() -> None:
    """The def wrapper validates under the GIL: a node pointing past the domains is refused."""
    assert compiled is not None
    one = memoryview(array("q", [1])).cast("B").cast("q", (1, 1))
    two = memoryview(array("q", [0, 0])).cast("B").cast("q", (1, 2))
    with pytest.raises(EngineError, match="node_domain"):
        compiled.place(
            array("i", [3]), array("b", [1]), one, array("q", [1]), two, two, array("q", [1, 1]), 1, 1, 0, -1
        )


@settings(max_examples=200, deadline=None)
@given(
    clusters(), st.lists(requests, min_size=1, max_size=8), st.integers(1, 8), st.booleans(), st.booleans()
)
def test_compiled_agrees_with_twin_on_pods_of_several_shapes(
    cluster: tuple[list[Node], dict[str, dict[str, int]]],
    shapes: list[dict[str, int]],
    min_count: int,
    keyed: bool,
    empty: bool,
) -> None:
    nodes, usage = cluster
    req = NativeRequest("g", len(shapes), min_count, shapes[0], "rack" if keyed else None, pods=tuple(shapes))
    twin = place_native(nodes, req, usage, empty, engine=_reference_native)  # type: ignore[arg-type]
    fast = place_native(nodes, req, usage, empty, engine=compiled)
    assert fast == twin


@settings(max_examples=100, deadline=None)
@given(clusters(), requests, st.integers(1, 12), st.booleans())
def test_one_shape_per_pod_cycle_takes_what_the_sum_says(
    cluster: tuple[list[Node], dict[str, dict[str, int]]], want: dict[str, int], count: int, empty: bool
) -> None:
    """Pods of one shape: the per-pod cycle places exactly min(count, sum of node fits) per domain,
    which is why the fast path may skip it."""
    nodes, usage = cluster
    fast = place_native(nodes, NativeRequest("g", count, 1, want, "rack"), usage, empty)
    cycled = place_native(
        nodes, NativeRequest("g", count, 1, want, "rack", pods=(want,) * count), usage, empty
    )
    assert sorted((d.value, d.placed) for d in fast.domains) == sorted(
        (d.value, d.placed) for d in cycled.domains
    )
