# cython: language_level=3
"""Compiled engine: Kueue's TAS placement over flat arrays, without the GIL.

`place_group` is the only Python entry point: it checks every array against the tree
under the GIL, then runs the whole placement in `nogil` C over typed memoryviews with
fixed-width integers. The algorithm mirrors `scorer._reference` line for line; the
differential tests hold the two to the same answers.
"""

from libc.stdint cimport int8_t, int32_t, int64_t
from libc.stdlib cimport calloc, free as cfree, malloc
from libc.string cimport memcpy

from scorer.request import RawResult

NAME = "compiled"

cdef int64_t I32MAX = 2147483647

cdef enum:
    ST_FIT = 0
    ST_NOT_FIT = 1
    ST_NO_DOMAINS = 2
    ST_FAILED = 3
    EXCL_SELECTOR = 2
    EXCL_AFFINITY = 3


# ---------------------------------------------------------------- ordering

cdef inline bint less_leader(const State* s, int32_t a, int32_t b) noexcept nogil:
    if s.ld[a] != s.ld[b]:
        return s.ld[a] > s.ld[b]
    if s.slwl[a] != s.slwl[b]:
        if s.best_fit:
            return s.slwl[a] > s.slwl[b]
        return s.slwl[a] < s.slwl[b]
    if s.swl[a] != s.swl[b]:
        return s.swl[a] < s.swl[b]
    return a < b


cdef inline bint less_plain(const State* s, int32_t a, int32_t b) noexcept nogil:
    if s.sl[a] != s.sl[b]:
        if s.best_fit:
            return s.sl[a] > s.sl[b]
        return s.sl[a] < s.sl[b]
    if s.st[a] != s.st[b]:
        return s.st[a] < s.st[b]
    return a < b


cdef inline bint less(const State* s, int32_t a, int32_t b, bint with_leader) noexcept nogil:
    if with_leader:
        return less_leader(s, a, b)
    return less_plain(s, a, b)


cdef void sort_domains(State* s, int32_t* xs, int n, bint with_leader) noexcept nogil:
    """Bottom-up merge sort; the order is total (index breaks ties), so any sort agrees."""
    cdef int width = 1, lo, mid, hi, p, q, k
    cdef int32_t* src = xs
    cdef int32_t* dst = s.tmp
    cdef int32_t* t
    if n < 2:
        return
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            p = lo
            q = mid
            k = lo
            while p < mid and q < hi:
                if less(s, src[q], src[p], with_leader):
                    dst[k] = src[q]
                    q += 1
                else:
                    dst[k] = src[p]
                    p += 1
                k += 1
            while p < mid:
                dst[k] = src[p]
                p += 1
                k += 1
            while q < hi:
                dst[k] = src[q]
                q += 1
                k += 1
            lo += 2 * width
        t = src
        src = dst
        dst = t
        width *= 2
    if src != xs:
        memcpy(xs, src, n * sizeof(int32_t))


cdef inline int32_t best_fit(const State* s, const int32_t* xs, int n, int64_t needed, const int64_t* values,
                             int64_t leaders) noexcept nogil:
    """The first domain with the smallest value still >= needed (holding the leader, if one
    is still to place), else the first one."""
    cdef int32_t best = xs[0]
    cdef int64_t best_value = 0, v
    cdef bint found = False
    cdef int i
    for i in range(n):
        v = values[xs[i]]
        if v >= needed and s.ld[xs[i]] >= leaders and (not found or v < best_value):
            best = xs[i]
            best_value = v
            found = True
    return best


cdef int32_t leader_domain(const State* s, const int32_t* xs, int n, int64_t remaining, int64_t leaders,
                           bint slices) noexcept nogil:
    """A leader-capable domain whose worker penalty fits the slack (Kueue #13383)."""
    cdef const int64_t* prim = s.sl if slices else s.st
    cdef const int64_t* wl = s.slwl if slices else s.swl
    cdef int64_t slack = -remaining, best_value = 0
    cdef int i
    cdef int32_t d, first = -1, best = -1, capable = -1
    for i in range(n):
        slack += prim[xs[i]]
    for i in range(n):
        d = xs[i]
        if capable < 0 and s.ld[d] > 0:
            capable = d
        if s.ld[d] < leaders or (wl[d] < remaining and prim[d] - wl[d] > slack):
            continue
        if first < 0:
            first = d
        if s.best_fit and wl[d] >= remaining and (best < 0 or wl[d] < best_value):
            best = d
            best_value = wl[d]
    if best >= 0:
        return best
    if first >= 0:
        return first
    return capable if capable >= 0 else xs[0]


