# cython: language_level=3
"""Phase 2 of the compiled engine: Kueue's findLevelWithFitDomains (BestFit, LeastFreeCapacity,
the preferred climb, the top-level spread) and the descent that fills children greedily with
best fit for the last chunk. Mirrors ``scorer._reference`` step for step."""

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from scorer._counts cimport aggregate, fill_leaves, level_table
from scorer._order cimport best_fit, prioritize_leader, sort_domains
from scorer._types cimport ST_FAILED, ST_FIT, ST_NO_DOMAINS, ST_NOT_FIT, Outcome, Request, State, Tree

from scorer.request import EngineError


cdef int64_t slices_in_subtree(const Tree* t, const State* s, int32_t d, int level, int target,
                               int64_t size) noexcept nogil:
    cdef int64_t total = 0
    cdef int32_t c
    if level == target:
        return s.st[d] // size
    for c in range(t.child_start[d], t.child_end[d]):
        total += slices_in_subtree(t, s, c, level + 1, target, size)
    return total


cdef int not_fit(const Tree* t, const Request* r, const State* s, Outcome* o, int search,
                 int64_t fit, int64_t total) noexcept nogil:
    cdef int32_t d, best = -1
    cdef int i
    o.status = ST_NOT_FIT
    o.level = search
    o.fit_count = fit
    o.total = total
    if r.n_layers > 0:
        for d in range(t.level_offsets[search], t.level_offsets[search + 1]):
            if best < 0 or s.sl[d] > s.sl[best] or (s.sl[d] == s.sl[best] and t.id_rank[d] < t.id_rank[best]):
                best = d
        for i in range(r.n_layers):
            o.layer_fits[i] = slices_in_subtree(t, s, best, search, r.layer_levels[i], r.layer_sizes[i])
    return -1


cdef int spread(const Tree* t, const Request* r, State* s, Outcome* o, int search, int n,
                int64_t slice_count) noexcept nogil:
    """No single domain holds it: the leader first, then workers greedily. Ordered list in s.a."""
    cdef int32_t* ordered = s.a
    cdef int32_t* chosen = s.b
    cdef int32_t* rest = s.c
    cdef int n_chosen = 0, i, n_rest = 0
    cdef int64_t remaining = slice_count
    cdef int32_t d, lead = -1
    cdef bint capable = False
    if s.leader_count:
        for i in range(n):
            if s.ld[ordered[i]] > 0:
                capable = True
        if not capable:
            return not_fit(t, r, s, o, search, 0, slice_count)
        prioritize_leader(s, ordered, n, remaining, s.leader_count, True)
        lead = ordered[0]
        if s.best_fit and s.slwl[lead] >= remaining:
            lead = best_fit(s, ordered, n, remaining, s.slwl, s.leader_count)
        chosen[n_chosen] = lead
        n_chosen += 1
        remaining -= s.slwl[lead]
    for i in range(n):
        if ordered[i] != lead:
            rest[n_rest] = ordered[i]
            n_rest += 1
    sort_domains(s, rest, n_rest, False)
    i = 0
    while remaining > 0 and i < n_rest:
        d = rest[i]
        if s.best_fit and s.sl[d] >= remaining:
            d = best_fit(s, rest + i, n_rest - i, remaining, s.sl, 0)
        chosen[n_chosen] = d
        n_chosen += 1
        remaining -= s.sl[d]
        i += 1
    if remaining > 0:
        return not_fit(t, r, s, o, search, slice_count - remaining, slice_count)
    o.level = search
    return n_chosen


cdef int find_level(const Tree* t, const Request* r, State* s, Outcome* o) noexcept nogil:
    """findLevelWithFitDomains. Fit domains land in s.b; returns their number or -1."""
    cdef int search = r.requested_level, n, i
    cdef int32_t top, cand
    cdef int64_t slice_count = r.count // r.slice_size, lc = s.leader_count
    while True:
        n = t.level_offsets[search + 1] - t.level_offsets[search]
        if n == 0:
            o.status = ST_NO_DOMAINS
            o.level = search
            return -1
        for i in range(n):
            s.a[i] = t.level_offsets[search] + i
        sort_domains(s, s.a, n, True)
        top = s.a[0]
        if s.best_fit and s.slwl[top] >= slice_count and s.ld[top] >= lc:
            top = best_fit(s, s.a, n, slice_count, s.slwl if lc > 0 else s.sl, lc)
        if not s.best_fit:
            for i in range(n):
                cand = s.a[i]
                if s.slwl[cand] >= slice_count and s.ld[cand] >= lc:
                    s.b[0] = cand
                    o.level = search
                    return 1
            if r.required:
                return not_fit(t, r, s, o, search, s.st[s.a[n - 1]], slice_count)
        if s.slwl[top] >= slice_count and s.ld[top] >= lc:
            s.b[0] = top
            o.level = search
            return 1
        if r.required:
            return not_fit(t, r, s, o, search, s.sl[top], slice_count)
        if search > 0 and not r.unconstrained:
            search -= 1
            continue
        return spread(t, r, s, o, search, n, slice_count)


# ---------------------------------------------------------------- phase 2b

