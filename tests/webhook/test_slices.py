"""Slices: a size that does not divide the count (issue 18.6) and advice counted in slices.

The Job is the one Kueue's webhook stored in the capture (``manifests/kueue_stored/job.yaml``), its
count and slice annotations changed; the cluster is the capture's (one block of two racks of four
8-GPU nodes, Topology block / rack / hostname). What Kueue and the cluster do with the pods left
over was measured on the real stack (tests/e2e_cluster/test_slices.py); here the verdict is held to
it. Every never-fits text for a sliced PodSet is checked by *following its advice*: the count it
names is a whole number of slices, and asked for, it fits the empty cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from tests.webhook.conftest import GPU, HOST, running_pod
from tests.webhook.test_kueue_fidelity import BLOCK, DEFAULT, RACK, gpu_nodes, queues, stored
from webhook.decide.decision import decide
from webhook.decide.reasons import MEANING, Reason
from webhook.decide.verdicts import Decision, Review
from webhook.files.policy import load_policy
from webhook.state.cluster import ClusterState, build_state

NONE = load_policy("none")
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
COSCHEDULING = "scheduling.x-k8s.io/pod-group"


def sliced(pods: int, annotations: Mapping[str, str], gpus: int = 8) -> dict[str, Any]:
    """The stored Job with ``pods`` pods of ``gpus`` GPUs and ``annotations`` as its TAS request."""
    obj = stored("job")
    obj["spec"]["parallelism"] = obj["spec"]["completions"] = pods
    obj["spec"]["template"]["metadata"]["annotations"] = dict(annotations)
    resources = obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][GPU] = resources["limits"][GPU] = str(gpus)
    return obj


def capture_cluster(busy: int = 0) -> ClusterState:
    """The capture's 8 nodes; ``busy`` of rack b0-r0's nodes run an 8-GPU pod."""
    nodes = gpu_nodes()
    pods = [running_pod(f"busy-{i}", nodes[i]["metadata"]["name"], 8) for i in range(busy)]
    return build_state([*nodes, *pods, *queues()])


def check(obj: Mapping[str, Any], state: ClusterState | None = None) -> Decision:
    return decide(Review(obj, namespace="kueue-capture"), state or capture_cluster(), NONE)


def placed_pods(d: Decision) -> int:
    (v,) = d.pod_sets
    assert v.now is not None and v.now.assignment is not None
    return v.now.assignment.total


# --- a slice size that does not divide the count ---------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "annotations", "size", "per"),
    [
        (5, {REQUIRED: RACK, SLICE: HOST, SIZE: "2"}, 2, "node"),
        (7, {REQUIRED: BLOCK, SLICE: RACK, SIZE: "3"}, 3, "rack"),
        (3, {PREFERRED: RACK, SLICE: HOST, SIZE: "2"}, 2, "node"),
        (7, {REQUIRED: BLOCK, LAYERS: f'[{{"topology":"{RACK}","size":3}}]'}, 3, "rack"),
    ],
    ids=["5/2 required", "7/3 required", "3/2 preferred", "7/3 constraints"],
)
def test_a_gang_whose_slices_do_not_divide_its_count_is_denied_with_what_kueue_does(
    pods: int, annotations: Mapping[str, str], size: int, per: str
) -> None:
    d = check(ganged(sliced(pods, annotations, gpus=4)))
    placed = pods // size * size
    assert (d.allowed, d.reason) == (False, Reason.PARTIAL_SLICE), d.message
    admits = f"Kueue admits {placed} of {pods} pods, as {placed // size} whole slice(s) of {size} per {per}"
    assert admits in d.message
    assert "1 pod gets no domain and stays gated" in d.message
    assert f"a multiple of {size} ({placed} or {placed + size})" in d.message
    # The placement Kueue makes is kept, for the fidelity comparison: whole slices only.
    assert placed_pods(d) == placed
    assert (d.audit["decision"], d.audit["reason"]) == ("deny", "partial-slice")
    assert d.patch == () and d.pod_groups == ()


def ganged(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` made a gang by its user: the Coscheduling label on its pod template."""
    obj["spec"]["template"]["metadata"].setdefault("labels", {})[COSCHEDULING] = "my-gang"
    return obj


