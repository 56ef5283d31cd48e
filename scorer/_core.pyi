"""Type stub for the compiled engine (``scorer/_core.pyx``): the ``Engine`` contract."""

from array import array
from collections.abc import Mapping, Sequence
from typing import TypeVar

from scorer.request import GroupRequest, RawResult
from scorer.tree import Tree

_T = TypeVar("_T")

NAME: str

def place_group(tree: Tree, free: array[int], req: GroupRequest) -> RawResult: ...
def place_group_both(
    tree: Tree, free: array[int], other: array[int], req: GroupRequest
) -> tuple[RawResult, RawResult]: ...
def _set_scratch_capacity(capacity: int) -> None: ...
def shift_from(values: array[int], lo: int, hi: int, at: int, delta: int) -> None: ...
def frozen(cls: type[_T], fields: tuple[str, ...], values: tuple[object, ...]) -> _T: ...
def level_rows(
    cls: type[_T],
    fields: tuple[str, ...],
    names: tuple[str, ...],
    domains: tuple[int, ...],
    paths: Sequence[tuple[str, ...]],
    pods: list[int],
    slices: list[int],
    fitting: list[int],
    best: list[int],
) -> tuple[_T, ...]: ...
def amounts(requests: Mapping[str, int], names: tuple[str, ...], pods_at: int) -> array[int]: ...
