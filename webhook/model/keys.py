"""Every label and annotation key Kueue v0.19.2 defines under ``kueue.x-k8s.io/``, and tasgate's own.

Any other key under those prefixes on a workload or pod template has no effect, however close it
looks to a real one (``rules.keynames`` warns about it). Keys tasgate itself reads are named in
``model.annotations``; this module adds the rest, each taken from the Go constant that defines it in
sigs.k8s.io/kueue@v0.19.2 (file named above each group), so that an object as Kueue leaves it (with
the labels and annotations Kueue writes) raises no warning.

Keys are split by who writes them: ``KUEUE_USER_KEYS`` are written by people (and are what a
near-miss is likely to have meant); ``KUEUE_WRITTEN_KEYS`` are written by Kueue or by controllers
on its behalf (recognised, never suggested to a person). Finalizers, scheduling and preemption
gates and field-manager names share the prefix but are not label or annotation keys, so they are
not listed (``kueue.x-k8s.io/topology`` as an annotation is unknown, as it is to Kueue).
"""

from __future__ import annotations

from typing import Final

from webhook.model import annotations as ann

# --- pkg/controller/constants/constants.go --------------------------------------------------------
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"  # WorkloadPriorityClassLabel
PREBUILT_WORKLOAD_NAME: Final = "kueue.x-k8s.io/prebuilt-workload-name"  # label and annotation
MAX_EXEC_TIME_SECONDS_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
SAFE_TO_FORCEFULLY_DELETE: Final = "kueue.x-k8s.io/safe-to-forcefully-delete"  # pod annotation
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
JOB_OWNER_GVK: Final = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME: Final = "kueue.x-k8s.io/job-owner-name"
COMPONENT_WORKLOAD_INDEX: Final = "kueue.x-k8s.io/component-workload-index"
PRIORITY_BOOST: Final = "kueue.x-k8s.io/priority-boost"  # written on Workloads by controllers
WORKLOAD_ALLOWED_RESOURCE_FLAVORS: Final = "kueue.x-k8s.io/workload-allowed-resource-flavors"
CONCURRENT_ADMISSION_PARENT: Final = "kueue.x-k8s.io/concurrent-admission-parent"

# --- pkg/constants/constants.go --------------------------------------------------------------------
MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"  # ManagedByKueueLabelKey (also the pod finalizer)
PODSET_LABEL: Final = "kueue.x-k8s.io/podset"  # on a started job's pod templates
CLUSTER_QUEUE_LABEL: Final = "kueue.x-k8s.io/cluster-queue-name"  # on admitted pods
LOCAL_QUEUE_LABEL: Final = "kueue.x-k8s.io/local-queue-name"  # on admitted pods
ADMISSION_GATED_BY: Final = "kueue.x-k8s.io/admission-gated-by"
ELASTIC_JOB: Final = "kueue.x-k8s.io/elastic-job"

# --- apis/kueue/v1beta2/topology_types.go (beyond the TAS request keys) ----------------------------
WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/workload"  # on a started job's pod templates
POD_GROUP_POD_INDEX_LABEL: Final = "kueue.x-k8s.io/pod-group-pod-index"
POD_GROUP_POD_INDEX_LABEL_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-pod-index-label"
WORKLOAD_SLICE_NAME: Final = "kueue.x-k8s.io/workload-slice-name"

# --- apis/kueue/v1beta2/multikueue_types.go --------------------------------------------------------
MULTIKUEUE_ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_ORIGIN_UID: Final = "kueue.x-k8s.io/multikueue-origin-uid"
MULTIKUEUE_WORKER_WORKLOAD_POD: Final = "kueue.x-k8s.io/multikueue-worker-workload-pod"

# --- pkg/controller/jobs/pod/constants/constants.go (plain-pod groups) ------------------------------
POD_SUSPENDING_PARENT: Final = "kueue.x-k8s.io/pod-suspending-parent"
POD_GROUP_FAST_ADMISSION: Final = "kueue.x-k8s.io/pod-group-fast-admission"
POD_GROUP_SERVING: Final = "kueue.x-k8s.io/pod-group-serving"
RETRIABLE_IN_GROUP: Final = "kueue.x-k8s.io/retriable-in-group"
IS_GROUP_WORKLOAD: Final = "kueue.x-k8s.io/is-group-workload"

