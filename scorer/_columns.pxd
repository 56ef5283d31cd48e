# Every node of a snapshot build as integer columns (scorer/_columns.pyx), read once under the
# GIL; the build (scorer/_build.pyx) works out each view's tree from them.

from libc.stdint cimport int32_t, int64_t, uint64_t


cdef class NodeColumns:


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

    cdef void _read(self, tuple levels, int32_t[::1] lid) except *
    cdef void _taints(self, Py_ssize_t i, object node, object taints, dict memo, dict ids) except *
    cdef void _columns(self, Py_ssize_t i, object allocatable) except *
    cdef void _grow(self) except *
    cdef void _rank(self, int32_t[::1] lid) except *
    cdef void read_amounts(self, object usage) except *
