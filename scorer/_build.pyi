"""Type stub for the compiled snapshot build (``scorer/_build.pyx``): `scorer._reference_build`'s contract."""

from collections.abc import Mapping, Sequence

from scorer._reference_build import Built
from scorer.model import Node

def select(nodes: Sequence[Node], node_labels: Mapping[str, str], levels: Sequence[str]) -> list[Node]: ...
def build_views(
    levels: Sequence[str], nodes: Sequence[Node], usage: Mapping[str, Mapping[str, int]] | None
) -> Built: ...
def fallbacks() -> int: ...
