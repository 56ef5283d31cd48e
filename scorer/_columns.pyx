# cython: language_level=3
"""Every node of a snapshot build as integer columns, read once under the GIL.

Each level value interned and ranked among its level's values (comparing rank tuples is
comparing the paths, in C), every resource name a column, readiness, taint classes and the
allocatable and usage amounts. What the columns cannot hold exactly (a missing level label, an
amount no int64 holds, more than 64 resource names, a bool or float amount) raises `Outside`
or the twin's own error: the build then asks the twin (`scorer._reference_build`).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t

import operator
from array import array

from scorer.model import HOSTNAME_LABEL
from scorer.tree import scheduling_taints

cdef int MAX_RESOURCES = 64


class Outside(Exception):
    """The input is outside what the fast path reproduces exactly: the twin builds it."""


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
        raise Outside
    return <int64_t>value  # OverflowError past int64: the twin decides


cdef class NodeColumns:
    """Every node of a build as integer columns (row i is nodes[i]), read once under the GIL."""

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
                raise Outside
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
