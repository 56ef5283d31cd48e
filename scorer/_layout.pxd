# The nogil core of the compiled snapshot build (scorer/_build.pyx): a tree's shape from
# integer columns. Each function reads only what its arguments point at and writes only its
# outputs; the Python edge (`_build.build_views`) sizes and validates every buffer first.

from libc.stdint cimport int32_t, int64_t

# Leaf representatives of a view: the first node of each leaf key in view order (reps, their
# number returned); slot[key] < 0 marks a key not seen yet, per_key counts each key's nodes.
cdef Py_ssize_t group_leaves(int32_t[::1] key, int32_t[::1] order, int32_t[::1] reps, int32_t[::1] slot,
                             int32_t[::1] per_key) noexcept nogil

# Every node of the view by leaf (members[start[j]:start[j + 1]] for leaf j), from group_leaves'
# reps (sorted meanwhile), slot and per_key; slot is used up.
cdef void leaf_members(int32_t[::1] key, int32_t[::1] order, int32_t[::1] reps, Py_ssize_t n,
                       int32_t[::1] slot, int32_t[::1] per_key, int32_t[::1] members,
                       int32_t[::1] start) noexcept nogil

# Stable LSD radix sort of node indexes by their rank tuples (rank[i * n_levels + l] < sizes[l]):
# Python's tuple order of the level-value paths. tmp has m entries, counts max(sizes) + 1.
cdef void sort_by_rank(int32_t* items, Py_ssize_t m, const int32_t* rank, int n_levels,
                       const int32_t* sizes, int32_t* tmp, int32_t* counts) noexcept nogil

# Level offsets (n_levels + 1) of the domains the sorted leaves make; diff[j] (one per leaf) is
# the first level where leaf j leaves leaf j - 1's domain.
cdef void count_domains(const int32_t* leaves, Py_ssize_t n_leaves, const int32_t* rank, int n_levels,
                        int32_t* diff, int32_t* offsets) noexcept nogil

# Per domain its parent (-1 for roots), child range (0, 0 for leaves) and first leaf, from
# count_domains' diff and offsets; pos is scratch (n_levels).
cdef void lay_out(Py_ssize_t n_leaves, const int32_t* diff, int n_levels, const int32_t* offsets,
                  int32_t* pos, int32_t* parent, int32_t* child_start, int32_t* child_end,
                  int32_t* first_leaf) noexcept nogil

# Capacity and free capacity per leaf and column, summed over the leaf's members as
# scorer.tree.leaf_row does (saturated at int64 max); 0 when a value falls outside what that
# gives exactly (the caller then asks the pure twin), 1 otherwise.
cdef bint fill_capacity(const int32_t* members, const int32_t* member_start, Py_ssize_t n_leaves,
                        const int32_t* col_rid, int n_cols, const int64_t* alloc, const int64_t* used,
                        int n_res, bint with_usage, int64_t* cap, int64_t* free) noexcept nogil
