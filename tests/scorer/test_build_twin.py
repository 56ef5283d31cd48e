"""The compiled snapshot build (`scorer._build`) equals its pure twin (`scorer._reference_build`)
field for field: both trees, both free capacities, the DomainID lists edits read, the order of
the node-to-leaf map, and the same error where the twin raises one. Label values below ',',
shared hostnames and names, amounts past int64 and negative ones are drawn on purpose: they are
where a C reimplementation of Python's orders and sums would drift."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from scorer import _build, _reference_build
from scorer.model import HOSTNAME_LABEL, Node, Taint
from tests.scorer.strategies import TAINTS, levels

VALUES = ("a", "b", "a-b", "a,b", "a b", "", "A", "é", "a+")
AMOUNTS = st.one_of(
    st.sampled_from([0, 1, 4, 8, 1000, 2**34]),
    st.sampled_from([-3, 2**62, 2**63 - 1, 2**63, 2**70, True, 1.5]),
)


@st.composite
def a_node(draw: st.DrawFn, i: int, lvls: tuple[str, ...], odd: bool) -> Node:
    labels = {lvl: draw(st.sampled_from(VALUES[:3] if not odd else VALUES)) for lvl in lvls}
    labels[HOSTNAME_LABEL] = f"h{draw(st.integers(0, 30))}" if draw(st.integers(0, 3)) == 0 else f"h-{i}"
    if odd and draw(st.integers(0, 12)) == 0:
        del labels[draw(st.sampled_from(lvls))]
    names = ("cpu", "pods", "nvidia.com/gpu", "memory", "example.com/rare")
    amount = AMOUNTS if odd else st.sampled_from([0, 1, 4, 8, 1000, 2**34])
    alloc = {r: draw(amount) for r in names if draw(st.integers(0, 4)) > 0}
    usage = {r: draw(amount) for r in names if draw(st.integers(0, 3)) == 0}
    taints: tuple[Taint, ...] = ()
    if draw(st.integers(0, 2)) == 0:
        taints = tuple(draw(st.lists(st.sampled_from(TAINTS), max_size=3, unique=True)))
    name = f"n{draw(st.integers(0, 40))}" if odd and draw(st.integers(0, 5)) == 0 else f"n-{i}"
    return Node(name, labels, alloc, taints, draw(st.integers(0, 4)) > 0, draw(st.integers(0, 4)) == 0, usage)


@st.composite
def cases(draw: st.DrawFn) -> tuple[tuple[str, ...], list[Node], dict[str, Any] | None, bool]:
    """(levels, nodes, usage, odd): ``odd`` draws the inputs the compiled build hands its twin."""
    lvls = draw(levels())
    odd = draw(st.booleans())
    found = [draw(a_node(i, lvls, odd)) for i in range(draw(st.integers(0, 25)))]
    usage = None
    if draw(st.booleans()):
        usage = {n.name: {"cpu": draw(st.integers(0, 9000)), "pods": 1} for n in found if draw(st.booleans())}
    return lvls, found, usage, odd


def _outcome(build: Any, lvls: tuple[str, ...], found: list[Node], usage: Any) -> Any:
    try:
        return build(lvls, tuple(found), usage)
    except Exception as error:  # the twin's error is part of the contract
        return type(error)


def _same_trees(got: Any, want: Any) -> None:
    for view in ("now", "never"):
        a, b = getattr(got, view), getattr(want, view)
        assert (a is None) == (b is None), view
        if a is None:
            continue
        assert a[0] == b[0], view
        assert a[0].memo["ids"] == b[0].memo["ids"], view
        assert list(a[0].leaf_of_node.path_of.items()) == list(b[0].leaf_of_node.path_of.items()), view


@settings(max_examples=600, deadline=None)
@given(cases())
def test_the_compiled_build_equals_its_twin(case: tuple) -> None:
    lvls, found, usage, odd = case
    before = _build.fallbacks()
    got = _outcome(_build.build_views, lvls, found, usage)
    want = _outcome(_reference_build.build_views, lvls, found, usage)
    fast = _build.fallbacks() == before
    event("fast path" if fast else "twin")
    # Ordinary nodes are the compiled build's own: a fall-back there would compare the twin
    # with itself, and hide a compiled error raised on ordinary input.
    assert fast or odd, "ordinary nodes left the compiled build for its twin"
    if isinstance(want, type):
        assert got is want
        return
    assert got == want
    _same_trees(got, want)


@settings(max_examples=200, deadline=None)
@given(cases(), st.sampled_from([{}, {"zone": "a"}, {"rack": "a", "block": "b"}]))
def test_the_compiled_selection_equals_its_twin(case: tuple, flavor: dict[str, str]) -> None:
    lvls, found, _, _ = case
    assert _build.select(found, flavor, lvls) == _reference_build.select(found, flavor, lvls)


def test_ordinary_nodes_never_leave_the_fast_path() -> None:
    from bench.bench_scorer import LEVELS, synthetic_nodes  # noqa: PLC0415

    nodes = tuple(synthetic_nodes(2000))
    before = _build.fallbacks()
    got = _build.build_views(LEVELS, nodes, None)
    assert _build.fallbacks() == before
    assert got == _reference_build.build_views(LEVELS, nodes, None)
    assert got.never is not None  # the cordoned nodes are away: both views built


@pytest.mark.parametrize("amount", [2**63, -(2**63) - 1])
def test_an_amount_past_int64_is_the_twins_to_judge(amount: int) -> None:
    one = Node("a", {"rack": "r"}, {"cpu": amount})
    two = [one, Node("b", {"rack": "r"}, {"cpu": amount})]
    assert _outcome(_build.build_views, ("rack",), [one], None) is OverflowError
    # Two nodes of one leaf: the sum saturates at int64 max (or, below int64 min, is refused).
    assert _outcome(_build.build_views, ("rack",), two, None) == _outcome(
        _reference_build.build_views, ("rack",), two, None
    )
