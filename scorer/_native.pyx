# cython: language_level=3
"""Compiled native mode: the kube-scheduler v1.36.5 PodGroup placement over flat arrays.

`place` is the only Python entry point: it checks every array's shape and sign under the GIL,
then `place_native` runs without it. The algorithm mirrors `scorer._reference_native` step by
step (see that module for the scheduler code each step follows); the differential tests hold
the two to the same answers.
"""

from libc.math cimport fabs
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


cdef void _score(const NativeIn* a, const int64_t* extra, NativeOut* o) noexcept nogil:
    """Feasibility (Permit at minCount) and the two placement scores, from what each domain took;
    ``extra`` is NULL when every pod asks ``score_req``."""
    cdef int d, r
    cdef int64_t most = 0, total, best_total = -1, capacity, requested, sum_s, weights
    for d in range(a.n_domains):
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
        sum_s = 0
        weights = 0
        for r in range(2):
            capacity = a.alloc[d * 2 + r]
            if capacity == 0:
                continue
            if extra != NULL:
                requested = a.used[d * 2 + r] + extra[d * 2 + r]
            else:
                requested = a.used[d * 2 + r] + o.placed[d] * a.score_req[r]
            if requested > capacity:
                requested = capacity
            sum_s += requested * MAX_SCORE // capacity
            weights += 1
        o.fit_score[d] = 0 if weights == 0 else sum_s // weights
        o.pods_score[d] = (a.scheduled + o.placed[d]) * MAX_SCORE // most
        total = o.fit_score[d] + o.pods_score[d]
        if total > best_total:
            best_total = total
            o.best = d
            o.n_best = 1
        elif total == best_total:
            o.n_best += 1


cdef void place_native(const NativeIn* a, NativeOut* o) noexcept nogil:
    cdef int n, d
    for d in range(a.n_domains):
        o.capacity[d] = 0
    for n in range(a.n_nodes):
        d = a.node_domain[n]
        if d >= 0 and a.node_ok[n]:
            o.capacity[d] += _node_fit(a, n)
    for d in range(a.n_domains):
        o.placed[d] = a.count if o.capacity[d] > a.count else o.capacity[d]
    _score(a, NULL, o)


cdef inline int64_t _balanced(int64_t r0, int64_t r1, int64_t c0, int64_t c1) noexcept nogil:
    """balancedResourceScore over cpu and memory (a resource with no allocatable left out)."""
    cdef double f0, f1, std = 0.0
    if c0 != 0 and c1 != 0:
        f0 = <double>r0 / <double>c0
        f1 = <double>r1 / <double>c1
        if f0 > 1:
            f0 = 1
        if f1 > 1:
            f1 = 1
        std = fabs((f0 - f1) / 2)
    return <int64_t>((1 - std) * MAX_SCORE)


cdef inline int64_t _node_score(const PodsIn* p, int n, int q) noexcept nogil:
    """LeastAllocated (non-zero requests) + BalancedAllocation (actual requests), as in Go."""
    cdef int64_t least = 0, weights = 0, c, requested, with_pod, without
    cdef int r
    for r in range(2):
        c = p.node_cap[n * 2 + r]
        if c == 0:
            continue
        requested = p.nz_used[n * 2 + r] + p.pods_nz[q * 2 + r]
        least += 0 if requested > c else (c - requested) * MAX_SCORE // c
        weights += 1
    least = 0 if weights == 0 else least // weights
    if p.pods_act[q * 2] == 0 and p.pods_act[q * 2 + 1] == 0:
        return least
    with_pod = _balanced(p.act_used[n * 2] + p.pods_act[q * 2], p.act_used[n * 2 + 1] + p.pods_act[q * 2 + 1],
                         p.node_cap[n * 2], p.node_cap[n * 2 + 1])
    without = _balanced(p.act_used[n * 2], p.act_used[n * 2 + 1], p.node_cap[n * 2], p.node_cap[n * 2 + 1])
    return least + MAX_SCORE // 2 + (MAX_SCORE // 2 + with_pod - without) // 2


cdef void place_pods_native(const NativeIn* a, PodsIn* p, NativeOut* o) noexcept nogil:
    cdef int n, d, q, r, best
    cdef int64_t score, best_score, want
    cdef bint fits
    for d in range(a.n_domains):
        o.placed[d] = 0
        p.extra[d * 2] = 0
        p.extra[d * 2 + 1] = 0
    for n in range(a.n_nodes):
        for r in range(a.n_req):
            p.room[n * a.n_req + r] = a.free[n * a.n_req + r]
        for r in range(2):
            p.nz_used[n * 2 + r] = p.node_used[n * 2 + r]
            p.act_used[n * 2 + r] = p.node_used[n * 2 + r]
    for d in range(a.n_domains):
        for q in range(p.n_pods):
            best = -1
            best_score = -1
            for n in range(a.n_nodes):
                if a.node_domain[n] != d or not a.node_ok[n]:
                    continue
                fits = True
                for r in range(a.n_req):
                    want = p.pods[q * a.n_req + r]
                    if want > 0 and want > p.room[n * a.n_req + r]:
                        fits = False
                        break
                if not fits:
                    continue
                score = _node_score(p, n, q)
                if score > best_score:
                    best = n
                    best_score = score
            if best < 0:
                continue
            for r in range(a.n_req):
                p.room[best * a.n_req + r] -= p.pods[q * a.n_req + r]
            for r in range(2):
                p.nz_used[best * 2 + r] += p.pods_nz[q * 2 + r]
                p.act_used[best * 2 + r] += p.pods_act[q * 2 + r]
                p.extra[d * 2 + r] += p.pods_nz[q * 2 + r]
            o.placed[d] += 1
        o.capacity[d] = o.placed[d]
    _score(a, p.extra, o)


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


