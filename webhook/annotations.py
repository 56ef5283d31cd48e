"""Every label and annotation name tasgate reads or writes, and the lenient TAS request parse.

Kueue reads its Topology-Aware Scheduling request from the *pod template's* annotations (not the
job's own metadata). Gang schedulers read pod-group membership from pod labels (Coscheduling) or
pod annotations (Volcano). ``topology_request`` turns a template's annotations into the scorer's
``TopologyRequest``; it never fails and is meant for annotations that already passed validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from scorer.model import Mode, SliceLayer, TopologyRequest
from webhook.validation_gofmt import parse_bool, parse_int
from webhook.validation_gojson import decode_constraints

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

# --- Kueue queueing and plain-pod groups (object metadata) --------------------------------------
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
POD_GROUP_NAME_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-total-count"

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


def topology_request(annotations: Mapping[str, str]) -> TopologyRequest:
    """The TAS request the annotations make, read the way Kueue's PodSet builder reads them.

    Required wins over preferred, preferred over unconstrained ("true" in any Go spelling). Slice
    annotations without a mode annotation make the PodSet unconstrained, as in Kueue's slice-only
    requests. Values that do not parse are skipped rather than raised: validation reports them.
    """
    text = {k: v for k, v in annotations.items() if isinstance(v, str)}
    mode, level = Mode.NONE, None
    if PODSET_REQUIRED_TOPOLOGY in text:
        mode, level = Mode.REQUIRED, text[PODSET_REQUIRED_TOPOLOGY]
    elif PODSET_PREFERRED_TOPOLOGY in text:
        mode, level = Mode.PREFERRED, text[PODSET_PREFERRED_TOPOLOGY]
    elif parse_bool(text.get(PODSET_UNCONSTRAINED_TOPOLOGY, "")):
        mode = Mode.UNCONSTRAINED

    slice_level = text.get(PODSET_SLICE_REQUIRED_TOPOLOGY)
    slice_size = parse_int(text.get(PODSET_SLICE_SIZE, ""))
    if slice_level is None or slice_size is None or slice_size < 1:
        slice_level, slice_size = None, None
    layers = _layers(text.get(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS))
    if mode is Mode.NONE and (slice_level is not None or layers):
        mode = Mode.UNCONSTRAINED

    group = text.get(PODSET_GROUP_NAME) if mode in (Mode.REQUIRED, Mode.PREFERRED) else None
    return TopologyRequest(
        mode=mode,
        level=level,
        slice_level=slice_level,
        slice_size=slice_size,
        slice_layers=layers,
        group=group,
    )


def _layers(raw: str | None) -> tuple[SliceLayer, ...]:
    if raw is None:
        return ()
    layers, err = decode_constraints(raw)
    if err is not None or not 1 <= len(layers) <= 3:
        return ()
    if any(layer.size < 1 or not layer.topology for layer in layers):
        return ()
    return tuple(SliceLayer(layer.topology, layer.size) for layer in layers)
