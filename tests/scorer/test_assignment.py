"""`Assignment.of_leaves` keeps the engine's leaf indexes and makes the domain tuples on first read:
the same value, equality, hash and total as the eager form, whichever is read first."""

from __future__ import annotations

import pytest

from scorer.model import Assignment, DomainAssignment

PATHS = (("z1",), ("z1", "r1"), ("z1", "r2"), ("z1", "r1", "h1"), ("z1", "r1", "h2"), ("z1", "r2", "h3"))
LEVELS = ("zone", "rack", "kubernetes.io/hostname")


def test_lazy_equals_eager_full_paths() -> None:
    lazy = Assignment.of_leaves(LEVELS, PATHS, 3, [0, 2], [3, 1], last_only=False)
    eager = Assignment(
        LEVELS, (DomainAssignment(("z1", "r1", "h1"), 3), DomainAssignment(("z1", "r2", "h3"), 1))
    )
    assert lazy.total == 4  # read before the domains exist
    assert lazy == eager and hash(lazy) == hash(eager)
    assert lazy.domains == eager.domains and lazy.total == eager.total


def test_lazy_hostname_leaves_keep_the_last_value_only() -> None:
    lazy = Assignment.of_leaves(LEVELS[-1:], PATHS, 3, [1], [2], last_only=True)
    assert lazy.domains == (DomainAssignment(("h2",), 2),)
    assert (
        repr(lazy) == "Assignment(levels=('kubernetes.io/hostname',), "
        "domains=(DomainAssignment(values=('h2',), count=2),))"
    )


def test_differs_when_a_count_differs() -> None:
    one = Assignment.of_leaves(LEVELS, PATHS, 3, [0], [1], last_only=False)
    other = Assignment.of_leaves(LEVELS, PATHS, 3, [0], [2], last_only=False)
    assert one != other
    assert one != "not an assignment"


def test_one_count_per_leaf() -> None:
    with pytest.raises(ValueError, match="one count per leaf"):
        Assignment.of_leaves(LEVELS, PATHS, 3, [0, 1], [1], last_only=False)
