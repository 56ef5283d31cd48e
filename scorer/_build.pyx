# cython: language_level=3
"""Compiled snapshot build: both views of a flavor's nodes from one read of the nodes.

`build_views` and `select` are the Python entry points, with `scorer._reference_build` as their
contract: the same `Built` field for field (the differential tests hold the two to that). Under
the GIL each node is read once (labels, readiness, taints, capacity, usage) into integer
columns: every level value interned and ranked among its level's values, every resource name
a column. The tree's shape for each view (leaf order, the domains of each level, parents,
children, host DomainID ranks, capacity sums) is then worked out without the GIL over those
columns; only the objects the tree hands out (paths, the node-to-leaf map, DomainID lists) are
made under the GIL again. Input the fast path cannot hold exactly (a missing level label, an
amount no int64 holds, more than 64 resource names, unhashable taints) goes to the twin, whose
answer or error is by definition the right one.
"""

from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject
from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, int64_t, uint64_t

cdef extern from "Python.h":
    dict _PyDict_NewPresized(Py_ssize_t minused)  # CPython's own, for a dict whose size is known

import operator
from array import array

from scorer._reference_build import Built
from scorer._reference_build import build_views as _reference_views
from scorer.leaf_index import LeafIndex
from scorer.model import HOSTNAME_LABEL
from scorer.tree import Tree, scheduling_taints

cdef int MAX_RESOURCES = 64
cdef Py_ssize_t _fallbacks = 0


class _Outside(Exception):
    """The input is outside what the fast path reproduces exactly: the twin builds it."""


def fallbacks():
    """How many builds the twin made for this module so far (tests: ordinary input never)."""
    return _fallbacks


def select(nodes, node_labels, levels):
    """The nodes the flavor selects that carry every level label (utiltas.NodeMatchesFlavor)."""
    cdef tuple pairs = tuple(node_labels.items())
    cdef tuple wanted = tuple(levels)
    cdef list out = []
    cdef bint ok
    for node in nodes:
        labels = node.labels
        ok = True
        for key, value in pairs:
            if labels.get(key) != value:
                ok = False
                break
        if ok:
            for level in wanted:
                if level not in labels:
                    ok = False
                    break
        if ok:
            out.append(node)
    return out


def build_views(levels, nodes, usage):
    """Both views of ``nodes``, as `scorer._reference_build.build_views` builds them."""
    global _fallbacks
    try:
        return _build(tuple(levels), tuple(nodes), usage)
    except (_Outside, KeyError, TypeError, OverflowError, ValueError, IndexError):
        _fallbacks += 1
        return _reference_views(levels, nodes, usage)


cdef object _build(tuple levels, tuple nodes, object usage):
    if not levels:
        raise _Outside
    cdef _Nodes c = _Nodes(levels, nodes)
    c.read_amounts(usage)
    now_order = array("i", [i for i in range(c.n) if c.sched[i]])
    away = (c.n - len(now_order), c.conditioned)
    now = _view(c, now_order, False, True)
    if away == (0, 0):
        return Built(now, None, away)
    # Schedulable nodes first: where nodes share a hostname, the leaf takes the first one's
    # path, and it must be the path "now" sees (as in the twin).
    never_order = array("i", now_order)
    never_order.extend([i for i in range(c.n) if not c.sched[i]])
    return Built(now, _view(c, never_order, True, False), away)


cdef inline int32_t _intern(dict ids, list values, object value) except -1:
    """The id of ``value`` in ``ids`` (a new one, appended to ``values``, when unseen)."""
    cdef PyObject* found = PyDict_GetItem(ids, value)
    if found != NULL:
        return <int32_t><object>found
    cdef int32_t new = len(ids)
    ids[value] = new
    if values is not None:
        values.append(value)
    return new


cdef inline int64_t _amount(object value) except? -1:
    if type(value) is not int:  # what array("q") takes exactly: bools and floats go to the twin
        raise _Outside
    return <int64_t>value  # OverflowError past int64: the twin decides


