# cython: language_level=3
"""The tree's shape from integer columns, without the GIL: the half of the snapshot build that
is pure arithmetic (`scorer._build` reads the nodes into columns and makes the objects).

Leaves grouped by key, sorted by their level-value ranks (a radix sort: Python's tuple order of
the paths), the domains of each level counted and laid out with parents and child ranges, and
each leaf's capacity summed over its nodes exactly as `scorer.tree.leaf_row` sums it. The
contract is `_layout.pxd`; every buffer is sized and checked by the caller first.
"""

from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, int64_t


cdef Py_ssize_t group_leaves(int32_t[::1] key, int32_t[::1] order, int32_t[::1] reps, int32_t[::1] slot,
                             int32_t[::1] per_key) noexcept nogil:
    """Leaf representatives in view order (slot[key] marks a key seen), members per key."""
    cdef Py_ssize_t j, n = 0
    cdef int32_t i, k
    for j in range(order.shape[0]):
        i = order[j]
        k = key[i]
        if slot[k] < 0:
            slot[k] = 0
            per_key[k] = 0
            reps[n] = i
            n += 1
        per_key[k] += 1
    return n


cdef void leaf_members(int32_t[::1] key, int32_t[::1] order, int32_t[::1] reps, Py_ssize_t n,
                       int32_t[::1] slot, int32_t[::1] per_key, int32_t[::1] members,
                       int32_t[::1] start) noexcept nogil:
    cdef Py_ssize_t j
    cdef int32_t k
    start[0] = 0
    for j in range(n):
        k = key[reps[j]]
        start[j + 1] = start[j] + per_key[k]
        slot[k] = start[j]  # from here on: where the leaf's next member goes
    for j in range(order.shape[0]):
        k = key[order[j]]
        members[slot[k]] = order[j]
        slot[k] += 1



cdef void sort_by_rank(int32_t* items, Py_ssize_t m, const int32_t* rank, int n_levels,
                       const int32_t* sizes, int32_t* tmp, int32_t* counts) noexcept nogil:
    cdef int level
    cdef Py_ssize_t j, v, total
    cdef int32_t* swap
    cdef int32_t* src = items
    cdef int32_t* dst = tmp
    if m < 2:
        return
    for level in range(n_levels - 1, -1, -1):
        for v in range(sizes[level] + 1):
            counts[v] = 0
        for j in range(m):
            counts[rank[src[j] * n_levels + level] + 1] += 1
        total = 0
        for v in range(1, sizes[level] + 1):
            total += counts[v]
            counts[v] = total
        for j in range(m):
            v = rank[src[j] * n_levels + level]
            dst[counts[v]] = src[j]
            counts[v] += 1
        swap = src
        src = dst
        dst = swap
    if src != items:
        for j in range(m):
            items[j] = src[j]


cdef void count_domains(const int32_t* leaves, Py_ssize_t n_leaves, const int32_t* rank, int n_levels,
                        int32_t* diff, int32_t* offsets) noexcept nogil:
    cdef Py_ssize_t j
    cdef int d, last = n_levels - 1
    cdef const int32_t* a
    cdef const int32_t* b
    for d in range(n_levels + 1):
        offsets[d] = 0
    for j in range(n_leaves):  # diff[j]: the first level where leaf j leaves leaf j - 1's domain
        d = 0
        if j > 0:
            a, b = rank + leaves[j - 1] * n_levels, rank + leaves[j] * n_levels
            while d < last and a[d] == b[d]:
                d += 1
        diff[j] = d
        for d in range(diff[j], n_levels):
            offsets[d + 1] += 1
    for d in range(n_levels):
        offsets[d + 1] += offsets[d]


cdef void lay_out(Py_ssize_t n_leaves, const int32_t* diff, int n_levels, const int32_t* offsets,
                  int32_t* pos, int32_t* parent, int32_t* child_start, int32_t* child_end,
                  int32_t* first_leaf) noexcept nogil:
    cdef Py_ssize_t j
    cdef int d
    cdef int32_t dom, up
    for d in range(n_levels):
        pos[d] = offsets[d] - 1  # the last domain made at level d
    for j in range(n_leaves):  # domains of a level are made in order, each under the last one above
        for d in range(diff[j], n_levels):
            pos[d] += 1
            dom = pos[d]
            first_leaf[dom] = <int32_t>j
            parent[dom] = -1
            if d > 0:
                up = pos[d - 1]
                parent[dom] = up
                if child_end[up] == 0:
                    child_start[up] = dom
                child_end[up] = dom + 1


cdef bint fill_capacity(const int32_t* members, const int32_t* member_start, Py_ssize_t n_leaves,
                        const int32_t* col_rid, int n_cols, const int64_t* alloc, const int64_t* used,
                        int n_res, bint with_usage, int64_t* cap, int64_t* free) noexcept nogil:
    cdef Py_ssize_t j, a, b, at, node
    cdef int col
    cdef int64_t have, held = 0
    for j in range(n_leaves):
        a, b = member_start[j], member_start[j + 1]
        for col in range(n_cols):
            at = j * n_cols + col
            if b - a == 1:  # the usual leaf: one node, no sums
                node = members[a] * <Py_ssize_t>n_res + col_rid[col]
                have, held = alloc[node], used[node]
            elif not _sum(members, a, b, alloc, n_res, col_rid[col], &have):
                return False
            elif with_usage and not _sum(members, a, b, used, n_res, col_rid[col], &held):
                return False
            cap[at] = have
            if not with_usage:
                free[at] = have
            elif (held > 0 and have < INT64_MIN + held) or (held < 0 and have > INT64_MAX + held):
                return False  # past int64: array("q") refuses it, and the twin says so
            else:
                free[at] = have - held
    return True


cdef inline bint _sum(const int32_t* members, Py_ssize_t a, Py_ssize_t b, const int64_t* values,
                      int n_res, int32_t rid, int64_t* out) noexcept nogil:
    """The leaf's sum saturated at int64 max, as leaf_row takes it; False where an int64 sum
    is not that exactly (past int64 with a negative term somewhere)."""
    cdef int64_t total = 0, v
    cdef bint over = False, negative = False
    cdef Py_ssize_t x
    for x in range(a, b):
        v = values[members[x] * <Py_ssize_t>n_res + rid]
        negative = negative or v < 0
        if over:
            continue
        if v > 0 and total > INT64_MAX - v:
            over = True
        elif v < 0 and total < INT64_MIN - v:
            return False
        else:
            total += v
    if over and negative:
        return False
    out[0] = INT64_MAX if over else total
    return True
