# cython: language_level=3
"""Compiled engine: Kueue's TAS placement over flat arrays, without the GIL.

`place_group` is the engine's Python entry point: it checks every array against the tree
(shapes under the GIL, per-element ranges without it), then runs the whole placement in
`nogil` C over typed memoryviews with fixed-width integers. The algorithm mirrors
`scorer._reference` line for line; the differential tests hold the two to the same answers.
"""

cimport cython
from libc.stdint cimport int8_t, int32_t, int64_t
from cpython.array cimport array as carray, clone
from libc.stdlib cimport calloc, free as cfree, malloc
from libc.string cimport memset

from scorer._place cimport run
from scorer._types cimport ST_FIT, ST_NOT_FIT, Outcome, Request, State, Tree

from scorer.request import EngineError, RawResult


cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1

NAME = "compiled"
cdef int _scratch_override = 0
cdef carray _Q = carray("q")

cdef enum:  # what `_checked_run` did: placed, or the step that refused
    _RAN = 0
    _BAD_TREE = 1
    _BAD_REQUEST = 2
    _NO_MEMORY = 3


def _set_scratch_capacity(int capacity):
    """Tests only: lower the limit the overflow guard checks (the lists keep their size), so
    the guard can be seen to fire; a valid tree never reaches it. 0 restores the real limit."""
    global _scratch_override
    _scratch_override = capacity

# ---------------------------------------------------------------- the Python edge

def _check(bint ok, str message):
    if not ok:
        raise EngineError(f"scorer._core.place_group: {message}")


cdef bint _ranges_ok(const int32_t[::1] start, const int32_t[::1] end, const int32_t[::1] taint_class,
                     int n, int n_leaves, int n_classes) noexcept nogil:
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
                      int n_res, int n_levels) noexcept nogil:
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
    """Place one PodSet or leader+workers group; the same contract as scorer._reference."""
    return _place(tree, free, free, req, False)[0]


def place_group_both(tree, free, other, req):
    """The group placed on ``free`` and, independently, on ``other`` (two capacities of one
    tree: now and when empty), as ``(place_group(tree, free, req), place_group(tree, other,
    req))``. One `nogil` section for both: with two decision threads the GIL changes hands once
    a placement pair, not twice, and each hand-over costs a thread wake-up."""
    return _place(tree, free, other, req, True)


