# The compiled engine's shared types: flat arrays in, counters per domain, no Python objects.
# Domain indexes are global (level by level, each level in level-value order), so an
# index comparison is Kueue's final `levelValues` tie-break.

from libc.stdint cimport int8_t, int32_t, int64_t

cdef struct Tree:
    int n_levels
    int n_domains
    int n_leaves
    int n_resources
    const int32_t* level_offsets
    const int32_t* child_start
    const int32_t* child_end
    const int32_t* id_rank
    const int32_t* taint_class

cdef struct Request:
    int n_req
    const int32_t* req_col
    const int64_t* req_val
    const int64_t* leader_val      # NULL when the group has no leader
    int64_t count
    int64_t slice_size
    int requested_level
    int slice_level
    const int32_t* inner_sizes
    bint required
    bint unconstrained
    bint least_free                # with unconstrained: LeastFreeCapacity (TASProfileMixed), else BestFit
    int n_layers
    const int32_t* layer_levels
    const int32_t* layer_sizes
    bint check_nodes
    const int8_t* class_excluded
    const int8_t* label_excl       # NULL when no selector/affinity applies

cdef struct State:
    # Kueue's per-domain counters: state, stateWithLeader, sliceState,
    # sliceStateWithLeader, leaderState.
    int64_t* st
    int64_t* swl
    int64_t* sl
    int64_t* slwl
    int64_t* ld
    bint best_fit
    int64_t leader_count
    # scratch lists of domain indexes; capacity `cap` each
    int32_t* a
    int32_t* b
    int32_t* c
    int32_t* d
    int32_t* tmp
    int cap

cdef struct Outcome:
    int status
    int level
    int64_t fit_count
    int64_t total
    int n_final                    # domains in `final` (leaves, possibly repeated)
    int32_t* final
    int64_t total_nodes
    int64_t selector_count
    int64_t affinity_count
    int64_t* taint_counts          # per taint class
    int64_t* resource_counts       # per requested resource
    int64_t* layer_fits            # per multi-layer constraint
    int64_t* level_max_pods
    int64_t* level_max_slices
    int64_t* level_fitting
    int64_t* level_best


cdef enum:
    I32MAX = 2147483647
    ST_FIT = 0
    ST_NOT_FIT = 1
    ST_NO_DOMAINS = 2
    ST_FAILED = 3
    EXCL_SELECTOR = 2
    EXCL_AFFINITY = 3
