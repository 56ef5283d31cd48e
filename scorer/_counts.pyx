# cython: language_level=3
"""Phase 1 of the compiled engine: leaf fit counts with Kueue's exclusion stats, the bottom-up
roll-up (with-leader minima, slice counts at the slice level, inner-layer rounding), and the
per-level table. Mirrors ``scorer._reference``'s ``_fill_leaves``, ``_aggregate`` and
``_level_table``."""

from libc.stdint cimport int32_t, int64_t

from scorer._types cimport EXCL_AFFINITY, EXCL_SELECTOR, I32MAX, Outcome, Request, State, Tree


cdef int64_t count_in(const Request* r, const int64_t* vals, const int64_t* free, Py_ssize_t base,
                      const int64_t* minus, int* limiting) noexcept nogil:
    cdef int64_t best = -1, count, cap, v
    cdef int k, col
    limiting[0] = -1
    for k in range(r.n_req):
        v = vals[k]
        col = r.req_col[k]
        if v == 0:
            count = I32MAX
        elif col < 0:
            count = 0
        else:
            cap = free[base + col]
            if minus != NULL:
                cap -= minus[k]
            if cap <= 0:
                count = 0
            else:
                count = cap // v
                if count > I32MAX:
                    count = I32MAX
        if best < 0 or count < best:
            best = count
            limiting[0] = k
    return best if best > 0 else 0


cdef void fill_leaves(const Tree* t, const Request* r, State* s, const int64_t* free, Outcome* o) noexcept nogil:
    cdef int leaf, cls, lim, unused
    cdef int32_t d
    cdef int32_t leaf0 = t.level_offsets[t.n_levels - 1]
    cdef Py_ssize_t base
    cdef int64_t count
    for leaf in range(t.n_leaves):
        o.total_nodes += 1
        if r.check_nodes:
            cls = t.taint_class[leaf]
            if r.class_excluded[cls]:
                o.taint_counts[cls] += 1
                continue
            if r.label_excl != NULL and r.label_excl[leaf] != 0:
                if r.label_excl[leaf] == EXCL_SELECTOR:
                    o.selector_count += 1
                elif r.label_excl[leaf] == EXCL_AFFINITY:
                    o.affinity_count += 1
                continue
        d = leaf0 + leaf
        base = <Py_ssize_t>leaf * t.n_resources
        count = count_in(r, r.req_val, free, base, NULL, &lim)
        s.st[d] = count
        if count == 0 and lim >= 0:
            o.resource_counts[lim] += 1
        if r.leader_val != NULL and count_in(r, r.leader_val, free, base, NULL, &unused) > 0:
            s.ld[d] = 1
            s.swl[d] = count_in(r, r.req_val, free, base, r.leader_val, &unused)
        else:
            s.swl[d] = count


cdef void aggregate(const Tree* t, const Request* r, State* s) noexcept nogil:
    """Bottom-up sums, with-leader minima, slice counts at the slice level."""
    cdef int level, inner
    cdef int32_t d, c
    cdef int64_t ss = r.slice_size, cap, slcap, leader, min_diff, min_slice_diff, cs, cswl, slwl
    cdef bint has, leader_required = s.leader_count > 0
    if t.n_levels - 1 == r.slice_level:
        for d in range(t.level_offsets[t.n_levels - 1], t.n_domains):
            s.sl[d] = s.st[d] // ss
            s.slwl[d] = s.swl[d] // ss
    for level in range(t.n_levels - 2, -1, -1):
        inner = r.inner_sizes[level + 1]
        for d in range(t.level_offsets[level], t.level_offsets[level + 1]):
            cap = 0
            slcap = 0
            leader = 0
            has = False
            min_diff = I32MAX
            min_slice_diff = I32MAX
            for c in range(t.child_start[d], t.child_end[d]):
                cs = s.st[c]
                cswl = s.swl[c]
                if inner:
                    cs = cs // inner * inner
                    cswl = cswl // inner * inner
                cap += cs
                slcap += s.sl[c]
                if not leader_required or s.ld[c] > 0:
                    has = True
                    if cs - cswl < min_diff:
                        min_diff = cs - cswl
                    if s.sl[c] - s.slwl[c] < min_slice_diff:
                        min_slice_diff = s.sl[c] - s.slwl[c]
                if s.ld[c] > leader:
                    leader = s.ld[c]
            s.st[d] = cap
            slwl = 0
            if has:
                s.swl[d] = cap - min_diff
                slwl = slcap - min_slice_diff
            else:
                s.swl[d] = 0
            s.ld[d] = leader
            if level == r.slice_level:
                slcap = cap // ss
                slwl = s.swl[d] // ss
            s.sl[d] = slcap
            s.slwl[d] = slwl


cdef void level_table(const Tree* t, const Request* r, const State* s, Outcome* o) noexcept nogil:
    cdef int level
    cdef int32_t d
    cdef int64_t ss = r.slice_size, needed = r.count // r.slice_size, pods, slices
    cdef int64_t max_pods, max_slices, fitting, best
    cdef bint lead = s.leader_count > 0
    for level in range(t.n_levels):
        max_pods = 0
        max_slices = 0
        fitting = 0
        best = -1
        for d in range(t.level_offsets[level], t.level_offsets[level + 1]):
            if lead and s.ld[d] == 0:
                continue
            pods = s.swl[d] if lead else s.st[d]
            if level <= r.slice_level:
                slices = s.slwl[d] if lead else s.sl[d]
            else:
                slices = pods // ss
            if best < 0 or pods > max_pods:
                best = d
                max_pods = pods
            if slices > max_slices:
                max_slices = slices
            if slices >= needed:
                fitting += 1
        o.level_max_pods[level] = max_pods
        o.level_max_slices[level] = max_slices
        o.level_fitting[level] = fitting
        o.level_best[level] = best
