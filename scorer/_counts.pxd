# Phase 1 of the compiled engine: how many pods (slices, leaders) each domain holds.

from libc.stdint cimport int64_t

from scorer._types cimport Outcome, Request, State, Tree

cdef int64_t count_in(const Request* r, const int64_t* vals, const int64_t* free, Py_ssize_t base,
                      const int64_t* minus, int* limiting) noexcept nogil
cdef void fill_leaves(const Tree* t, const Request* r, State* s, const int64_t* free, Outcome* o) noexcept nogil
cdef void aggregate(const Tree* t, const Request* r, State* s) noexcept nogil
cdef void level_table(const Tree* t, const Request* r, const State* s, Outcome* o) noexcept nogil
