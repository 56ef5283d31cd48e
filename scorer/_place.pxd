# Phase 2 of the compiled engine: the fit level, then the walk down to the leaves.

from libc.stdint cimport int64_t

from scorer._types cimport Outcome, Request, State, Tree

# Raises EngineError (returns -1) when a working buffer would overflow: an internal error, never
# a placement. Kueue's own "assumptions violated" outcome is the status ST_FAILED, not an error.
cdef int run(const Tree* t, const Request* r, State* s, const int64_t* free, Outcome* o) except -1 nogil