def test_without_a_gang_it_runs_and_is_admitted_with_a_warning() -> None:
    """Measured on the real stack: the leftover pod starts when a placed one ends."""
    d = check(sliced(5, {REQUIRED: RACK, SLICE: HOST, SIZE: "2"}, gpus=4))
    assert (d.allowed, d.reason) == (True, Reason.FITS), d.message
    (warning,) = [w for w in d.warnings if "stay gated until a placed pod ends" in w]
    assert "Kueue admits 4 of 5 pods now, as 2 whole slice(s) of 2 per node" in warning
    assert "A multiple of 2 (4 or 6) runs at once" in warning
    assert placed_pods(d) == 4


def test_the_same_request_at_a_count_the_slices_divide_is_admitted() -> None:
    d = check(sliced(6, {REQUIRED: BLOCK, SLICE: RACK, SIZE: "3"}, gpus=4))
    assert (d.allowed, d.reason) == (True, Reason.FITS) and placed_pods(d) == 6


def test_several_left_over_pods_are_counted() -> None:
    d = check(ganged(sliced(8, {REQUIRED: BLOCK, SLICE: RACK, SIZE: "3"}, gpus=4)))
    assert d.reason is Reason.PARTIAL_SLICE and "2 pods get no domain and stay gated" in d.message


def test_a_never_fitting_sliced_request_keeps_its_own_cause() -> None:
    d = check(sliced(9, {REQUIRED: RACK, SLICE: RACK, SIZE: "4"}))
    assert d.reason is Reason.NEVER_FITS, d.message


def test_the_policy_makes_no_gang_of_it() -> None:
    """The default policy would add a Coscheduling gang of all 5 pods, which would never start."""
    d = decide(Review(sliced(5, {REQUIRED: RACK, SLICE: HOST, SIZE: "2"}, gpus=4), "kueue-capture"),
               capture_cluster(), DEFAULT)  # fmt: skip
    assert d.allowed and d.pod_groups == (), d.message
    assert COSCHEDULING not in str(d.patch)
    assert any("no gang label added" in w for w in d.warnings)


def test_the_reason_is_documented() -> None:
    assert "whole slices" in MEANING[Reason.PARTIAL_SLICE]


# --- never-fits advice, counted in slices, checked by following it ---------------------------------

AT_MOST = re.compile(r"at most (\d+) slices? of \d+ \((\d+) pods?\)|ask for at most (\d+) pods?")


def follow(text: str, annotations: Mapping[str, str], size: int, state: ClusterState) -> list[int]:
    """Every count the text advises: a positive multiple of ``size`` that fits the empty cluster."""
    counts = []
    for slices, pods, plain in AT_MOST.findall(text):
        n = int(pods or plain)
        assert n > 0 and n % size == 0, (n, text)
        if slices:
            assert int(slices) * size == n, text
        d = check(sliced(n, annotations), state)
        assert d.reason in (Reason.FITS, Reason.WAITS), (n, d.message)
        counts.append(n)
    return counts


