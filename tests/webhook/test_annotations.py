"""Annotation and label names, and the lenient parse of a pod template's TAS request."""

from __future__ import annotations

from typing import Any

import pytest

from scorer.model import Mode, SliceLayer, TopologyRequest
from webhook.model import annotations as ann
from webhook.model.podset import topology_request


@pytest.mark.parametrize(
    ("constant", "name"),
    [
        (ann.PODSET_REQUIRED_TOPOLOGY, "kueue.x-k8s.io/podset-required-topology"),
        (ann.PODSET_PREFERRED_TOPOLOGY, "kueue.x-k8s.io/podset-preferred-topology"),
        (ann.PODSET_UNCONSTRAINED_TOPOLOGY, "kueue.x-k8s.io/podset-unconstrained-topology"),
        (ann.PODSET_SLICE_REQUIRED_TOPOLOGY, "kueue.x-k8s.io/podset-slice-required-topology"),
        (ann.PODSET_SLICE_SIZE, "kueue.x-k8s.io/podset-slice-size"),
        (
            ann.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
            "kueue.x-k8s.io/podset-slice-required-topology-constraints",
        ),
        (ann.PODSET_GROUP_NAME, "kueue.x-k8s.io/podset-group-name"),
        (ann.POD_INDEX_OFFSET, "kueue.x-k8s.io/pod-index-offset"),
        (ann.QUEUE_NAME_LABEL, "kueue.x-k8s.io/queue-name"),
        (ann.POD_GROUP_NAME_LABEL, "kueue.x-k8s.io/pod-group-name"),
        (ann.POD_GROUP_TOTAL_COUNT_ANNOTATION, "kueue.x-k8s.io/pod-group-total-count"),
        (ann.COSCHEDULING_POD_GROUP_LABEL, "scheduling.x-k8s.io/pod-group"),
        (ann.COSCHEDULING_LEGACY_POD_GROUP_LABEL, "pod-group.scheduling.sigs.k8s.io"),
        (ann.LIGHTWEIGHT_POD_GROUP_NAME_LABEL, "pod-group.scheduling.sigs.k8s.io/name"),
        (ann.LIGHTWEIGHT_MIN_AVAILABLE_LABEL, "pod-group.scheduling.sigs.k8s.io/min-available"),
        (ann.VOLCANO_GROUP_NAME_ANNOTATION, "scheduling.k8s.io/group-name"),
        (ann.VOLCANO_GROUP_NAME_ALT_ANNOTATION, "scheduling.volcano.sh/group-name"),
        (ann.VOLCANO_GROUP_MIN_MEMBER_ANNOTATION, "scheduling.volcano.sh/group-min-member"),
        (ann.VOLCANO_QUEUE_NAME_ANNOTATION, "scheduling.volcano.sh/queue-name"),
        (ann.RAY_SCHEDULER_NAME_LABEL, "ray.io/scheduler-name"),
        # the short aliases name the same keys
        (ann.REQUIRED_TOPOLOGY, "kueue.x-k8s.io/podset-required-topology"),
        (ann.PREFERRED_TOPOLOGY, "kueue.x-k8s.io/podset-preferred-topology"),
        (ann.GROUP_NAME, "kueue.x-k8s.io/podset-group-name"),
        (ann.QUEUE_LABEL, "kueue.x-k8s.io/queue-name"),
        (ann.COSCHEDULING_LABEL, "scheduling.x-k8s.io/pod-group"),
        (ann.VOLCANO_GROUP_ANNOTATION, "scheduling.k8s.io/group-name"),
    ],
)
def test_names_are_the_upstream_keys(constant: str, name: str) -> None:
    assert constant == name


def test_name_groups() -> None:
    assert ann.COSCHEDULING_LABELS == (
        "scheduling.x-k8s.io/pod-group",
        "pod-group.scheduling.sigs.k8s.io",
        "pod-group.scheduling.sigs.k8s.io/name",
    )
    assert ann.VOLCANO_GROUP_ANNOTATIONS == (
        "scheduling.k8s.io/group-name",
        "scheduling.volcano.sh/group-name",
    )
    assert len(ann.TAS_ANNOTATIONS) == 8
    assert all(name.startswith(ann.KUEUE_PREFIX) for name in ann.TAS_ANNOTATIONS)


REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
CONS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        ({}, TopologyRequest(mode=Mode.NONE)),
        ({"unrelated": "x"}, TopologyRequest(mode=Mode.NONE)),
        ({REQ: RACK}, TopologyRequest(mode=Mode.REQUIRED, level=RACK)),
        ({PREF: BLOCK}, TopologyRequest(mode=Mode.PREFERRED, level=BLOCK)),
        # required wins over preferred, as in Kueue's PodSet builder
        ({PREF: BLOCK, REQ: RACK}, TopologyRequest(mode=Mode.REQUIRED, level=RACK)),
        ({UNC: "true"}, TopologyRequest(mode=Mode.UNCONSTRAINED)),
        ({UNC: "True"}, TopologyRequest(mode=Mode.UNCONSTRAINED)),
        ({UNC: "false"}, TopologyRequest(mode=Mode.NONE)),
        ({UNC: "yes"}, TopologyRequest(mode=Mode.NONE)),
        (
            {REQ: BLOCK, SLICE: RACK, SIZE: "4"},
            TopologyRequest(mode=Mode.REQUIRED, level=BLOCK, slice_level=RACK, slice_size=4),
        ),
        # a slice-only request is unconstrained at the PodSet level
        ({SLICE: RACK, SIZE: "4"}, TopologyRequest(mode=Mode.UNCONSTRAINED, slice_level=RACK, slice_size=4)),
        ({REQ: BLOCK, SLICE: RACK, SIZE: "four"}, TopologyRequest(mode=Mode.REQUIRED, level=BLOCK)),
        ({REQ: BLOCK, SLICE: RACK, SIZE: "0"}, TopologyRequest(mode=Mode.REQUIRED, level=BLOCK)),
        ({REQ: BLOCK, SIZE: "4"}, TopologyRequest(mode=Mode.REQUIRED, level=BLOCK)),
        (
            {
                REQ: BLOCK,
                CONS: (
                    '[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]'
                ),
            },
            TopologyRequest(
                mode=Mode.REQUIRED, level=BLOCK, slice_layers=(SliceLayer(RACK, 16), SliceLayer(HOST, 4))
            ),
        ),
        (
            {CONS: '[{"topology":"cloud.com/rack","size":8}]'},
            TopologyRequest(mode=Mode.UNCONSTRAINED, slice_layers=(SliceLayer(RACK, 8),)),
        ),
        ({REQ: BLOCK, CONS: "not json"}, TopologyRequest(mode=Mode.REQUIRED, level=BLOCK)),
        (
            {REQ: BLOCK, CONS: '[{"topology":"cloud.com/rack","size":0}]'},
            TopologyRequest(mode=Mode.REQUIRED, level=BLOCK),
        ),
        ({REQ: BLOCK, CONS: "[]"}, TopologyRequest(mode=Mode.REQUIRED, level=BLOCK)),
        ({REQ: RACK, GROUP: "lws-group"}, TopologyRequest(mode=Mode.REQUIRED, level=RACK, group="lws-group")),
        ({PREF: RACK, GROUP: "g"}, TopologyRequest(mode=Mode.PREFERRED, level=RACK, group="g")),
        # Kueue drops the group name of a PodSet without required/preferred topology
        ({UNC: "true", GROUP: "g"}, TopologyRequest(mode=Mode.UNCONSTRAINED)),
    ],
)
def test_topology_request(annotations: dict[str, str], want: TopologyRequest) -> None:
    assert topology_request(annotations) == want


def test_topology_request_skips_values_that_are_not_text() -> None:
    annotations: dict[str, Any] = {REQ: 5, PREF: RACK, SIZE: 4, SLICE: HOST}
    assert topology_request(annotations) == TopologyRequest(mode=Mode.PREFERRED, level=RACK)


def test_topology_request_of_the_upstream_lws_sample() -> None:
    leader = {REQ: "cloud.provider.com/topology-rack", GROUP: "lws-group"}
    assert topology_request(leader) == TopologyRequest(
        mode=Mode.REQUIRED, level="cloud.provider.com/topology-rack", group="lws-group"
    )
