"""Turn a PodSet's topology request into level indexes, or Kueue's reason why it cannot.

Mirrors the checks at the top of Kueue's ``findTopologyAssignment`` in the same order, so
the first problem reported is the one Kueue reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from scorer.model import Mode, SliceLayer, TopologyRequest


@dataclass(frozen=True, slots=True)
class ResolvedLevels:
    requested_level: int
    slice_level: int
    slice_size: int
    required: bool
    unconstrained: bool
    inner_sizes: tuple[int, ...]  # per level, 0 = no inner slice layer there
    layers: tuple[SliceLayer, ...]  # set only when inner layers exist (multi-layer message)
    least_free: bool = True  # TopologyRequest.least_free: the profile of an unconstrained request


def is_slice_only(req: TopologyRequest) -> bool:
    """Slice annotations without required/preferred: Kueue places at the top level, unconstrained."""
    if req.mode in (Mode.REQUIRED, Mode.PREFERRED):
        return False
    return req.slice_level is not None or bool(req.slice_layers)


def _level_key(req: TopologyRequest, levels: tuple[str, ...]) -> str | None:
    if req.mode in (Mode.REQUIRED, Mode.PREFERRED):
        return req.level
    if is_slice_only(req):
        return levels[0]
    if req.mode in (Mode.UNCONSTRAINED, Mode.IMPLIED):
        return levels[-1]
    return None


def _slice_size(req: TopologyRequest) -> int | str:
    if req.slice_layers:
        return req.slice_layers[0].size
    if req.slice_level is None:
        return 1
    if req.slice_size is None:
        return "slice topology requested, but slice size not provided"
    return req.slice_size


@lru_cache(maxsize=4096)
def resolve(req: TopologyRequest, levels: tuple[str, ...]) -> ResolvedLevels | str:
    """Level indexes for the engine, or the reason string Kueue would give. Remembered: a
    cluster has a few topologies and its workloads a few shapes, and the checks cost more than
    a placement's engine call at 1k nodes; both arguments and the answer are immutable."""
    size = _slice_size(req)
    if isinstance(size, str):
        return size
    if size < 1:
        return f"slice size must be a positive integer, got {size}"
    key = _level_key(req, levels)
    if key is None:
        return "topology level not specified"
    if key not in levels:
        return f"no requested topology level: {key}"
    requested = levels.index(key)
    slice_key = req.slice_level or (req.slice_layers[0].level if req.slice_layers else levels[-1])
    if slice_key not in levels:
        return f"no requested topology level for slices: {slice_key}"
    slice_level = levels.index(slice_key)
    if requested > slice_level:
        return f"podset slice topology {slice_key} is above the podset topology {key}"
    inner = _inner_sizes(req, levels, size, slice_level)
    if isinstance(inner, str):
        return inner
    return ResolvedLevels(
        requested_level=requested,
        slice_level=slice_level,
        slice_size=size,
        required=req.mode is Mode.REQUIRED,
        unconstrained=req.mode in (Mode.UNCONSTRAINED, Mode.IMPLIED) or is_slice_only(req),
        inner_sizes=inner,
        layers=req.slice_layers if any(inner) else (),
        least_free=req.least_free,
    )


def _inner_sizes(
    req: TopologyRequest, levels: tuple[str, ...], size: int, slice_level: int
) -> tuple[int, ...] | str:
    """buildSliceSizeAtLevel: inner layers fill every level down to their own."""
    sizes = [0] * len(levels)
    prev_size, prev_level = size, slice_level
    for layer in req.slice_layers[1:]:
        if layer.level not in levels:
            return f"no requested topology level for additional slice layer: {layer.level}"
        level = levels.index(layer.level)
        if level <= prev_level:
            coarser = levels[prev_level]
            return f"additional slice layer topology {layer.level} must be at a lower level than {coarser}"
        if layer.size <= 0 or prev_size % layer.size != 0:
            return (
                f"additional slice layer size {layer.size} must evenly divide parent layer size {prev_size}"
            )
        for lvl in range(prev_level + 1, level + 1):
            sizes[lvl] = layer.size
        prev_size, prev_level = layer.size, level
    return tuple(sizes)