# ---------------------------------------------------------------- phase 1

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


# ---------------------------------------------------------------- phase 2a

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
        lead = leader_domain(s, ordered, n, remaining, s.leader_count, True)
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
    cdef int n_out = 0, i, n_rest = n, j
    cdef int32_t dom, lead
    cdef int32_t* rest = s.d
    memcpy(rest, inp, n * sizeof(int32_t))
    while leaders > 0 and n_rest > 0:
        lead = leader_domain(s, rest, n_rest, remaining, leaders, slices)
        out[n_out] = lead
        n_out += 1
        if wl[lead] >= remaining and s.ld[lead] >= leaders:
            prim[lead] = remaining
            s.ld[lead] = leaders
            s.st[lead] = remaining * factor
            return n_out
        if wl[lead] > remaining:
            wl[lead] = remaining
        if s.ld[lead] > leaders:
            s.ld[lead] = leaders
        s.st[lead] = wl[lead] * factor
        leaders -= s.ld[lead]
        remaining -= wl[lead]
        j = 0
        for i in range(n_rest):
            if rest[i] != lead:
                rest[j] = rest[i]
                j += 1
        n_rest = j
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


cdef int descend(const Tree* t, const Request* r, State* s, int fit_level, int n_fit, Outcome* o) noexcept nogil:
    """Walk from the fit domains (in s.b) down to the leaves; the leaves end in o.final."""
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
                    return -1
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
                return -1
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


cdef void run(const Tree* t, const Request* r, State* s, const int64_t* free, Outcome* o) noexcept nogil:
    cdef int n_fit, n_final
    fill_leaves(t, r, s, free, o)
    aggregate(t, r, s)
    level_table(t, r, s, o)
    n_fit = find_level(t, r, s, o)
    if n_fit < 0:
        return
    n_final = descend(t, r, s, o.level, n_fit, o)
    if n_final < 0:
        o.status = ST_FAILED
        return
    o.status = ST_FIT
    o.n_final = n_final
    sort_indexes(s, o.final, n_final)


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


# ---------------------------------------------------------------- the Python edge

def _check(bint ok, str message):
    if not ok:
        raise ValueError(f"scorer._core.place_group: {message}")


cdef bint _ranges_ok(const int32_t[::1] start, const int32_t[::1] end, const int32_t[::1] taint_class,
                     int n, int n_leaves, int n_classes):
    cdef int i
    for i in range(n):
        if start[i] < 0 or start[i] > end[i] or end[i] > n:
            return False
    for i in range(n_leaves):
        if taint_class[i] < 0 or taint_class[i] >= n_classes:
            return False
    return True


cdef bint _request_ok(const int32_t[::1] req_col, const int64_t[::1] req_val, const int64_t[::1] leader_val,
                      const int32_t[::1] inner, const int32_t[::1] layer_levels, const int32_t[::1] layer_sizes,
                      int n_res, int n_levels):
    cdef int i
    for i in range(req_col.shape[0]):
        if req_col[i] < -1 or req_col[i] >= n_res or req_val[i] < 0:
            return False
    for i in range(leader_val.shape[0]):
        if leader_val[i] < 0:
            return False
    for i in range(inner.shape[0]):
        if inner[i] < 0:
            return False
    for i in range(layer_levels.shape[0]):
        if layer_levels[i] < 0 or layer_levels[i] >= n_levels or layer_sizes[i] < 1:
            return False
    return True


