"""Pure-Python twin of the compiled engine: Kueue's TAS placement, step by step.

This is the readable oracle the tests hold the Cython engine to. It follows Kueue's
``findTopologyAssignment`` (default feature gates: TASProfileMixed and TASMultiLayerTopology
on, TASBalancedPlacement and TASRespectNodeAffinityPreferred off), quirks included: parity
means the same assignment, not a better one. Domains are global indexes; a lower index at
the same level is a smaller level-value path, Kueue's final tie-break.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import TypeVar

from scorer._reference_counts import aggregate, fill_leaves, level_table
from scorer._reference_state import State
from scorer.request import (
    STATUS_FAILED,
    STATUS_FIT,
    STATUS_NO_DOMAINS,
    STATUS_NOT_FIT,
    GroupRequest,
    RawResult,
)
from scorer.tree import Tree

NAME = "reference"
_T = TypeVar("_T")


def frozen(cls: type[_T], fields: tuple[str, ...], values: tuple[object, ...]) -> _T:
    """Twin of ``scorer._core.frozen``: the dataclass's own constructor."""
    if len(values) != len(fields):
        raise TypeError(f"frozen({cls.__name__}): {len(values)} values for {len(fields)} fields")
    return cls(*values)


def amounts(requests: Mapping[str, int], names: tuple[str, ...], pods_at: int) -> array[int]:
    """Twin of ``scorer._core.amounts``: each name's amount, the pod itself one more at ``pods_at``."""
    if not 0 <= pods_at < len(names):
        raise IndexError(f"amounts: pods_at {pods_at} is not among {len(names)} names")
    return array("q", [requests.get(n, 0) + (i == pods_at) for i, n in enumerate(names)])


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
) -> tuple[_T, ...]:
    """Twin of ``scorer._core.level_rows``: one row per level."""
    if not len(domains) == len(pods) == len(slices) == len(fitting) == len(best) == len(names):
        raise ValueError("level_rows: one entry per level in every column")
    columns = zip(names, pods, slices, fitting, domains, best, strict=True)
    return tuple(
        frozen(cls, fields, (n, p, s, f, d, paths[b] if b >= 0 else None)) for n, p, s, f, d, b in columns
    )


def place_group_both(
    tree: Tree, free: array[int], other: array[int], req: GroupRequest
) -> tuple[RawResult, RawResult]:
    """The group on each capacity, one after the other (the compiled engine's one-call pair)."""
    return place_group(tree, free, req), place_group(tree, other, req)


def place_group(tree: Tree, free: array[int], req: GroupRequest) -> RawResult:
    s = State(tree, req)
    result = RawResult(status=STATUS_FIT)
    fill_leaves(s, free, result)
    aggregate(s)
    level_table(s, result)
    found = _find_level(s, req.requested_level, result)
    if found is None:
        return result
    fit_level, domains = found
    result.level = fit_level
    leaves = _descend(s, fit_level, domains)
    if leaves is None:
        result.status = STATUS_FAILED
        return result
    _collect(s, leaves, result)
    return result


def _find_level(s: State, search: int, result: RawResult) -> tuple[int, list[int]] | None:
    """findLevelWithFitDomains: a single best domain, the preferred climb, or the top spread."""
    tree, req = s.tree, s.req
    while True:
        domains = list(range(tree.level_offsets[search], tree.level_offsets[search + 1]))
        if not domains:
            result.status, result.level = STATUS_NO_DOMAINS, search
            return None
        ordered = s.sorted_with_leader(domains)
        top = ordered[0]
        slice_count = req.count // req.slice_size
        lc = s.leader_count
        if s.best_fit and s.slwl[top] >= slice_count and s.ld[top] >= lc:
            top = s.best_fit_slices(ordered, slice_count, lc)
        if not s.best_fit:
            for cand in ordered:
                if s.slwl[cand] >= slice_count and s.ld[cand] >= lc:
                    return search, [cand]
            if req.required:
                _not_fit(s, result, search, s.st[ordered[-1]], slice_count)
                return None
        if s.slwl[top] >= slice_count and s.ld[top] >= lc:
            return search, [top]
        if req.required:
            _not_fit(s, result, search, s.sl[top], slice_count)
            return None
        if search > 0 and not req.unconstrained:
            search -= 1
            continue
        return _spread(s, result, search, ordered, slice_count)


def _spread(
    s: State, result: RawResult, search: int, ordered: list[int], slice_count: int
) -> tuple[int, list[int]] | None:
    """No single domain holds it: leaders first, then workers greedily over the rest."""
    chosen: list[int] = []
    remaining = slice_count
    rest = ordered
    if s.leader_count:
        if not any(s.ld[d] > 0 for d in ordered):
            _not_fit(s, result, search, 0, slice_count)
            return None
        ordered = s.prioritize_leader(ordered, remaining, s.leader_count, True)
        lead = ordered[0]
        if s.best_fit and s.slwl[lead] >= remaining:
            lead = s.best_fit_slices(ordered, remaining, s.leader_count)
        chosen.append(lead)
        remaining -= s.slwl[lead]
        rest = [d for d in ordered if d != lead]
    rest = s.sorted_plain(rest)
    i = 0
    while remaining > 0 and i < len(rest):
        d = rest[i]
        if s.best_fit and s.sl[d] >= remaining:
            d = s.best_fit_slices(rest[i:], remaining, 0)
        chosen.append(d)
        remaining -= s.sl[d]
        i += 1
    if remaining > 0:
        _not_fit(s, result, search, slice_count - remaining, slice_count)
        return None
    return search, chosen


