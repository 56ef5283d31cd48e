"""The contract between the snapshot layer and a placement engine.

Both engines (`scorer._core`, compiled, and `scorer._reference`, pure Python) expose
``place_group(tree, free, request) -> RawResult`` over exactly these types; nothing else
crosses the boundary, which is what lets the tests compare them value for value.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Protocol

from scorer.tree import Tree

STATUS_FIT = 0
STATUS_NOT_FIT = 1
STATUS_NO_DOMAINS = 2
STATUS_FAILED = 3  # Kueue's "code assumptions violated": it assigns nothing


class EngineError(RuntimeError):
    """The engine itself failed (a working buffer overflowed, an invariant of its input broke).

    Never a placement: the caller must treat it as an internal error, not as "does not fit".
    """


EXCLUDED_NONE = 0
EXCLUDED_SELECTOR = 2
EXCLUDED_AFFINITY = 3


@dataclass(frozen=True, slots=True)
class GroupRequest:
    """One placement run: a PodSet, or a leader+workers group, with resolved level indexes.

    ``req_col``/``req_val``: requested resources in alphabetical order (``pods: 1`` included),
    with the capacity column of each (-1 when no node has it). ``leader_val`` is empty when
    there is no leader. ``inner_sizes[level]`` is the multi-layer slice size applying at that
    level (0 = none). ``layer_levels``/``layer_sizes`` are set only for multi-layer requests,
    for the failure message. ``class_excluded[c]`` is 1 when taint class ``c`` holds a taint
    the pod does not tolerate; ``label_excl`` (per leaf, or empty) flags selector/affinity
    misses. Both are read only when ``check_nodes`` (hostname is the lowest level).
    """

    req_col: array[int]
    req_val: array[int]
    leader_val: array[int]
    count: int
    slice_size: int
    requested_level: int
    slice_level: int
    inner_sizes: array[int]
    required: bool
    unconstrained: bool
    layer_levels: array[int]
    layer_sizes: array[int]
    check_nodes: bool
    class_excluded: array[int]
    label_excl: array[int] = field(default_factory=lambda: array("b"))


@dataclass(slots=True)
class RawResult:
    """What an engine found, as numbers; the snapshot layer turns it into Kueue's words."""

    status: int
    level: int = 0  # the level searched when it failed
    fit_count: int = 0
    total: int = 0
    layer_fits: list[int] = field(default_factory=list)
    worker_leaves: list[int] = field(default_factory=list)
    worker_counts: list[int] = field(default_factory=list)
    leader_leaves: list[int] = field(default_factory=list)
    leader_counts: list[int] = field(default_factory=list)
    total_nodes: int = 0
    taint_counts: list[int] = field(default_factory=list)
    selector_count: int = 0
    affinity_count: int = 0
    resource_counts: list[int] = field(default_factory=list)
    level_max_pods: list[int] = field(default_factory=list)
    level_max_slices: list[int] = field(default_factory=list)
    level_fitting: list[int] = field(default_factory=list)
    level_best: list[int] = field(default_factory=list)


class Engine(Protocol):
    NAME: str

    def place_group(self, tree: Tree, free: array[int], request: GroupRequest) -> RawResult: ...