cdef tuple _place(tree, free, other, req, bint both):
    """Every array the nogil core trusts is checked first: shapes and scalars here, under the GIL;
    the per-domain ranges and the request's values in typed loops that, like the allocation,
    run without it (`_checked_run`)."""
    cdef const int32_t[::1] offsets = tree.level_offsets
    cdef const int32_t[::1] child_start = tree.child_start
    cdef const int32_t[::1] child_end = tree.child_end
    cdef const int32_t[::1] id_rank = tree.id_rank
    cdef const int32_t[::1] taint_class = tree.taint_class
    cdef const int64_t[::1] free_v = free
    cdef const int64_t[::1] other_v = other
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
    cdef State s[2]
    cdef Outcome o[2]
    cdef int failed, runs = 2 if both else 1
    cdef int n_classes = len(tree.taint_classes)
    memset(s, 0, sizeof(s))  # every pointer NULL: `_release` is safe whatever step failed
    memset(o, 0, sizeof(o))
    t.n_levels = len(tree.levels)
    _check(t.n_levels >= 1 and offsets.shape[0] == t.n_levels + 1, "level_offsets must have one entry per level plus one")
    t.n_domains = offsets[t.n_levels]
    t.n_leaves = t.n_domains - offsets[t.n_levels - 1]
    t.n_resources = len(tree.resources)
    _check(child_start.shape[0] == t.n_domains and child_end.shape[0] == t.n_domains
           and id_rank.shape[0] == t.n_domains, "child ranges and id ranks need one entry per domain")
    _check(taint_class.shape[0] == t.n_leaves, "taint_class must have one entry per leaf")
    _check(free_v.shape[0] == <Py_ssize_t>t.n_leaves * t.n_resources
           and other_v.shape[0] == free_v.shape[0], "free must be leaves x resources")
    _check(req_col.shape[0] >= 1 and req_val.shape[0] == req_col.shape[0], "req_col and req_val: same, non-zero length")
    _check(leader_val.shape[0] in (0, req_col.shape[0]), "leader_val must be empty or match req_val")
    _check(inner.shape[0] == t.n_levels, "inner_sizes needs one entry per level")
    _check(layer_levels.shape[0] == layer_sizes.shape[0], "layer_levels and layer_sizes differ in length")
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
    r.least_free = req.least_free
    r.n_layers = layer_levels.shape[0]
    r.layer_levels = &layer_levels[0] if r.n_layers else NULL
    r.layer_sizes = &layer_sizes[0] if r.n_layers else NULL
    r.check_nodes = req.check_nodes
    r.class_excluded = &class_excl[0] if class_excl.shape[0] else NULL
    r.label_excl = &label_excl[0] if label_excl.shape[0] else NULL
    # The checks that walk every domain, the allocation and the placements: all without the GIL,
    # so a second decision thread runs Python meanwhile. Each fallible step says so by its code.
    try:
        with nogil:
            failed = _checked_run(&t, &r, s, o, runs, child_start, child_end, taint_class, req_col,
                                  req_val, leader_val, inner, layer_levels, layer_sizes, n_classes,
                                  &free_v[0] if free_v.shape[0] else NULL,
                                  &other_v[0] if other_v.shape[0] else NULL)
        if failed == _BAD_TREE:
            _check(False, "child ranges or taint classes out of bounds")
        if failed == _BAD_REQUEST:
            _check(False, "request arrays out of range (columns, negative requests, layers)")
        if failed == _NO_MEMORY:
            raise MemoryError("scorer._core.place_group: cannot allocate working memory")
        if both:
            return (_result(&t, &r, &s[0], &o[0], n_classes), _result(&t, &r, &s[1], &o[1], n_classes))
        return (_result(&t, &r, &s[0], &o[0], n_classes),)
    finally:
        _release(&s[0], &o[0])
        _release(&s[1], &o[1])


cdef int _checked_run(const Tree* t, const Request* r, State* s, Outcome* o, int runs,
                      const int32_t[::1] child_start, const int32_t[::1] child_end,
                      const int32_t[::1] taint_class, const int32_t[::1] req_col, const int64_t[::1] req_val,
                      const int64_t[::1] leader_val, const int32_t[::1] inner,
                      const int32_t[::1] layer_levels, const int32_t[::1] layer_sizes, int n_classes,
                      const int64_t* free, const int64_t* other) except -1 nogil:
    """Check the arrays the core trusts, then per run (on ``free``, then on ``other``) allocate
    its working memory and place: `_RAN` or why not (the caller raises under the GIL; it
    releases what was allocated either way). `run` raises `EngineError` (-1) when a working
    buffer would overflow."""
    cdef int i
    if not _ranges_ok(child_start, child_end, taint_class, t.n_domains, t.n_leaves, n_classes):
        return _BAD_TREE
    if not _request_ok(req_col, req_val, leader_val, inner, layer_levels, layer_sizes, t.n_resources,
                       t.n_levels):
        return _BAD_REQUEST
    for i in range(runs):
        s[i].best_fit = not (r.unconstrained and r.least_free)  # Kueue's useBestFitAlgorithm
        s[i].leader_count = 1 if r.leader_val != NULL else 0
        if not _allocate(&s[i], &o[i], t.n_domains, t.n_levels, n_classes, r.n_req, r.n_layers):
            return _NO_MEMORY
        run(t, r, &s[i], free if i == 0 else other, &o[i])
    return _RAN