cdef class _Nodes:
    """Every node of a build as integer columns (row i is nodes[i]), read once under the GIL."""

    cdef readonly Py_ssize_t n
    cdef readonly int n_levels, n_res
    cdef readonly bint host
    cdef readonly int conditioned
    cdef tuple levels, nodes
    cdef list names, paths, values, res_names, filtered
    cdef Py_ssize_t n_pairs
    cdef int32_t[::1] pair_rid, pair_start  # every node's allocatable as (column, amount) pairs
    cdef int64_t[::1] pair_amount
    cdef dict res_ids
    cdef int32_t[::1] key, rank, sizes, tok_keep, tok_drop
    cdef unsigned char[::1] sched
    cdef uint64_t[::1] mask
    cdef int64_t[::1] alloc, used

    def __cinit__(self, tuple levels, tuple nodes):
        self.levels, self.nodes, self.n, self.n_levels = levels, nodes, len(nodes), len(levels)
        self.host = levels[self.n_levels - 1] == HOSTNAME_LABEL
        self.names, self.paths = [], []
        self.n_pairs = 0
        self.pair_rid, self.pair_amount = array("i", bytes(4 * 8 * self.n)), array("q", bytes(8 * 8 * self.n))
        self.pair_start = array("i", bytes(4 * (self.n + 1)))
        self.values = [[] for _ in levels]
        self.res_names, self.res_ids, self.filtered = [], {}, [()]
        self.key = array("i", bytes(4 * self.n))
        self.tok_keep, self.tok_drop = array("i", bytes(4 * self.n)), array("i", bytes(4 * self.n))
        self.sched, self.mask = bytearray(self.n), array("Q", bytes(8 * self.n))
        lid = array("i", bytes(4 * self.n * self.n_levels))
        self._read(levels, lid)
        self._rank(lid)

    cdef void _read(self, tuple levels, int32_t[::1] lid) except *:
        cdef Py_ssize_t i
        cdef int level, n_levels = self.n_levels
        cdef list interned = [{} for _ in levels]
        cdef dict keys = {}, taint_memo = {}, filtered_ids = {(): 0}
        cdef tuple path
        getter = operator.itemgetter(*levels)  # KeyError on a missing label: the twin's error
        for i in range(self.n):
            node = self.nodes[i]
            found = getter(node.labels)
            path = found if n_levels > 1 else (found,)
            self.paths.append(path)
            for level in range(n_levels):
                lid[i * n_levels + level] = _intern(interned[level], self.values[level], path[level])
            self.key[i] = lid[i * n_levels + n_levels - 1] if self.host else _intern(keys, None, path)
            self.names.append(node.name)
            self.sched[i] = bool(node.ready) and not node.unschedulable  # Node.schedulable_now
            taints = node.taints
            if taints:
                self._taints(i, node, taints, taint_memo, filtered_ids)
            self._columns(i, node.allocatable)

    cdef void _taints(self, Py_ssize_t i, object node, object taints, dict memo, dict ids) except *:
        """Each node's taint class tokens (scheduling taints kept, condition ones dropped), by
        taint tuple: a real cluster has few distinct ones."""
        found = memo.get(taints)
        if found is None:
            keep = _intern(ids, self.filtered, scheduling_taints(node, False))
            drop = _intern(ids, self.filtered, scheduling_taints(node, True))
            found = memo[taints] = (keep, drop, any(t.is_condition for t in taints))
        self.tok_keep[i], self.tok_drop[i] = found[0], found[1]
        self.conditioned += found[2]

    cdef void _columns(self, Py_ssize_t i, object allocatable) except *:
        """The node's allocatable as (column, amount) pairs and a bit per column it has."""
        cdef uint64_t bits = 0
        cdef int32_t rid
        for name, value in allocatable.items():
            rid = _intern(self.res_ids, self.res_names, name)
            if rid >= MAX_RESOURCES:
                raise _Outside
            bits |= (<uint64_t>1) << rid
            if self.n_pairs == self.pair_rid.shape[0]:
                self._grow()
            self.pair_rid[self.n_pairs] = rid
            self.pair_amount[self.n_pairs] = _amount(value)
            self.n_pairs += 1
        self.mask[i] = bits
        self.pair_start[i + 1] = <int32_t>self.n_pairs

    cdef void _grow(self) except *:
        cdef Py_ssize_t x, size = self.pair_rid.shape[0]
        cdef int32_t[::1] rids = array("i", bytes(4 * 2 * max(size, 8)))
        cdef int64_t[::1] amounts = array("q", bytes(8 * 2 * max(size, 8)))
        for x in range(size):
            rids[x], amounts[x] = self.pair_rid[x], self.pair_amount[x]
        self.pair_rid, self.pair_amount = rids, amounts

    cdef void _rank(self, int32_t[::1] lid) except *:
        """Each level value's rank among its level's distinct values: comparing rank tuples
        is comparing the paths (Python's tuple order), in C."""
        cdef Py_ssize_t i, r
        cdef int level, n_levels = self.n_levels
        cdef int32_t[::1] rank_of
        self.sizes = array("i", [len(v) for v in self.values])
        self.rank = array("i", bytes(4 * self.n * n_levels))
        for level in range(n_levels):
            values = self.values[level]
            rank_of = array("i", bytes(4 * len(values)))
            for r, index in enumerate(sorted(range(len(values)), key=values.__getitem__)):
                rank_of[index] = r
            for i in range(self.n):
                self.rank[i * n_levels + level] = rank_of[lid[i * n_levels + level]]

    cdef void read_amounts(self, object usage) except *:
        """Allocatable of every node and usage of the schedulable ones (the only ones a view
        with usage holds), by resource column."""
        cdef Py_ssize_t i, x
        cdef int r = len(self.res_names)
        cdef PyObject* rid
        self.n_res = r
        self.alloc = array("q", bytes(8 * self.n * r))
        self.used = array("q", bytes(8 * self.n * r))
        empty = {}
        for i in range(self.n):
            for x in range(self.pair_start[i], self.pair_start[i + 1]):
                self.alloc[i * r + self.pair_rid[x]] = self.pair_amount[x]
            if not self.sched[i]:
                continue
            node = self.nodes[i]
            used = node.usage if usage is None else usage.get(self.names[i], empty)
            for name, value in used.items():
                rid = PyDict_GetItem(self.res_ids, name)
                if rid != NULL:  # a resource no node has is no column: never read
                    self.used[i * r + <int32_t><object>rid] = _amount(value)


