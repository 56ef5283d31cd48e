"""Phase 1 of the pure-Python twin: leaf counts, the roll-up, the per-level table
(the twin of ``_counts.pyx``)."""

from __future__ import annotations

from array import array

from scorer._reference_state import INT32_MAX, State
from scorer.request import EXCLUDED_AFFINITY, EXCLUDED_SELECTOR, GroupRequest, RawResult


def count_in(
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


def fill_leaves(s: State, free: array[int], result: RawResult) -> None:
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
        count, limiting = count_in(req, req.req_val, free, base, None)
        s.st[d] = count
        if count == 0 and limiting >= 0:
            result.resource_counts[limiting] += 1
        if has_leader and count_in(req, req.leader_val, free, base, None)[0] > 0:
            s.ld[d] = 1
            s.swl[d] = count_in(req, req.req_val, free, base, req.leader_val)[0]
        else:
            s.swl[d] = count_in(req, req.req_val, free, base, None)[0]


def aggregate(s: State) -> None:
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


def level_table(s: State, result: RawResult) -> None:
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