def _not_fit(s: State, result: RawResult, search: int, fit: int, total: int) -> None:
    result.status, result.level, result.fit_count, result.total = STATUS_NOT_FIT, search, fit, total
    req = s.req
    if len(req.layer_levels):
        best = -1
        for d in range(s.tree.level_offsets[search], s.tree.level_offsets[search + 1]):
            if (
                best < 0
                or s.sl[d] > s.sl[best]
                or (s.sl[d] == s.sl[best] and s.tree.id_rank[d] < s.tree.id_rank[best])
            ):
                best = d
        for target, size in zip(req.layer_levels, req.layer_sizes, strict=True):
            result.layer_fits.append(_slices_in_subtree(s, best, search, target, size))


def _slices_in_subtree(s: State, d: int, level: int, target: int, size: int) -> int:
    if level == target:
        return s.st[d] // size
    return sum(_slices_in_subtree(s, c, level + 1, target, size) for c in s.children(d))


def _descend(s: State, fit_level: int, domains: list[int]) -> list[int] | None:
    """Phase 2b: walk down to the leaves, filling children greedily with best fit last."""
    tree, req = s.tree, s.req
    n_levels = len(tree.levels)
    lc = s.leader_count
    current = _update_counts(s, domains, req.count, lc, req.slice_size, True)
    level = fit_level
    while level < min(n_levels - 1, req.slice_level):
        if current is None:
            return None
        lower = [c for d in current for c in s.children(d)]
        current = _update_counts(s, s.sorted_plain(lower), req.count, lc, req.slice_size, True)
        level += 1
    while level < n_levels - 1:
        if current is None:
            return None
        size = req.slice_size
        if level >= req.slice_level:
            size = req.inner_sizes[level + 1] or 1
        nxt: list[int] = []
        for d in current:
            kids = s.sorted_plain(list(s.children(d)))
            if size > 1:
                for k in kids:
                    s.sl[k] = s.st[k] // size
                    s.slwl[k] = s.swl[k] // size
            part = _update_counts(s, kids, s.st[d], s.ld[d], size, size > 1)
            if part is None:
                return None
            nxt.extend(part)
        current = nxt
        level += 1
    return current


def _update_counts(
    s: State, domains: list[int], count: int, leaders: int, size: int, slices: bool
) -> list[int] | None:
    """updateCountsToMinimumGeneric; None is Kueue's "code assumptions violated"."""
    chosen: list[int] = []
    remaining = count // size if slices else count
    prim, wl = (s.sl, s.slwl) if slices else (s.st, s.swl)
    factor = size if slices else 1
    order = s.prioritize_leader(domains, remaining, leaders, slices)
    i = 0
    while leaders > 0 and i < len(order):
        dom = order[i]
        if s.best_fit and wl[dom] >= remaining and s.ld[dom] >= leaders:
            dom = (
                s.best_fit_slices(order[i:], remaining, leaders)
                if slices
                else s.best_fit_pods(order[i:], remaining, leaders)
            )
        chosen.append(dom)
        if wl[dom] >= remaining and s.ld[dom] >= leaders:
            prim[dom] = remaining
            s.ld[dom] = leaders
            s.st[dom] = remaining * factor
            return chosen
        wl[dom] = min(wl[dom], remaining)
        s.ld[dom] = min(s.ld[dom], leaders)
        prim[dom] = wl[dom]
        s.st[dom] = wl[dom] * factor
        leaders -= s.ld[dom]
        remaining -= wl[dom]
        i += 1
    rest = order[i:]
    for i, first in enumerate(rest):
        dom = first
        if s.best_fit and prim[dom] >= remaining:
            dom = (
                s.best_fit_slices(rest[i:], remaining, 0)
                if slices
                else s.best_fit_pods(rest[i:], remaining, 0)
            )
        s.ld[dom] = 0
        chosen.append(dom)
        if prim[dom] >= remaining:
            if slices:
                s.sl[dom] = remaining
            s.st[dom] = remaining * factor
            return chosen
        if slices:
            s.st[dom] = s.sl[dom] * size
        remaining -= prim[dom]
    return None


def _collect(s: State, leaves: list[int], result: RawResult) -> None:
    """buildAssignment: leaves in level-value order; leaders are the leaves holding one."""
    leaf0 = s.tree.leaf_offset
    ordered = sorted(leaves)
    if s.leader_count:
        for d in ordered:
            if s.ld[d] > 0:
                result.leader_leaves.append(d - leaf0)
                result.leader_counts.append(s.ld[d])
    for d in ordered:
        if s.st[d] > 0:
            result.worker_leaves.append(d - leaf0)
            result.worker_counts.append(s.st[d])