cdef bint _allocate(State* s, Outcome* o, int n, int n_levels, int n_classes, int n_req, int n_layers) noexcept nogil:
    cdef int cap = 2 * n + 16
    s.cap = _scratch_override if 0 < _scratch_override < cap else cap  # the guard's limit only
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
    res = object.__new__(RawResult)  # every field set here: __init__ and its factories cost ~1.5 us
    res.status = o.status
    res.level = o.level
    res.fit_count = o.fit_count
    res.total = o.total
    res.total_nodes = o.total_nodes
    res.selector_count = o.selector_count
    res.affinity_count = o.affinity_count
    res.taint_counts = [o.taint_counts[i] for i in range(n_classes)]
    res.resource_counts = [o.resource_counts[i] for i in range(r.n_req)]
    res.layer_fits = [o.layer_fits[i] for i in range(r.n_layers)] if o.status == ST_NOT_FIT else []
    res.level_max_pods = [o.level_max_pods[level] for level in range(t.n_levels)]
    res.level_max_slices = [o.level_max_slices[level] for level in range(t.n_levels)]
    res.level_fitting = [o.level_fitting[level] for level in range(t.n_levels)]
    res.level_best = [o.level_best[level] for level in range(t.n_levels)]
    res.worker_leaves = []
    res.worker_counts = []
    res.leader_leaves = []
    res.leader_counts = []
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


# ---------------------------------------------------------------- the snapshot layer's records

def frozen(cls, tuple fields, tuple values):
    """``cls(*values)`` for a frozen, slotted dataclass without ``__post_init__``, slots set
    directly: its ``__init__`` calls ``object.__setattr__`` once per field in Python, ~1 us a
    LevelCapacity row, a quarter of a placement's Python work at 1k nodes with the others."""
    cdef Py_ssize_t i, n = len(fields)
    if len(values) != n:
        raise TypeError(f"frozen({cls.__name__}): {len(values)} values for {n} fields")
    made = object.__new__(cls)
    for i in range(n):
        PyObject_GenericSetAttr(made, fields[i], values[i])
    return made


def amounts(requests, tuple names, Py_ssize_t pods_at):
    """``array("q", [requests.get(n, 0) for n in names])``, one more at ``pods_at`` (the pod):
    a request's amounts in its plan's order, without the iterator protocol array() takes."""
    cdef Py_ssize_t i, n = len(names)
    if not 0 <= pods_at < n:
        raise IndexError(f"amounts: pods_at {pods_at} is not among {n} names")
    cdef carray out = clone(_Q, n, False)
    get = requests.get
    for i in range(n):
        out.data.as_longlongs[i] = get(names[i], 0) + 1 if i == pods_at else get(names[i], 0)
    return out


def level_rows(cls, tuple fields, tuple names, tuple domains, paths, list pods, list slices, list fitting,
               list best):
    """One ``cls(name, pods, slices, fitting, domains, paths[best] or None)`` per level, made
    with `frozen`: the LevelCapacity rows of a placement (`scorer._reference.level_rows`)."""
    cdef Py_ssize_t level, n = len(names)
    if not (len(domains) == len(pods) == len(slices) == len(fitting) == len(best) == n):
        raise ValueError("level_rows: one entry per level in every column")
    rows = []
    for level in range(n):
        at = best[level]
        rows.append(frozen(cls, fields, (names[level], pods[level], slices[level], fitting[level],
                                         domains[level], paths[at] if at >= 0 else None)))
    return tuple(rows)


# ---------------------------------------------------------------- tree edits

@cython.boundscheck(False)
@cython.wraparound(False)
def shift_from(int32_t[::1] values, Py_ssize_t lo, Py_ssize_t hi, int32_t at, int32_t delta):
    """Add ``delta`` to each of ``values[lo:hi]`` that is at least ``at``: the indexes after a
    domain inserted (+1) or removed (-1) there (`scorer.tree_edit`; its pure loop is the twin)."""
    if lo < 0 or hi > values.shape[0] or lo > hi:
        raise ValueError(f"shift_from: [{lo}, {hi}) is not within {values.shape[0]} values")
    cdef Py_ssize_t i
    with nogil:
        for i in range(lo, hi):
            if values[i] >= at:
                values[i] += delta
