"""Type stub for the compiled engine (``scorer/_core.pyx``): the ``Engine`` contract."""

from array import array

from scorer.request import GroupRequest, RawResult
from scorer.tree import Tree

NAME: str

def place_group(tree: Tree, free: array[int], req: GroupRequest) -> RawResult: ...
def _set_scratch_capacity(capacity: int) -> None: ...
def shift_from(values: array[int], lo: int, hi: int, at: int, delta: int) -> None: ...
