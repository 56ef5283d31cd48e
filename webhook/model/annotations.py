"""Every label and annotation name tasgate reads or writes (``model.keys`` adds Kueue's others).

Kueue reads its Topology-Aware Scheduling request from the *pod template's* annotations (not the
job's own metadata). Gang schedulers read pod-group membership from pod labels (Coscheduling) or
pod annotations (Volcano). ``model.podset`` reads them; nothing else looks at template metadata.
"""

from __future__ import annotations

from typing import Final

# --- Kueue Topology-Aware Scheduling (pod-template annotations) ---------------------------------
KUEUE_PREFIX: Final = "kueue.x-k8s.io/"
PODSET_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-required-topology"
PODSET_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
PODSET_UNCONSTRAINED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
PODSET_SLICE_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-slice-required-topology"
PODSET_SLICE_SIZE: Final = "kueue.x-k8s.io/podset-slice-size"
PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: Final = (
    "kueue.x-k8s.io/podset-slice-required-topology-constraints"
)
PODSET_GROUP_NAME: Final = "kueue.x-k8s.io/podset-group-name"
# Written by Kueue's MPIJob/LWS webhooks, read by its topology ungater; validated by Kueue too.
POD_INDEX_OFFSET: Final = "kueue.x-k8s.io/pod-index-offset"

TAS_ANNOTATIONS: Final = (
    PODSET_REQUIRED_TOPOLOGY,
    PODSET_PREFERRED_TOPOLOGY,
    PODSET_UNCONSTRAINED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_SIZE,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    PODSET_GROUP_NAME,
    POD_INDEX_OFFSET,
)

# --- tasgate's own (workload metadata) ---------------------------------------------------------
TASGATE_PREFIX: Final = "tasgate.io/"
# "false": the policy injects nothing into this workload (no TAS annotation, no gang label).
INJECT_OPT_OUT: Final = "tasgate.io/inject"

# --- Kueue queueing and plain-pod groups (object metadata) --------------------------------------
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
POD_GROUP_NAME_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-total-count"
POD_ROLE_HASH_ANNOTATION: Final = "kueue.x-k8s.io/role-hash"
# Partial admission: a batch Job's minimum parallelism (Kueue's PodSet.minCount).
JOB_MIN_PARALLELISM_ANNOTATION: Final = "kueue.x-k8s.io/job-min-parallelism"

# --- Gang schedulers (pod-template metadata) -----------------------------------------------------
# scheduler-plugins Coscheduling: PodGroupLabel, "scheduling.x-k8s.io/pod-group" since v0.25.7.
COSCHEDULING_POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
# The same label before the API group moved to scheduling.x-k8s.io.
COSCHEDULING_LEGACY_POD_GROUP_LABEL: Final = "pod-group.scheduling.sigs.k8s.io"
# The retired "lightweight" Coscheduling plugin: group and quorum carried on the pods themselves.
LIGHTWEIGHT_POD_GROUP_NAME_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_MIN_AVAILABLE_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/min-available"
COSCHEDULING_LABELS: Final = (
    COSCHEDULING_POD_GROUP_LABEL,
    COSCHEDULING_LEGACY_POD_GROUP_LABEL,
    LIGHTWEIGHT_POD_GROUP_NAME_LABEL,
)

# Volcano: KubeGroupNameAnnotationKey and VolcanoGroupNameAnnotationKey both name the PodGroup.
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME_ALT_ANNOTATION: Final = "scheduling.volcano.sh/group-name"
VOLCANO_GROUP_ANNOTATIONS: Final = (VOLCANO_GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ALT_ANNOTATION)
# Read by Volcano's PodGroup controller from the *owner* of the pods (Job, ReplicaSet, ...).
VOLCANO_GROUP_MIN_MEMBER_ANNOTATION: Final = "scheduling.volcano.sh/group-min-member"
VOLCANO_QUEUE_NAME_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"

# KubeRay's batch-scheduler label (operator-managed gang when "volcano").
RAY_SCHEDULER_NAME_LABEL: Final = "ray.io/scheduler-name"

# Short names other modules use for the same keys.
REQUIRED_TOPOLOGY: Final = PODSET_REQUIRED_TOPOLOGY
PREFERRED_TOPOLOGY: Final = PODSET_PREFERRED_TOPOLOGY
UNCONSTRAINED_TOPOLOGY: Final = PODSET_UNCONSTRAINED_TOPOLOGY
SLICE_REQUIRED_TOPOLOGY: Final = PODSET_SLICE_REQUIRED_TOPOLOGY
SLICE_SIZE: Final = PODSET_SLICE_SIZE
SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: Final = PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS
GROUP_NAME: Final = PODSET_GROUP_NAME
QUEUE_LABEL: Final = QUEUE_NAME_LABEL
COSCHEDULING_LABEL: Final = COSCHEDULING_POD_GROUP_LABEL
VOLCANO_GROUP_ANNOTATION: Final = VOLCANO_GROUP_NAME_ANNOTATION

# The annotations that make a PodSet explicitly request TAS (Kueue's IsExplicitlyRequestingTAS).
EXPLICIT_TAS_ANNOTATIONS = (
    PODSET_REQUIRED_TOPOLOGY,
    PODSET_PREFERRED_TOPOLOGY,
    PODSET_UNCONSTRAINED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_SIZE,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
)
