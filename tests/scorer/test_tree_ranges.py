"""`Tree.leaf_range` is exactly the leaves whose path starts with the domain's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.tree import build_tree
from tests.scorer.strategies import levels, nodes


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_leaf_range_is_the_prefix_match(data: st.DataObject) -> None:
    lvls = data.draw(levels())
    found = data.draw(nodes(lvls))
    tree, _ = build_tree(lvls, found, drop_condition_taints=False, with_usage=False)
    for domain in tree.paths:
        expected = [leaf for leaf in range(tree.n_leaves) if tree.leaf_path(leaf)[: len(domain)] == domain]
        assert list(tree.leaf_range(domain)) == expected, domain
    assert list(tree.leaf_range(("no-such-domain",))) == []
    assert list(tree.leaf_range(())) == []
