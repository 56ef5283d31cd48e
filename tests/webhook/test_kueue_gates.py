"""The placement gates the cluster's Kueue runs with are followed, not only said: four reproduced
(TopologyAwareScheduling, TASProfileMixed, TASMultiLayerTopology, TASHandleOverlappingFlavors),
two guarded (TASBalancedPlacement, TASRespectNodeAffinityPreferred: never a denial they could
turn into an admission), and a gate set Kueue v0.19.2 refuses to start with is said as such.

Each gate is read as tasgate reads it on a cluster: from the ``featureGates`` of Kueue v0.19.2's
own release manifests (tests/webhook/manifests). What Kueue's Go code does with each gate flipped
is proven in tests/e2e/test_kueue_gates_placement.py (its TAS code) and
tests/e2e/test_kueue_gates_webhook.py (the running Kueue); here, that tasgate's verdicts follow it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from scorer.model import Mode, PodSetRequest, TopologyRequest
from tests.webhook.conftest import GI, GPU, HOST, PREFERRED, RACK, REQUIRED, job, judge, manifest, pod_set
from tests.webhook.test_kueue_release import state_with, with_config
from tests.webhook.test_workload_usage import BLOCK as NODE_BLOCK
from tests.webhook.test_workload_usage import HOSTS, NODES, captured, gpus_free, kueue
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.state.cluster import ClusterState, build_state
from webhook.state.kueue_gates import OTHER_TAS_GATES, refusals

CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
# TopologyAwareScheduling off, and every TAS gate that needs it off too: a set Kueue v0.19.2 starts with.
TAS_OFF = {
    "TopologyAwareScheduling": False,
    "TASProfileMixed": False,
    "TASHandleOverlappingFlavors": False,
    "TASMultiLayerTopology": False,
    **{name: False for name, gate in OTHER_TAS_GATES.items() if gate.default and name.startswith("TAS")},
}


def gated(gates: Mapping[str, bool], objects: tuple[dict[str, Any], ...] = ()) -> ClusterState:
    """The sample cluster with Kueue v0.19.2's release manifests, ``gates`` in its Configuration."""
    return state_with([*with_config(yaml.safe_dump({"featureGates": dict(gates)})), *objects])


def jobset(*replicated: tuple[str, int, Mapping[str, str]]) -> dict[str, Any]:
    """A JobSet of (name, pods, annotations) replicated Jobs, 8 GPUs a pod, on the sample queue."""
    obj = copy.deepcopy(manifest("../../../examples/jobset-never-fits.yaml"))
    template = obj["spec"]["replicatedJobs"][0]
    obj["spec"]["replicatedJobs"] = []
    for name, pods, written in replicated:
        found = copy.deepcopy(template)
        found.update(name=name, replicas=1)
        found["template"]["spec"].update(parallelism=pods, completions=pods)
        found["template"]["spec"]["template"]["metadata"]["annotations"] = dict(written)
        obj["spec"]["replicatedJobs"].append(found)
    return obj


# --- TopologyAwareScheduling=false: no TAS at all ------------------------------------------------


def test_tas_off_never_denies_on_topology_and_says_why(none_policy: Policy) -> None:
    never = manifest("../../../examples/jobset-never-fits.yaml")
    bad_level = job(4, annotations={REQUIRED: "not a label!"})
    for obj in (never, bad_level):
        assert not judge(obj, gated({}), none_policy).allowed  # default gates: never-fits, invalid
        d = judge(obj, gated(TAS_OFF), none_policy)
        assert (d.allowed, d.reason) == (True, Reason.NO_TAS)
        assert d.message == (
            "no TAS: Kueue runs with feature gate TopologyAwareScheduling=false: "
            "it places no PodSet by topology"
        )


def test_tas_off_alone_stops_kueue_and_is_judged_and_said_as_such(none_policy: Policy) -> None:
    state = gated({"TopologyAwareScheduling": False})
    assert state.kueue_release.refused[:2] == (
        "cannot use a TAS profile with TAS disabled",
        "TASHandleOverlappingFlavors requires TopologyAwareScheduling to be enabled",
    )
    d = judge(manifest("../../../examples/jobset-never-fits.yaml"), state, none_policy)
    assert (d.allowed, d.reason) == (False, Reason.NEVER_FITS)
    assert d.warnings[-1] == (
        "Kueue v0.19.2 runs here with feature gate TopologyAwareScheduling=false, with which Kueue v0.19.2 "
        "does not start (cannot use a TAS profile with TAS disabled and 7 more) and admits nothing; "
        "tasgate places as Kueue v0.19.2 does with its default gates"
    )
    assert refusals(TAS_OFF) == () and refusals({"AllBeta": False}) == ()


# --- TASMultiLayerTopology=false: the constraints annotation refused -----------------------------