def place_group(tree, free, req):
    """Place one PodSet or leader+workers group; the same contract as scorer._reference.

    Every array the nogil core trusts is checked here, under the GIL, in typed loops.
    """
    cdef const int32_t[::1] offsets = tree.level_offsets
    cdef const int32_t[::1] child_start = tree.child_start
    cdef const int32_t[::1] child_end = tree.child_end
    cdef const int32_t[::1] id_rank = tree.id_rank
    cdef const int32_t[::1] taint_class = tree.taint_class
    cdef const int64_t[::1] free_v = free
    cdef const int32_t[::1] req_col = req.req_col
    cdef const int64_t[::1] req_val = req.req_val
    cdef const int64_t[::1] leader_val = req.leader_val
    cdef const int32_t[::1] inner = req.inner_sizes
    cdef const int32_t[::1] layer_levels = req.layer_levels
    cdef const int32_t[::1] layer_sizes = req.layer_sizes
    cdef const int8_t[::1] class_excl = req.class_excluded
    cdef const int8_t[::1] label_excl = req.label_excl
    cdef Tree t
    cdef Request r
    cdef State s
    cdef Outcome o
    cdef int n_classes = len(tree.taint_classes)
    t.n_levels = len(tree.levels)
    _check(t.n_levels >= 1 and offsets.shape[0] == t.n_levels + 1, "level_offsets must have one entry per level plus one")
    t.n_domains = offsets[t.n_levels]
    t.n_leaves = t.n_domains - offsets[t.n_levels - 1]
    t.n_resources = len(tree.resources)
    _check(child_start.shape[0] == t.n_domains and child_end.shape[0] == t.n_domains
           and id_rank.shape[0] == t.n_domains, "child ranges and id ranks need one entry per domain")
    _check(taint_class.shape[0] == t.n_leaves, "taint_class must have one entry per leaf")
    _check(free_v.shape[0] == <Py_ssize_t>t.n_leaves * t.n_resources, "free must be leaves x resources")
    _check(_ranges_ok(child_start, child_end, taint_class, t.n_domains, t.n_leaves, n_classes),
           "child ranges or taint classes out of bounds")
    _check(req_col.shape[0] >= 1 and req_val.shape[0] == req_col.shape[0], "req_col and req_val: same, non-zero length")
    _check(leader_val.shape[0] in (0, req_col.shape[0]), "leader_val must be empty or match req_val")
    _check(inner.shape[0] == t.n_levels, "inner_sizes needs one entry per level")
    _check(layer_levels.shape[0] == layer_sizes.shape[0], "layer_levels and layer_sizes differ in length")
    _check(_request_ok(req_col, req_val, leader_val, inner, layer_levels, layer_sizes, t.n_resources, t.n_levels),
           "request arrays out of range (columns, negative requests, layers)")
    _check(req.count >= 0 and req.slice_size >= 1, "count must be >= 0 and slice_size >= 1")
    _check(0 <= req.requested_level < t.n_levels and 0 <= req.slice_level < t.n_levels, "level index out of range")
    _check(class_excl.shape[0] == n_classes, "class_excluded needs one entry per taint class")
    _check(label_excl.shape[0] in (0, t.n_leaves), "label_excl must be empty or one entry per leaf")
    t.level_offsets = &offsets[0]
    t.child_start = &child_start[0] if t.n_domains else NULL
    t.child_end = &child_end[0] if t.n_domains else NULL
    t.id_rank = &id_rank[0] if t.n_domains else NULL
    t.taint_class = &taint_class[0] if t.n_leaves else NULL
    r.n_req = len(req.req_col)
    r.req_col = &req_col[0]
    r.req_val = &req_val[0]
    r.leader_val = &leader_val[0] if leader_val.shape[0] else NULL
    r.count = req.count
    r.slice_size = req.slice_size
    r.requested_level = req.requested_level
    r.slice_level = req.slice_level
    r.inner_sizes = &inner[0]
    r.required = req.required
    r.unconstrained = req.unconstrained
    r.n_layers = layer_levels.shape[0]
    r.layer_levels = &layer_levels[0] if r.n_layers else NULL
    r.layer_sizes = &layer_sizes[0] if r.n_layers else NULL
    r.check_nodes = req.check_nodes
    r.class_excluded = &class_excl[0] if class_excl.shape[0] else NULL
    r.label_excl = &label_excl[0] if label_excl.shape[0] else NULL
    if not _allocate(&s, &o, t.n_domains, t.n_levels, n_classes, r.n_req, r.n_layers):
        _release(&s, &o)
        raise MemoryError("scorer._core.place_group: cannot allocate working memory")
    s.best_fit = not r.unconstrained
    s.leader_count = 1 if r.leader_val != NULL else 0
    try:
        with nogil:
            run(&t, &r, &s, &free_v[0] if free_v.shape[0] else NULL, &o)
        return _result(&t, &r, &s, &o, n_classes)
    finally:
        _release(&s, &o)


