"""Which leaf each node of a tree counts on, kept as the leaf's path rather than its index.

Leaf indexes shift whenever a leaf is inserted or removed before them; paths do not. A node
event that adds a leaf then copies a name-to-path map (a C-speed dict copy) instead of
renumbering tens of thousands of entries, and a lookup finds the index by bisection over the
level's sorted paths: a few microseconds, on the pod-event path.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence


class LeafIndex(Mapping[str, int]):
    """Node name -> leaf index, over a tree's sorted leaf paths; never changed once made."""

    __slots__ = ("_hi", "_lo", "_paths", "path_of")

    def __init__(
        self, path_of: dict[str, tuple[str, ...]], paths: Sequence[tuple[str, ...]], lo: int
    ) -> None:
        self.path_of = path_of  # node name -> the path of its leaf (the first node's, for a host leaf)
        self._paths, self._lo, self._hi = paths, lo, len(paths)

    def __getitem__(self, name: str) -> int:
        return bisect.bisect_left(self._paths, self.path_of[name], self._lo, self._hi) - self._lo

    def get(self, name: str, default: int | None = None) -> int | None:  # type: ignore[override]
        path = self.path_of.get(name)
        if path is None:
            return default
        return bisect.bisect_left(self._paths, path, self._lo, self._hi) - self._lo

    def __contains__(self, name: object) -> bool:
        return name in self.path_of

    def __iter__(self) -> Iterator[str]:
        return iter(self.path_of)

    def __len__(self) -> int:
        return len(self.path_of)

    def __repr__(self) -> str:
        return f"LeafIndex({len(self)} nodes)"
