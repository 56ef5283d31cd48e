# The native (kube-scheduler v1.36 PodGroup) placement's contract: flat arrays in, one score
# per topology domain out. Domains are indexes 0..n_domains-1 in domain-value order, so a lower
# index is the deterministic pick among placements the scheduler would choose between at random.

from libc.stdint cimport int8_t, int32_t, int64_t

cdef struct NativeIn:
    int n_nodes
    int n_req
    int n_domains
    const int32_t* node_domain     # per node: its domain, -1 when it lacks the topology key
    const int8_t* node_ok          # per node: passes every filter but NodeResourcesFit
    const int64_t* free            # n_nodes x n_req, row-major: what the node has left
    const int64_t* req             # n_req: one pod's request of each (the `pods` unit included)
    const int64_t* alloc           # n_domains x 2: cpu, memory allocatable of every labelled node
    const int64_t* used            # n_domains x 2: cpu, memory already requested there
    const int64_t* score_req       # 2: one pod's cpu and memory as NodeResourcesFit scores them
    int64_t count                  # pods of the group waiting to be placed
    int64_t min_count              # gang minCount (1 for a basic policy)
    int64_t scheduled              # pods of the group already bound
    int32_t required_domain        # -1, or the one domain bound pods already sit in

cdef struct NativeOut:
    int64_t* capacity              # per domain: pods of this shape its schedulable nodes hold
    int64_t* placed                # per domain: pods the per-pod cycle assumes there
    int64_t* fit_score             # per domain: NodeResourcesFit ScorePlacement (MostAllocated)
    int64_t* pods_score            # per domain: PodGroupPodsCount, normalised
    int8_t* feasible               # per domain: Permit reached minCount there
    int32_t best                   # -1 when no placement is feasible
    int32_t n_best                 # feasible placements sharing the best total score

cdef void place_native(const NativeIn* a, NativeOut* o) noexcept nogil

# Pods of several shapes, in queue order: the per-pod cycle run in each domain.
cdef struct PodsIn:
    int n_pods
    const int64_t* pods            # n_pods x n_req: each pod's request (the `pods` unit included)
    const int64_t* node_cap        # n_nodes x 2: cpu, memory allocatable (per-pod scores)
    const int64_t* node_used       # n_nodes x 2: cpu, memory requested before the group
    const int64_t* pods_nz         # n_pods x 2: cpu, memory as LeastAllocated counts them
    const int64_t* pods_act        # n_pods x 2: cpu, memory as BalancedAllocation counts them
    int64_t* room                  # n_nodes x n_req scratch
    int64_t* nz_used               # n_nodes x 2 scratch
    int64_t* act_used              # n_nodes x 2 scratch
    int64_t* extra                 # n_domains x 2: cpu, memory the placed pods add (out)

cdef void place_pods_native(const NativeIn* a, PodsIn* p, NativeOut* o) noexcept nogil