cdef bint _allocate(State* s, Outcome* o, int n, int n_levels, int n_classes, int n_req, int n_layers) noexcept:
    cdef int cap = 2 * n + 16
    s.cap = cap
    s.st = <int64_t*>calloc(n + 1, sizeof(int64_t))
    s.swl = <int64_t*>calloc(n + 1, sizeof(int64_t))
    s.sl = <int64_t*>calloc(n + 1, sizeof(int64_t))
    s.slwl = <int64_t*>calloc(n + 1, sizeof(int64_t))
    s.ld = <int64_t*>calloc(n + 1, sizeof(int64_t))
    s.a = <int32_t*>malloc(cap * sizeof(int32_t))
    s.b = <int32_t*>malloc(cap * sizeof(int32_t))
    s.c = <int32_t*>malloc(cap * sizeof(int32_t))
    s.d = <int32_t*>malloc(cap * sizeof(int32_t))
    s.tmp = <int32_t*>malloc(cap * sizeof(int32_t))
    o.status = ST_FIT
    o.level = 0
    o.fit_count = 0
    o.total = 0
    o.n_final = 0
    o.total_nodes = 0
    o.selector_count = 0
    o.affinity_count = 0
    o.final = <int32_t*>malloc(cap * sizeof(int32_t))
    o.taint_counts = <int64_t*>calloc(n_classes + 1, sizeof(int64_t))
    o.resource_counts = <int64_t*>calloc(n_req + 1, sizeof(int64_t))
    o.layer_fits = <int64_t*>calloc(n_layers + 1, sizeof(int64_t))
    o.level_max_pods = <int64_t*>calloc(n_levels, sizeof(int64_t))
    o.level_max_slices = <int64_t*>calloc(n_levels, sizeof(int64_t))
    o.level_fitting = <int64_t*>calloc(n_levels, sizeof(int64_t))
    o.level_best = <int64_t*>calloc(n_levels, sizeof(int64_t))
    return (s.st != NULL and s.swl != NULL and s.sl != NULL and s.slwl != NULL and s.ld != NULL
            and s.a != NULL and s.b != NULL and s.c != NULL and s.d != NULL and s.tmp != NULL and o.final != NULL
            and o.taint_counts != NULL and o.resource_counts != NULL and o.layer_fits != NULL
            and o.level_max_pods != NULL and o.level_max_slices != NULL and o.level_fitting != NULL
            and o.level_best != NULL)


cdef void _release(State* s, Outcome* o) noexcept:
    cfree(s.st)
    cfree(s.swl)
    cfree(s.sl)
    cfree(s.slwl)
    cfree(s.ld)
    cfree(s.a)
    cfree(s.b)
    cfree(s.c)
    cfree(s.d)
    cfree(s.tmp)
    cfree(o.final)
    cfree(o.taint_counts)
    cfree(o.resource_counts)
    cfree(o.layer_fits)
    cfree(o.level_max_pods)
    cfree(o.level_max_slices)
    cfree(o.level_fitting)
    cfree(o.level_best)


cdef object _result(const Tree* t, const Request* r, const State* s, const Outcome* o, int n_classes):
    cdef int i, level
    cdef int32_t d, leaf0 = t.level_offsets[t.n_levels - 1]
    res = RawResult(status=o.status, level=o.level, fit_count=o.fit_count, total=o.total)
    res.total_nodes = o.total_nodes
    res.selector_count = o.selector_count
    res.affinity_count = o.affinity_count
    res.taint_counts = [o.taint_counts[i] for i in range(n_classes)]
    res.resource_counts = [o.resource_counts[i] for i in range(r.n_req)]
    if o.status == ST_NOT_FIT:
        res.layer_fits = [o.layer_fits[i] for i in range(r.n_layers)]
    for level in range(t.n_levels):
        res.level_max_pods.append(o.level_max_pods[level])
        res.level_max_slices.append(o.level_max_slices[level])
        res.level_fitting.append(o.level_fitting[level])
        res.level_best.append(o.level_best[level])
    if o.status == ST_FIT:
        if s.leader_count:
            for i in range(o.n_final):
                d = o.final[i]
                if s.ld[d] > 0:
                    res.leader_leaves.append(d - leaf0)
                    res.leader_counts.append(s.ld[d])
        for i in range(o.n_final):
            d = o.final[i]
            if s.st[d] > 0:
                res.worker_leaves.append(d - leaf0)
                res.worker_counts.append(s.st[d])
    return res
