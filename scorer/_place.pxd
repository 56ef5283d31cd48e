# Phase 2 of the compiled engine: the fit level, then the walk down to the leaves.

from libc.stdint cimport int64_t

from scorer._types cimport Outcome, Request, State, Tree

cdef void run(const Tree* t, const Request* r, State* s, const int64_t* free, Outcome* o) noexcept nogil