def place_pods(
    const int32_t[::1] node_domain,
    const int8_t[::1] node_ok,
    const int64_t[:, ::1] free,
    const int64_t[:, ::1] pods,
    const int64_t[:, ::1] node_cap,
    const int64_t[:, ::1] node_used,
    const int64_t[:, ::1] pods_nz,
    const int64_t[:, ::1] pods_act,
    const int64_t[:, ::1] alloc,
    const int64_t[:, ::1] used,
    int64_t min_count,
    int64_t scheduled,
    int32_t required_domain,
):
    """Pods of several shapes in queue order; validated under the GIL, placed without it."""
    cdef int n_nodes = node_domain.shape[0]
    cdef int n_domains = alloc.shape[0]
    cdef int n_req = free.shape[1]
    cdef int n_pods = pods.shape[0]
    cdef int i
    _check(node_ok.shape[0] == n_nodes and free.shape[0] == n_nodes, "one row per node")
    _check(pods.shape[1] == n_req and n_pods > 0, "one row per pod, one column per resource")
    _check(node_cap.shape[0] == n_nodes and node_used.shape[0] == n_nodes, "node cpu, memory rows")
    _check(node_cap.shape[1] == 2 and node_used.shape[1] == 2, "node cpu, memory")
    _check(pods_nz.shape[0] == n_pods and pods_act.shape[0] == n_pods, "pod cpu, memory rows")
    _check(pods_nz.shape[1] == 2 and pods_act.shape[1] == 2, "pod cpu, memory")
    _check(alloc.shape[1] == 2 and used.shape[0] == n_domains and used.shape[1] == 2, "cpu, memory")
    _check(n_domains > 0 and n_nodes > 0, "at least one domain")
    _check(min_count >= 1 and scheduled >= 0, "counts")
    _check(-1 <= required_domain < n_domains, "required_domain")
    for i in range(n_nodes):
        _check(-1 <= node_domain[i] < n_domains, "node_domain")
    buffers = [bytearray(8 * n_domains) for _ in range(4)]
    ok_b = bytearray(n_domains)
    scratch = [bytearray(8 * max(1, k)) for k in (n_nodes * n_req, n_nodes * 2, n_nodes * 2, n_domains * 2)]
    cdef int64_t[::1] cap = memoryview(buffers[0]).cast("q")
    cdef int64_t[::1] placed = memoryview(buffers[1]).cast("q")
    cdef int64_t[::1] fit = memoryview(buffers[2]).cast("q")
    cdef int64_t[::1] pods_s = memoryview(buffers[3]).cast("q")
    cdef int8_t[::1] ok = memoryview(ok_b).cast("b")
    cdef int64_t[::1] room = memoryview(scratch[0]).cast("q")
    cdef int64_t[::1] nz_used = memoryview(scratch[1]).cast("q")
    cdef int64_t[::1] act_used = memoryview(scratch[2]).cast("q")
    cdef int64_t[::1] extra = memoryview(scratch[3]).cast("q")
    cdef int64_t zero2[2]
    zero2[0] = 0
    zero2[1] = 0
    cdef NativeIn a
    cdef PodsIn p
    cdef NativeOut o
    a.n_nodes = n_nodes
    a.n_req = n_req
    a.n_domains = n_domains
    a.node_domain = &node_domain[0]
    a.node_ok = &node_ok[0]
    a.free = &free[0, 0]
    a.req = NULL
    a.alloc = &alloc[0, 0]
    a.used = &used[0, 0]
    a.score_req = zero2
    a.count = n_pods
    a.min_count = min_count
    a.scheduled = scheduled
    a.required_domain = required_domain
    p.n_pods = n_pods
    p.pods = &pods[0, 0]
    p.node_cap = &node_cap[0, 0]
    p.node_used = &node_used[0, 0]
    p.pods_nz = &pods_nz[0, 0]
    p.pods_act = &pods_act[0, 0]
    p.room = &room[0]
    p.nz_used = &nz_used[0]
    p.act_used = &act_used[0]
    p.extra = &extra[0]
    o.capacity = &cap[0]
    o.placed = &placed[0]
    o.fit_score = &fit[0]
    o.pods_score = &pods_s[0]
    o.feasible = &ok[0]
    with nogil:
        place_pods_native(&a, &p, &o)
    return NativeRaw(
        capacity=list(memoryview(buffers[0]).cast("q")),
        placed=list(memoryview(buffers[1]).cast("q")),
        fit_score=list(memoryview(buffers[2]).cast("q")),
        pods_score=list(memoryview(buffers[3]).cast("q")),
        feasible=[bool(x) for x in ok_b],
        best=o.best,
        n_best=o.n_best,
    )
