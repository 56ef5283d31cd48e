# cython: language_level=3
"""Compiled snapshot build: both views of a flavor's nodes from one read of the nodes.

`build_views` and `select` are the Python entry points, with `scorer._reference_build` as their
contract: the same `Built` field for field (the differential tests hold the two to that). Under
the GIL each node is read once (labels, readiness, taints, capacity, usage) into integer
columns (`scorer._columns`): every level value interned and ranked among its level's values,
every resource name a column. The tree's shape for each view (leaf order, the domains of each
level, parents, children, capacity sums) is then worked out without the GIL over those columns
(`scorer._layout`); here, only the host DomainID ranks and the objects the tree hands out (paths, the node-to-leaf map, DomainID lists) are
made under the GIL again. Input the fast path cannot hold exactly (a missing level label, an
amount no int64 holds, more than 64 resource names, unhashable taints) goes to the twin, whose
answer or error is by definition the right one.
"""

from libc.stdint cimport int32_t, int64_t, uint64_t

from scorer._columns cimport NodeColumns
from scorer._layout cimport count_domains, fill_capacity, group_leaves, lay_out, leaf_members, sort_by_rank

cdef extern from "Python.h":
    dict _PyDict_NewPresized(Py_ssize_t minused)  # CPython's own, for a dict whose size is known

from array import array

from scorer._columns import Outside
from scorer._reference_build import Built
from scorer._reference_build import build_views as _reference_views
from scorer.leaf_index import LeafIndex
from scorer.tree import Tree

cdef Py_ssize_t _fallbacks = 0


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
    except (Outside, KeyError, TypeError, OverflowError, ValueError, IndexError):
        _fallbacks += 1
        return _reference_views(levels, nodes, usage)


cdef object _build(tuple levels, tuple nodes, object usage):
    if not levels:
        raise Outside
    cdef NodeColumns c = NodeColumns(levels, nodes)
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


cdef class _Leaves:
    """One view's leaves: the first node of each leaf key in view order, sorted by path, and
    every node of the view by leaf (members[member_start[j]:member_start[j + 1]])."""

    cdef Py_ssize_t n
    cdef int32_t[::1] reps, members, member_start

    def __cinit__(self, NodeColumns c, int32_t[::1] order):
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
            self.n = group_leaves(c.key, order, self.reps, slot, per_key)
            sort_by_rank(&self.reps[0], self.n, &c.rank[0], c.n_levels, &c.sizes[0], &tmp[0], &buckets[0])
            leaf_members(c.key, order, self.reps, self.n, slot, per_key, self.members, self.member_start)


cdef tuple _view(NodeColumns c, int32_t[::1] order, bint drop, bint with_usage):
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


cdef tuple _shape(NodeColumns c, _Leaves leaves, int32_t[::1] offsets):
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


cdef tuple _paths(NodeColumns c, _Leaves leaves, int32_t[::1] offsets, int32_t[::1] first_leaf):
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


cdef tuple _id_ranks(NodeColumns c, _Leaves leaves, int32_t[::1] offsets, tuple paths):
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


cdef list _host_ranks(NodeColumns c, _Leaves leaves, int32_t[::1] ranks, Py_ssize_t lo):
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


cdef tuple _capacity(NodeColumns c, _Leaves leaves, int32_t[::1] order, bint with_usage):
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
        raise Outside
    return resources, capacity, free


cdef tuple _taint_classes(NodeColumns c, _Leaves leaves, bint drop):
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
