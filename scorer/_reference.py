"""Pure-Python twin of the compiled engine: Kueue's TAS placement, step by step.

This is the readable oracle the tests hold the Cython engine to. It follows Kueue's
``findTopologyAssignment`` (default feature gates: TASProfileMixed and TASMultiLayerTopology
on, TASBalancedPlacement and TASRespectNodeAffinityPreferred off), quirks included: parity
means the same assignment, not a better one. Domains are global indexes; a lower index at
the same level is a smaller level-value path, Kueue's final tie-break.
"""

from __future__ import annotations

from array import array

from scorer.request import (
    EXCLUDED_AFFINITY,
    EXCLUDED_SELECTOR,
    STATUS_FAILED,
    STATUS_FIT,
    STATUS_NO_DOMAINS,
    STATUS_NOT_FIT,
    GroupRequest,
    RawResult,
)
from scorer.tree import Tree

NAME = "reference"
INT32_MAX = 2**31 - 1


class _State:
    """Per-run domain counters, Kueue's ``domain.state`` and friends."""

    def __init__(self, tree: Tree, req: GroupRequest) -> None:
        n = tree.level_offsets[-1]
        self.tree = tree
        self.req = req
        self.st = [0] * n
        self.swl = [0] * n
        self.sl = [0] * n
        self.slwl = [0] * n
        self.ld = [0] * n
        self.best_fit = not req.unconstrained
        self.leader_count = 1 if len(req.leader_val) else 0

    def children(self, d: int) -> range:
        return range(self.tree.child_start[d], self.tree.child_end[d])

    def sorted_with_leader(self, domains: list[int]) -> list[int]:
        sign = -1 if self.best_fit else 1
        return sorted(domains, key=lambda d: (-self.ld[d], sign * self.slwl[d], self.swl[d], d))

    def sorted_plain(self, domains: list[int]) -> list[int]:
        sign = -1 if self.best_fit else 1
        return sorted(domains, key=lambda d: (sign * self.sl[d], self.st[d], d))

    def best_fit_slices(self, domains: list[int], needed: int, leaders: int) -> int:
        return _best_fit(domains, needed, self.slwl if leaders > 0 else self.sl, self.ld, leaders)

    def best_fit_pods(self, domains: list[int], needed: int, leaders: int) -> int:
        return _best_fit(domains, needed, self.swl if leaders > 0 else self.st, self.ld, leaders)

    def leader_domain(self, domains: list[int], remaining: int, leaders: int, slices: bool) -> int:
        """Where the leader goes: a leader-capable domain whose worker penalty fits the slack.

        Placing the leader costs a domain ``prim - with_leader`` workers; the domains' total
        capacity beyond what is still needed is the slack that can absorb it (Kueue #13383).
        Among eligible domains, best fit picks the tightest one that completes the group.
        """
        prim, wl = (self.sl, self.slwl) if slices else (self.st, self.swl)
        slack = sum(prim[d] for d in domains) - remaining
        eligible = [
            d for d in domains if self.ld[d] >= leaders and (wl[d] >= remaining or prim[d] - wl[d] <= slack)
        ]
        if eligible:
            if self.best_fit and any(wl[d] >= remaining for d in eligible):
                return _best_fit(eligible, remaining, wl, self.ld, leaders)
            return eligible[0]
        return next((d for d in domains if self.ld[d] > 0), domains[0])


def _best_fit(domains: list[int], needed: int, values: list[int], ld: list[int], leaders: int) -> int:
    """The first domain with the smallest value still >= needed (holding the leader, if one
    is still to place), else the first domain."""
    best = domains[0]
    found = False
    best_value = 0
    for d in domains:
        v = values[d]
        if v >= needed and ld[d] >= leaders and (not found or v < best_value):
            best, best_value, found = d, v, True
    return best


