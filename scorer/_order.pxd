# Kueue's domain orderings and best-fit choices, inlined into every engine module that uses them.
# A lower global index at the same level is a smaller level-value path: the final tie-break.

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memmove

from scorer._types cimport State

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


cdef inline void sort_domains(State* s, int32_t* xs, int n, bint with_leader) noexcept nogil:
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


cdef inline void prioritize_leader(const State* s, int32_t* xs, int n, int64_t remaining, int64_t leaders,
                                   bint slices) noexcept nogil:
    """prioritizeLeaderDomain, in place: the first leader-capable domain whose worker penalty fits
    the slack (Kueue #13383) moves to the front; the others keep their order."""
    cdef const int64_t* prim = s.sl if slices else s.st
    cdef const int64_t* wl = s.slwl if slices else s.swl
    cdef int64_t slack = -remaining
    cdef int i
    cdef int32_t d
    if leaders == 0 or n < 2:
        return
    for i in range(n):
        slack += prim[xs[i]]
    for i in range(n):
        d = xs[i]
        if s.ld[d] >= leaders and prim[d] - wl[d] <= slack:
            memmove(xs + 1, xs, i * sizeof(int32_t))
            xs[0] = d
            return