# Each case: (pods, annotations, slice size, what the text must say, the counts it advises).
NEVER = [
    pytest.param(
        12, {REQUIRED: BLOCK, SLICE: RACK, SIZE: "3"}, 3,
        "the largest block holds 2 slices of 3 (6 pods) even when empty", [6],
        id="required: the largest domain, the topology too small",
    ),
    pytest.param(
        12, {PREFERRED: BLOCK, SLICE: RACK, SIZE: "3"}, 3,
        "the whole topology holds only 2 slices of 3 (6 pods) even when empty", [6],
        id="preferred: the whole topology",
    ),
    pytest.param(
        8, {REQUIRED: RACK, SLICE: RACK, SIZE: "8"}, 8,
        'no rack holds one slice of 8 pods even when empty (the largest holds 4); use slices of at most '
        '4 pods or "topology.example.com/block" as the level for the PodSet and its slices', [],
        id="no slice fits its level: smaller slices or both levels coarser",
    ),
    pytest.param(
        4, {REQUIRED: RACK, SLICE: HOST, SIZE: "2"}, 2,
        'no node holds one slice of 2 pods even when empty (the largest holds 1); use slices of at most '
        '1 pod or "topology.example.com/rack" as the slice level', [],
        id="no slice fits a node: a coarser slice level",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("pods", "annotations", "size", "says", "advised"), NEVER)
def test_never_fits_advice_is_in_slices_and_fits_when_followed(
    pods: int, annotations: Mapping[str, str], size: int, says: str, advised: list[int]
) -> None:
    state = capture_cluster()
    d = check(sliced(pods, annotations), state)
    assert d.reason is Reason.NEVER_FITS, d.message
    assert f"({pods} pods × nvidia.com/gpu: 8, in slices of {size} per" in d.message
    assert says in d.message, d.message
    assert follow(d.message, annotations, size, state) == advised
    assert "at most 0" not in d.message


def test_required_sliced_advice_names_a_coarser_level_in_slices() -> None:
    state = build_state([*gpu_nodes(blocks=2, racks=2), *queues()])  # 2 blocks of 2 racks of 4 nodes
    annotations = {REQUIRED: RACK, SLICE: RACK, SIZE: "3"}
    d = check(sliced(6, annotations), state)
    assert d.reason is Reason.NEVER_FITS, d.message
    assert 'A "topology.example.com/block" domain holds 2 slices; use that level' in d.message
    assert follow(d.message, annotations, 3, state) == [3]
    wider = check(sliced(6, {**annotations, REQUIRED: BLOCK}), state)
    assert wider.reason is Reason.FITS, wider.message


def test_required_sliced_advice_to_spread_when_no_single_domain_holds_it() -> None:
    state = build_state([*gpu_nodes(blocks=2, racks=1), *queues()])  # 2 blocks of one 4-node rack
    annotations = {REQUIRED: BLOCK, SLICE: RACK, SIZE: "3"}
    d = check(sliced(6, annotations), state)
    assert "No single domain holds it; use podset-preferred-topology to spread" in d.message, d.message
    assert follow(d.message, annotations, 3, state) == [3]
    spread = check(sliced(6, {PREFERRED: BLOCK, SLICE: RACK, SIZE: "3"}), state)
    assert spread.reason is Reason.FITS, spread.message


def test_a_blocking_cause_names_the_slices_too() -> None:
    d = check(sliced(4, {REQUIRED: RACK, SLICE: HOST, SIZE: "2"}, gpus=16))
    assert d.reason is Reason.NEVER_FITS and "in slices of 2 per node) can never be placed: one pod asks" in (
        d.message
    )


# --- must-wait, counted in slices ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({REQUIRED: BLOCK, SLICE: RACK, SIZE: "4"}, "the best block has room for 1 of 2 slices now"),
        ({PREFERRED: BLOCK, SLICE: RACK, SIZE: "4"}, "the topology has room for 1 of 2 slices now"),
    ],
    ids=["required", "preferred"],
)
def test_must_wait_counts_slices(annotations: Mapping[str, str], says: str) -> None:
    d = check(sliced(8, annotations), capture_cluster(busy=1))
    assert d.reason is Reason.WAITS and any(says in w for w in d.warnings), d.warnings


def test_a_volcano_gang_is_warned_not_denied() -> None:
    """Only a Coscheduling gang of the leftover PodSet's own pods was seen never to start; a
    Volcano gang's minMember may be no more than the placed pods."""
    obj = sliced(5, {REQUIRED: RACK, SLICE: HOST, SIZE: "2"}, gpus=4)
    obj["spec"]["template"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "pg"
    d = check(obj)
    assert d.allowed and any("stay gated until a placed pod ends" in w for w in d.warnings), d.message
