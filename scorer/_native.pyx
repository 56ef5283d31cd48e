# cython: language_level=3
"""Compiled native mode: the kube-scheduler v1.36.5 PodGroup placement over flat arrays.

`place` is the only Python entry point: it checks every array's shape and sign under the GIL,
then `place_native` runs without it. The algorithm mirrors `scorer._reference_native` step by
step (see that module for the scheduler code each step follows); the differential tests hold
the two to the same answers.
"""

from libc.stdint cimport int8_t, int32_t, int64_t

from scorer._reference_native import NativeRaw
from scorer.request import EngineError

NAME = "compiled"

DEF MAX_SCORE = 100


cdef inline int64_t _node_fit(const NativeIn* a, int n) noexcept nogil:
    """NodeResourcesFit's filter, repeated: how many pods of this shape the node takes."""
    cdef int64_t best = -1, k, have
    cdef int r
    for r in range(a.n_req):
        if a.req[r] <= 0:
            continue
        have = a.free[n * a.n_req + r]
        k = have // a.req[r] if have > 0 else 0
        if best < 0 or k < best:
            best = k
    return 0 if best < 0 else best


cdef inline int64_t _most_allocated(const NativeIn* a, int d, int64_t placed) noexcept nogil:
    """resourceAllocationScorer.scorePlacement with the MostAllocated strategy, cpu and memory
    weighted 1: the domain's requested share of its allocatable, integer maths as in Go."""
    cdef int64_t total = 0, weights = 0, capacity, requested
    cdef int r
    for r in range(2):
        capacity = a.alloc[d * 2 + r]
        if capacity == 0:
            continue
        requested = a.used[d * 2 + r] + placed * a.score_req[r]
        if requested > capacity:
            requested = capacity
        total += requested * MAX_SCORE // capacity
        weights += 1
    return 0 if weights == 0 else total // weights


cdef void place_native(const NativeIn* a, NativeOut* o) noexcept nogil:
    cdef int n, d
    cdef int64_t most = 0, total, best_total = -1
    for d in range(a.n_domains):
        o.capacity[d] = 0
    for n in range(a.n_nodes):
        d = a.node_domain[n]
        if d >= 0 and a.node_ok[n]:
            o.capacity[d] += _node_fit(a, n)
    for d in range(a.n_domains):
        o.placed[d] = a.count if o.capacity[d] > a.count else o.capacity[d]
        o.feasible[d] = (
            o.placed[d] > 0
            and a.scheduled + o.placed[d] >= a.min_count
            and (a.required_domain < 0 or a.required_domain == d)
        )
        o.fit_score[d] = 0
        o.pods_score[d] = 0
        if o.feasible[d] and a.scheduled + o.placed[d] > most:
            most = a.scheduled + o.placed[d]
    o.best = -1
    o.n_best = 0
    for d in range(a.n_domains):
        if not o.feasible[d]:
            continue
        o.fit_score[d] = _most_allocated(a, d, o.placed[d])
        o.pods_score[d] = (a.scheduled + o.placed[d]) * MAX_SCORE // most
        total = o.fit_score[d] + o.pods_score[d]
        if total > best_total:
            best_total = total
            o.best = d
            o.n_best = 1
        elif total == best_total:
            o.n_best += 1


def _check(bint ok, str message):
    if not ok:
        raise EngineError(f"scorer._native.place: {message}")


def place(
    const int32_t[::1] node_domain,
    const int8_t[::1] node_ok,
    const int64_t[:, ::1] free,
    const int64_t[::1] req,
    const int64_t[:, ::1] alloc,
    const int64_t[:, ::1] used,
    const int64_t[::1] score_req,
    int64_t count,
    int64_t min_count,
    int64_t scheduled,
    int32_t required_domain,
):
    """Validate every array under the GIL, place without it; a ``NativeRaw`` per domain."""
    cdef int n_nodes = node_domain.shape[0]
    cdef int n_domains = alloc.shape[0]
    cdef int n_req = req.shape[0]
    cdef int i
    _check(node_ok.shape[0] == n_nodes and free.shape[0] == n_nodes, "one row per node")
    _check(free.shape[1] == n_req, "free has one column per requested resource")
    _check(alloc.shape[1] == 2 and used.shape[0] == n_domains and used.shape[1] == 2, "cpu, memory")
    _check(score_req.shape[0] == 2, "score_req is cpu, memory")
    _check(count >= 0 and min_count >= 1 and scheduled >= 0, "counts")
    _check(-1 <= required_domain < max(n_domains, 1), "required_domain")
    for i in range(n_nodes):
        _check(-1 <= node_domain[i] < n_domains, "node_domain")
    for i in range(n_req):
        _check(req[i] >= 0, "requests are not negative")
    capacity = bytearray(8 * n_domains)
    cdef int64_t[::1] cap = memoryview(capacity).cast("q") if n_domains else None
    placed_b = bytearray(8 * n_domains)
    fit_b = bytearray(8 * n_domains)
    pods_b = bytearray(8 * n_domains)
    ok_b = bytearray(n_domains)
    cdef int64_t[::1] placed = memoryview(placed_b).cast("q") if n_domains else None
    cdef int64_t[::1] fit = memoryview(fit_b).cast("q") if n_domains else None
    cdef int64_t[::1] pods = memoryview(pods_b).cast("q") if n_domains else None
    cdef int8_t[::1] ok = memoryview(ok_b).cast("b") if n_domains else None
    cdef NativeIn a
    cdef NativeOut o
    o.best = -1
    o.n_best = 0
    if n_domains:
        a.n_nodes = n_nodes
        a.n_req = n_req
        a.n_domains = n_domains
        a.node_domain = &node_domain[0] if n_nodes else NULL
        a.node_ok = &node_ok[0] if n_nodes else NULL
        a.free = &free[0, 0] if n_nodes and n_req else NULL
        a.req = &req[0] if n_req else NULL
        a.alloc = &alloc[0, 0]
        a.used = &used[0, 0]
        a.score_req = &score_req[0]
        a.count = count
        a.min_count = min_count
        a.scheduled = scheduled
        a.required_domain = required_domain
        o.capacity = &cap[0]
        o.placed = &placed[0]
        o.fit_score = &fit[0]
        o.pods_score = &pods[0]
        o.feasible = &ok[0]
        with nogil:
            place_native(&a, &o)
    return NativeRaw(
        capacity=list(memoryview(capacity).cast("q")),
        placed=list(memoryview(placed_b).cast("q")),
        fit_score=list(memoryview(fit_b).cast("q")),
        pods_score=list(memoryview(pods_b).cast("q")),
        feasible=[bool(x) for x in ok_b],
        best=o.best,
        n_best=o.n_best,
    )