cdef class _Leaves:
    """One view's leaves: the first node of each leaf key in view order, sorted by path, and
    every node of the view by leaf (members[member_start[j]:member_start[j + 1]])."""

    cdef Py_ssize_t n
    cdef int32_t[::1] reps, members, member_start

    def __cinit__(self, _Nodes c, int32_t[::1] order):
        cdef Py_ssize_t m = order.shape[0], n_keys = max(c.n, 1)
        self.reps, self.members = array("i", bytes(4 * m)), array("i", bytes(4 * m))
        self.member_start = array("i", bytes(4 * (m + 1)))
        cdef int32_t[::1] tmp = array("i", bytes(4 * m))
        cdef int32_t[::1] slot = array("i", [-1]) * n_keys
        cdef int32_t[::1] per_key = array("i", bytes(4 * n_keys))
        cdef int32_t[::1] buckets = array("i", bytes(4 * (max([c.sizes[d] for d in range(c.n_levels)]) + 1)))
        if m == 0:
            self.n = 0
            return
        with nogil:
            self.n = _group(c.key, order, self.reps, slot, per_key)
            sort_by_rank(&self.reps[0], self.n, &c.rank[0], c.n_levels, &c.sizes[0], &tmp[0], &buckets[0])
            _members(c.key, order, self.reps, self.n, slot, per_key, self.members, self.member_start)