def _count_in(
    req: GroupRequest, vals: array[int], free: array[int], base: int, minus: array[int] | None
) -> tuple[int, int]:
    """Requests.CountInWithLimitingResource: min over resources, ties to the first name."""
    best = -1
    limiting = -1
    for k in range(len(vals)):
        v = vals[k]
        col = req.req_col[k]
        if v == 0:
            count = INT32_MAX
        elif col < 0:
            count = 0
        else:
            cap = free[base + col] - (minus[k] if minus is not None else 0)
            count = 0 if cap <= 0 else min(cap // v, INT32_MAX)
        if best < 0 or count < best:
            best, limiting = count, k
    return max(best, 0), limiting


def place_group(tree: Tree, free: array[int], req: GroupRequest) -> RawResult:
    s = _State(tree, req)
    result = RawResult(status=STATUS_FIT)
    _fill_leaves(s, free, result)
    _aggregate(s)
    _level_table(s, result)
    found = _find_level(s, req.requested_level, result)
    if found is None:
        return result
    fit_level, domains = found
    leaves = _descend(s, fit_level, domains)
    if leaves is None:
        result.status = STATUS_FAILED
        return result
    _collect(s, leaves, result)
    return result


def _fill_leaves(s: _State, free: array[int], result: RawResult) -> None:
    tree, req = s.tree, s.req
    leaf0 = tree.leaf_offset
    n_res = len(tree.resources)
    result.taint_counts = [0] * len(tree.taint_classes)
    result.resource_counts = [0] * len(req.req_val)
    has_leader = len(req.leader_val) > 0
    for leaf in range(tree.n_leaves):
        result.total_nodes += 1
        if req.check_nodes:
            cls = tree.taint_class[leaf]
            if req.class_excluded[cls]:
                result.taint_counts[cls] += 1
                continue
            if len(req.label_excl) and req.label_excl[leaf]:
                if req.label_excl[leaf] == EXCLUDED_SELECTOR:
                    result.selector_count += 1
                elif req.label_excl[leaf] == EXCLUDED_AFFINITY:
                    result.affinity_count += 1
                continue
        d = leaf0 + leaf
        base = leaf * n_res
        count, limiting = _count_in(req, req.req_val, free, base, None)
        s.st[d] = count
        if count == 0 and limiting >= 0:
            result.resource_counts[limiting] += 1
        if has_leader and _count_in(req, req.leader_val, free, base, None)[0] > 0:
            s.ld[d] = 1
            s.swl[d] = _count_in(req, req.req_val, free, base, req.leader_val)[0]
        else:
            s.swl[d] = _count_in(req, req.req_val, free, base, None)[0]


def _aggregate(s: _State) -> None:
    """fillInCountsHelper, bottom-up: sums, with-leader minima, slice counts at the slice level."""
    tree, req = s.tree, s.req
    n_levels = len(tree.levels)
    ss = req.slice_size
    leader_required = s.leader_count > 0
    if n_levels - 1 == req.slice_level:
        for d in range(tree.leaf_offset, tree.level_offsets[-1]):
            s.sl[d] = s.st[d] // ss
            s.slwl[d] = s.swl[d] // ss
    for level in range(n_levels - 2, -1, -1):
        inner = req.inner_sizes[level + 1]
        for d in range(tree.level_offsets[level], tree.level_offsets[level + 1]):
            cap = slcap = leader = 0
            has = False
            min_diff = min_slice_diff = INT32_MAX
            for c in s.children(d):
                cs, cswl = s.st[c], s.swl[c]
                if inner:
                    cs, cswl = cs // inner * inner, cswl // inner * inner
                cap += cs
                slcap += s.sl[c]
                if not leader_required or s.ld[c] > 0:
                    has = True
                    min_diff = min(cs - cswl, min_diff)
                    min_slice_diff = min(s.sl[c] - s.slwl[c], min_slice_diff)
                leader = max(s.ld[c], leader)
            s.st[d] = cap
            slwl = 0
            if has:
                s.swl[d] = cap - min_diff
                slwl = slcap - min_slice_diff
            else:
                s.swl[d] = 0
            s.ld[d] = leader
            if level == req.slice_level:
                slcap = cap // ss
                slwl = s.swl[d] // ss
            s.sl[d] = slcap
            s.slwl[d] = slwl


def _level_table(s: _State, result: RawResult) -> None:
    """Per level: the most pods and slices one domain holds, and how many hold them all."""
    tree, req = s.tree, s.req
    ss = req.slice_size
    needed = req.count // ss
    lead = s.leader_count > 0
    for level in range(len(tree.levels)):
        max_pods = max_slices = fitting = 0
        best = -1
        for d in range(tree.level_offsets[level], tree.level_offsets[level + 1]):
            if lead and s.ld[d] == 0:
                continue
            pods = s.swl[d] if lead else s.st[d]
            if level <= req.slice_level:
                slices = s.slwl[d] if lead else s.sl[d]
            else:
                slices = pods // ss
            if best < 0 or pods > max_pods:
                best, max_pods = d, pods
            max_slices = max(max_slices, slices)
            if slices >= needed:
                fitting += 1
        result.level_max_pods.append(max_pods)
        result.level_max_slices.append(max_slices)
        result.level_fitting.append(fitting)
        result.level_best.append(best)


def _find_level(s: _State, search: int, result: RawResult) -> tuple[int, list[int]] | None:
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
    s: _State, result: RawResult, search: int, ordered: list[int], slice_count: int
) -> tuple[int, list[int]] | None:
    """No single domain holds it: leaders first, then workers greedily over the rest."""
    chosen: list[int] = []
    remaining = slice_count
    rest = ordered
    if s.leader_count:
        if not any(s.ld[d] > 0 for d in ordered):
            _not_fit(s, result, search, 0, slice_count)
            return None
        lead = s.leader_domain(ordered, remaining, s.leader_count, True)
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


def _not_fit(s: _State, result: RawResult, search: int, fit: int, total: int) -> None:
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


def _slices_in_subtree(s: _State, d: int, level: int, target: int, size: int) -> int:
    if level == target:
        return s.st[d] // size
    return sum(_slices_in_subtree(s, c, level + 1, target, size) for c in s.children(d))


def _descend(s: _State, fit_level: int, domains: list[int]) -> list[int] | None:
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
    s: _State, domains: list[int], count: int, leaders: int, size: int, slices: bool
) -> list[int] | None:
    """updateCountsToMinimumGeneric; None is Kueue's "code assumptions violated"."""
    chosen: list[int] = []
    remaining = count // size if slices else count
    prim, wl = (s.sl, s.slwl) if slices else (s.st, s.swl)
    factor = size if slices else 1
    rest = domains
    while leaders > 0 and rest:
        lead = s.leader_domain(rest, remaining, leaders, slices)
        chosen.append(lead)
        if wl[lead] >= remaining and s.ld[lead] >= leaders:
            prim[lead] = remaining
            s.ld[lead] = leaders
            s.st[lead] = remaining * factor
            return chosen
        wl[lead] = min(wl[lead], remaining)
        s.ld[lead] = min(s.ld[lead], leaders)
        s.st[lead] = wl[lead] * factor
        leaders -= s.ld[lead]
        remaining -= wl[lead]
        rest = [d for d in rest if d != lead]
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


def _collect(s: _State, leaves: list[int], result: RawResult) -> None:
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