cdef int update_counts(State* s, const int32_t* inp, int n, int64_t count, int64_t leaders, int64_t size,
                       bint slices, int32_t* out) noexcept nogil:
    """updateCountsToMinimumGeneric: the leader's domain first, then workers; -1 is Kueue's
    "code assumptions violated"."""
    cdef int64_t remaining = count // size if slices else count
    cdef int64_t* prim = s.sl if slices else s.st
    cdef int64_t* wl = s.slwl if slices else s.swl
    cdef int64_t factor = size if slices else 1
    cdef int n_out = 0, i, n_rest = n
    cdef int32_t dom
    cdef int32_t* rest = s.d
    memcpy(rest, inp, n * sizeof(int32_t))
    prioritize_leader(s, rest, n, remaining, leaders, slices)
    i = 0
    while leaders > 0 and i < n:
        dom = rest[i]
        if s.best_fit and wl[dom] >= remaining and s.ld[dom] >= leaders:
            dom = best_fit(s, rest + i, n - i, remaining, wl, leaders)
        out[n_out] = dom
        n_out += 1
        if wl[dom] >= remaining and s.ld[dom] >= leaders:
            prim[dom] = remaining
            s.ld[dom] = leaders
            s.st[dom] = remaining * factor
            return n_out
        if wl[dom] > remaining:
            wl[dom] = remaining
        if s.ld[dom] > leaders:
            s.ld[dom] = leaders
        prim[dom] = wl[dom]
        s.st[dom] = wl[dom] * factor
        leaders -= s.ld[dom]
        remaining -= wl[dom]
        i += 1
    rest += i
    n_rest = n - i
    for i in range(n_rest):
        dom = rest[i]
        if s.best_fit and prim[dom] >= remaining:
            dom = best_fit(s, rest + i, n_rest - i, remaining, prim, 0)
        s.ld[dom] = 0
        out[n_out] = dom
        n_out += 1
        if prim[dom] >= remaining:
            if slices:
                s.sl[dom] = remaining
            s.st[dom] = remaining * factor
            return n_out
        if slices:
            s.st[dom] = s.sl[dom] * size
        remaining -= prim[dom]
    return -1


cdef int _overflow(int need, int cap) except -2 nogil:
    with gil:
        raise EngineError(f"scorer._core: working buffer overflow ({need} domains, room for {cap})")


cdef int descend(const Tree* t, const Request* r, State* s, int fit_level, int n_fit, Outcome* o) except -2 nogil:
    """Walk from the fit domains (in s.b) down to the leaves; the leaves end in o.final.

    -1 is Kueue's "code assumptions violated" (from update_counts); a buffer that would
    overflow raises EngineError instead, so it can never pass for a placement."""
    cdef int32_t* cur = s.c
    cdef int32_t* nxt = s.b
    cdef int32_t* swap
    cdef int n_cur, n_next, n_kids, part, level = fit_level, j, k
    cdef int32_t d, c
    cdef int64_t size
    cdef int last = t.n_levels - 1
    cdef int stop = last if last < r.slice_level else r.slice_level
    n_cur = update_counts(s, s.b, n_fit, r.count, s.leader_count, r.slice_size, True, cur)
    while level < stop:
        if n_cur < 0:
            return -1
        n_kids = 0
        for j in range(n_cur):
            d = cur[j]
            for c in range(t.child_start[d], t.child_end[d]):
                if n_kids >= s.cap:
                    return _overflow(n_kids + 1, s.cap)
                s.a[n_kids] = c
                n_kids += 1
        sort_domains(s, s.a, n_kids, False)
        n_cur = update_counts(s, s.a, n_kids, r.count, s.leader_count, r.slice_size, True, cur)
        level += 1
    while level < last:
        if n_cur < 0:
            return -1
        size = r.slice_size
        if level >= r.slice_level:
            size = r.inner_sizes[level + 1] if r.inner_sizes[level + 1] else 1
        n_next = 0
        for j in range(n_cur):
            d = cur[j]
            n_kids = t.child_end[d] - t.child_start[d]
            for k in range(n_kids):
                s.a[k] = t.child_start[d] + k
            sort_domains(s, s.a, n_kids, False)
            if size > 1:
                for k in range(n_kids):
                    c = s.a[k]
                    s.sl[c] = s.st[c] // size
                    s.slwl[c] = s.swl[c] // size
            if n_next + n_kids > s.cap:
                return _overflow(n_next + n_kids, s.cap)
            part = update_counts(s, s.a, n_kids, s.st[d], s.ld[d], size, size > 1, nxt + n_next)
            if part < 0:
                return -1
            n_next += part
        swap = cur
        cur = nxt
        nxt = swap
        n_cur = n_next
        level += 1
    if n_cur < 0:
        return -1
    memcpy(o.final, cur, n_cur * sizeof(int32_t))
    return n_cur


cdef int run(const Tree* t, const Request* r, State* s, const int64_t* free, Outcome* o) except -1 nogil:
    cdef int n_fit, n_final
    fill_leaves(t, r, s, free, o)
    aggregate(t, r, s)
    level_table(t, r, s, o)
    n_fit = find_level(t, r, s, o)
    if n_fit < 0:
        return 0
    n_final = descend(t, r, s, o.level, n_fit, o)
    if n_final < 0:
        o.status = ST_FAILED
        return 0
    o.status = ST_FIT
    o.n_final = n_final
    sort_indexes(s, o.final, n_final)
    return 0


cdef void sort_indexes(State* s, int32_t* xs, int n) noexcept nogil:
    """buildAssignment orders leaves by level values, i.e. by index (insertion: lists are short)."""
    cdef int i, j
    cdef int32_t x
    for i in range(1, n):
        x = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > x:
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = x