cdef Py_ssize_t _group(int32_t[::1] key, int32_t[::1] order, int32_t[::1] reps, int32_t[::1] slot,
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


cdef void _members(int32_t[::1] key, int32_t[::1] order, int32_t[::1] reps, Py_ssize_t n,
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


cdef tuple _view(_Nodes c, int32_t[::1] order, bint drop, bint with_usage):
    """One view's tree and free capacity: ``order`` is its nodes (rows of ``c``) in view order."""
    cdef _Leaves leaves = _Leaves(c, order)
    cdef Py_ssize_t j, x, n = leaves.n
    cdef int last = c.n_levels - 1
    offsets = array("i", bytes(4 * (c.n_levels + 1)))
    shape = _shape(c, leaves, offsets)
    paths = _paths(c, leaves, offsets, shape[3])
    id_rank, ids = _id_ranks(c, leaves, offsets, paths)
    resources, capacity, free = _capacity(c, leaves, order, with_usage)
    taint_class, classes = _taint_classes(c, leaves, drop)
    path_of = _PyDict_NewPresized(order.shape[0])  # no resizes on the way to 50,000 entries
    names = c.names
    for j in range(n):
        path = paths[offsets[last] + j]
        for x in range(leaves.member_start[j], leaves.member_start[j + 1]):
            path_of[names[leaves.members[x]]] = path
    tree = Tree(
        levels=c.levels,
        hostname_leaves=c.host,
        level_offsets=offsets,
        parent=shape[0],
        child_start=shape[1],
        child_end=shape[2],
        id_rank=id_rank,
        paths=paths,
        resources=resources,
        capacity=capacity,
        taint_class=taint_class,
        taint_classes=classes,
        leaf_nodes=tuple([c.nodes[leaves.reps[j]] for j in range(n)]) if c.host else (),
        leaf_of_node=LeafIndex(path_of, paths, offsets[last]),
    )
    tree.memo["ids"] = ids
    return tree, free


cdef tuple _shape(_Nodes c, _Leaves leaves, int32_t[::1] offsets):
    """(parent, child_start, child_end, first_leaf) per domain; fills ``offsets``."""
    cdef Py_ssize_t n = leaves.n
    cdef int32_t[::1] diff = array("i", bytes(4 * max(n, 1)))
    cdef int32_t[::1] pos = array("i", bytes(4 * c.n_levels))
    if n:
        count_domains(&leaves.reps[0], n, &c.rank[0], c.n_levels, &diff[0], &offsets[0])
    total = offsets[c.n_levels]
    parent, start, end = array("i", [-1]) * total, array("i", bytes(4 * total)), array("i", bytes(4 * total))
    first = array("i", bytes(4 * total))
    cdef int32_t[::1] p = parent, s = start, e = end, f = first
    if n:
        lay_out(n, &diff[0], c.n_levels, &offsets[0], &pos[0], &p[0], &s[0], &e[0], &f[0])
    return parent, start, end, first


cdef tuple _paths(_Nodes c, _Leaves leaves, int32_t[::1] offsets, int32_t[::1] first_leaf):
    """Every domain's level values: a prefix of its first leaf's path (the leaf's own for leaves)."""
    cdef Py_ssize_t dom, j
    cdef int d, last = c.n_levels - 1
    out = [None] * offsets[last + 1]
    node_paths = c.paths
    for d in range(last):
        for dom in range(offsets[d], offsets[d + 1]):
            out[dom] = node_paths[leaves.reps[first_leaf[dom]]][: d + 1]
    for j in range(leaves.n):
        out[offsets[last] + j] = node_paths[leaves.reps[j]]
    return tuple(out)


cdef tuple _id_ranks(_Nodes c, _Leaves leaves, int32_t[::1] offsets, tuple paths):
    """Each domain's rank of Kueue's DomainID within its level, and each level's IDs in rank
    order: the comma-joined path, or the hostname alone for host leaves (ranked by the build's
    hostname ranks, in C: no sort of the hostnames again)."""
    cdef int d, last = c.n_levels - 1
    cdef Py_ssize_t lo, hi, r
    ranks = array("i", bytes(4 * offsets[last + 1]))
    cdef int32_t[::1] rank_view = ranks
    ids = []
    for d in range(last + 1):
        lo, hi = offsets[d], offsets[d + 1]
        if c.host and d == last:
            ids.append(_host_ranks(c, leaves, rank_view, lo))
            continue
        level_ids = [",".join(p) for p in paths[lo:hi]]
        order = sorted(range(hi - lo), key=level_ids.__getitem__)
        for r in range(hi - lo):
            rank_view[lo + <Py_ssize_t>order[r]] = r
        ids.append([level_ids[i] for i in order])
    return ranks, ids


cdef list _host_ranks(_Nodes c, _Leaves leaves, int32_t[::1] ranks, Py_ssize_t lo):
    cdef Py_ssize_t j, g, r = 0
    cdef int last = c.n_levels - 1
    cdef int32_t[::1] at = array("i", [-1]) * max(c.sizes[last], 1)
    for j in range(leaves.n):
        at[c.rank[leaves.reps[j] * c.n_levels + last]] = <int32_t>j
    out = []
    for g in range(c.sizes[last]):
        j = at[g]
        if j >= 0:
            ranks[lo + j] = <int32_t>r
            r += 1
            out.append(c.paths[leaves.reps[j]][last])
    return out


cdef tuple _capacity(_Nodes c, _Leaves leaves, int32_t[::1] order, bint with_usage):
    """(resources, capacity, free): the columns are every resource some node of the view has."""
    cdef uint64_t bits = 0
    cdef Py_ssize_t j, n = leaves.n
    for j in range(order.shape[0]):
        bits |= c.mask[order[j]]
    resources = tuple(sorted([c.res_names[r] for r in range(c.n_res) if (bits >> r) & 1]))
    cols = array("i", [c.res_ids[name] for name in resources])
    capacity, free = array("q", bytes(8 * n * len(cols))), array("q", bytes(8 * n * len(cols)))
    cdef int32_t[::1] col_rid = cols
    cdef int64_t[::1] cap = capacity, fr = free
    if n and len(cols) and not fill_capacity(
        &leaves.members[0], &leaves.member_start[0], n, &col_rid[0], len(cols), &c.alloc[0], &c.used[0],
        c.n_res, with_usage, &cap[0], &fr[0]
    ):
        raise _Outside
    return resources, capacity, free


cdef tuple _taint_classes(_Nodes c, _Leaves leaves, bint drop):
    """Host leaves grouped by their scheduling taints, classes numbered as first seen in leaf order."""
    cdef Py_ssize_t j, n = leaves.n
    cdef int32_t t
    if not c.host or n == 0:
        return array("i", bytes(4 * n)), ((),)
    cdef int32_t[::1] tokens = c.tok_drop if drop else c.tok_keep
    cdef int32_t[::1] class_of = array("i", [-1]) * len(c.filtered)
    out = array("i", bytes(4 * n))
    cdef int32_t[::1] cls = out
    seen = []
    for j in range(n):
        t = tokens[leaves.reps[j]]
        if class_of[t] < 0:
            class_of[t] = len(seen)
            seen.append(c.filtered[t])
        cls[j] = class_of[t]
    return out, tuple(seen)