# --- pkg/controller/jobs/job/job_controller.go ----------------------------------------------------
JOB_COMPLETIONS_EQUAL_PARALLELISM: Final = "kueue.x-k8s.io/job-completions-equal-parallelism"
STOPPING: Final = "kueue.x-k8s.io/stopping"

# --- pkg/controller/jobs/raycluster/common.go, pkg/workloadslicing/workloadslicing.go ---------------
RAYCLUSTER_PODSET_REPLICA_SIZES: Final = "kueue.x-k8s.io/raycluster-podset-replica-sizes"
RAYCLUSTER_GENERATION: Final = "kueue.x-k8s.io/raycluster-generation"
WORKLOAD_SLICE_REPLACEMENT_FOR: Final = "kueue.x-k8s.io/workload-slice-replacement-for"

# Kueue's ProvisioningRequest parameters (ProvReqAnnotationPrefix): any name under it is valid.
PROVREQ_PREFIX: Final = "provreq.kueue.x-k8s.io/"

# The keys of a TAS request (what makes Kueue's IsExplicitlyRequestingTAS true) and the group name:
# a near-miss of one of these means the user asked for a placement, so nothing is injected for them.
TOPOLOGY_KEYS: Final = (*ann.EXPLICIT_TAS_ANNOTATIONS, ann.PODSET_GROUP_NAME)

KUEUE_USER_KEYS: Final = frozenset(
    {
        *TOPOLOGY_KEYS,
        ann.POD_INDEX_OFFSET,
        ann.QUEUE_NAME_LABEL,
        ann.POD_GROUP_NAME_LABEL,
        ann.POD_GROUP_TOTAL_COUNT_ANNOTATION,
        ann.JOB_MIN_PARALLELISM_ANNOTATION,
        PRIORITY_CLASS_LABEL,
        PREBUILT_WORKLOAD_NAME,
        MAX_EXEC_TIME_SECONDS_LABEL,
        SAFE_TO_FORCEFULLY_DELETE,
        ADMISSION_GATED_BY,
        ELASTIC_JOB,
        POD_GROUP_POD_INDEX_LABEL_ANNOTATION,
        POD_GROUP_FAST_ADMISSION,
        POD_GROUP_SERVING,
        RETRIABLE_IN_GROUP,
        JOB_COMPLETIONS_EQUAL_PARALLELISM,
    }
)

KUEUE_WRITTEN_KEYS: Final = frozenset(
    {
        ann.POD_ROLE_HASH_ANNOTATION,
        JOB_UID_LABEL,
        JOB_OWNER_GVK,
        JOB_OWNER_NAME,
        COMPONENT_WORKLOAD_INDEX,
        PRIORITY_BOOST,
        WORKLOAD_ALLOWED_RESOURCE_FLAVORS,
        CONCURRENT_ADMISSION_PARENT,
        MANAGED_LABEL,
        PODSET_LABEL,
        CLUSTER_QUEUE_LABEL,
        LOCAL_QUEUE_LABEL,
        WORKLOAD_ANNOTATION,
        POD_GROUP_POD_INDEX_LABEL,
        WORKLOAD_SLICE_NAME,
        MULTIKUEUE_ORIGIN_LABEL,
        MULTIKUEUE_ORIGIN_UID,
        MULTIKUEUE_WORKER_WORKLOAD_POD,
        POD_SUSPENDING_PARENT,
        IS_GROUP_WORKLOAD,
        STOPPING,
        RAYCLUSTER_PODSET_REPLICA_SIZES,
        RAYCLUSTER_GENERATION,
        WORKLOAD_SLICE_REPLACEMENT_FOR,
    }
)

KUEUE_KEYS: Final = KUEUE_USER_KEYS | KUEUE_WRITTEN_KEYS

# Read by Kueue only as labels of the workload's own metadata (jobframework.QueueNameForObject,
# WorkloadPriorityClassName, MaximumExecutionTimeSecondsForObject): as annotations they do nothing.
WORKLOAD_LABEL_KEYS: Final = (ann.QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL, MAX_EXEC_TIME_SECONDS_LABEL)

# tasgate's own keys on workloads: only the opt-out annotation (``decide.gates.opted_out``).
TASGATE_KEYS: Final = frozenset({ann.INJECT_OPT_OUT})

# Each prefix with the keys defined under it, the people-written ones first.
FAMILIES: Final = (
    (ann.KUEUE_PREFIX, KUEUE_USER_KEYS, KUEUE_WRITTEN_KEYS),
    (ann.TASGATE_PREFIX, TASGATE_KEYS, frozenset[str]()),
)