@pytest.mark.parametrize("value", ['[{"topology": "cloud.provider.com/topology-rack", "size": 2}]', "[nope"])
def test_multi_layer_off_refuses_the_constraints_annotation_as_kueue_does(
    value: str, none_policy: Policy
) -> None:
    obj = job(4, annotations={REQUIRED: RACK, CONSTRAINTS: value})
    d = judge(obj, gated({"TASMultiLayerTopology": False}), none_policy)
    assert (d.allowed, d.reason) == (False, Reason.INVALID)
    assert d.message == (
        f"spec.template.metadata.annotations[{CONSTRAINTS}]: Forbidden: the TASMultiLayerTopology "
        "feature gate must be enabled to use this annotation"
    )
    on = judge(obj, gated({}), none_policy)
    assert on.allowed == value.startswith("[{"), on.message  # the gate on: read, and judged


# --- TASProfileMixed=false: unconstrained PodSets placed BestFit --------------------------------


def test_profile_mixed_off_places_unconstrained_podsets_best_fit(none_policy: Policy) -> None:
    obj = job(5, gpus=2, annotations={UNCONSTRAINED: "true"})
    least_free = pod_set(judge(obj, gated({}), none_policy), "main")
    state = gated({"TASProfileMixed": False})
    best_fit = pod_set(judge(obj, state, none_policy), "main")
    assert least_free.now is not None and best_fit.now is not None
    assert least_free.now.assignment != best_fit.now.assignment
    flavor = state.flavors["tas-flavor"]
    snapshot = state.flavor_snapshot(flavor, state.topologies[flavor.topology_name or ""])
    request = TopologyRequest(Mode.UNCONSTRAINED, least_free=False)  # the scorer's BestFit profile
    requests = {"cpu": 4000, "memory": 32 * GI, GPU: 2}
    (placed,) = snapshot.now.place([PodSetRequest("main", 5, requests, request)])
    assert best_fit.now.assignment == placed.assignment


# --- TASHandleOverlappingFlavors=false: each flavor sees its own Workloads only ------------------


def test_overlapping_off_sees_only_a_flavors_own_workloads_on_shared_hosts() -> None:
    other = kueue("hosts-2", [NODE_BLOCK, HOST], "other-flavor")  # the same hosts, another flavor
    objects = [*NODES, *HOSTS, *other, captured("workloads", "job-run-")]
    seen = build_state([*objects, *with_config("featureGates:\n  TASHandleOverlappingFlavors: true\n")])
    alone = build_state([*objects, *with_config("featureGates:\n  TASHandleOverlappingFlavors: false\n")])
    assert gpus_free(seen, "other-flavor")[("b1", "n0")] == 0, "on: the other flavor's Workload counts"
    assert set(gpus_free(alone, "other-flavor").values()) == {8}, "off: it does not"
    assert gpus_free(alone)[("r1", "n0")] == 0, "its own flavor still counts it"


# --- the guarded gates: never a denial they could turn into an admission ------------------------


def test_balanced_placement_keeps_podsets_after_a_preferred_one_from_denial(none_policy: Policy) -> None:
    preferred_first = jobset(("head", 2, {PREFERRED: RACK}), ("tail", 5, {REQUIRED: RACK}))
    assert not judge(preferred_first, gated({}), none_policy).allowed  # a rack holds 4: never fits
    d = judge(preferred_first, gated({"TASBalancedPlacement": True}), none_policy)
    assert (d.allowed, d.reason) == (True, Reason.WAITS)
    said = (
        "not denied: Kueue runs with TASBalancedPlacement=true and may place the "
        'preferred-topology PodSet "head" before it elsewhere than tasgate does, leaving it room'
    )
    assert any(said in w for w in d.warnings), d.warnings
    for exact in (  # nothing preferred before the PodSet that never fits: judged as ever
        jobset(("tail", 5, {REQUIRED: RACK}), ("head", 2, {PREFERRED: RACK})),
        jobset(("tail", 5, {REQUIRED: RACK})),
    ):
        d = judge(exact, gated({"TASBalancedPlacement": True}), none_policy)
        assert (d.allowed, d.reason) == (False, Reason.NEVER_FITS)


def test_preferred_node_affinity_keeps_its_podset_from_denial(none_policy: Policy) -> None:
    term = {
        "weight": 1,
        "preference": {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["r"]}]},
    }
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    wide = job(5, annotations={REQUIRED: RACK}, affinity=affinity)
    assert not judge(wide, gated({}), none_policy).allowed
    d = judge(wide, gated({"TASRespectNodeAffinityPreferred": True}), none_policy)
    assert (d.allowed, d.reason) == (True, Reason.WAITS)
    assert any("ranks domains by the preferred node affinity" in w for w in d.warnings)
    plain = judge(
        job(5, annotations={REQUIRED: RACK}), gated({"TASRespectNodeAffinityPreferred": True}), none_policy
    )
    assert (plain.allowed, plain.reason) == (False, Reason.NEVER_FITS)  # no preferred affinity: exact
