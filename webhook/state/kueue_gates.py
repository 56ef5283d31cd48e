"""The TAS feature gates as Kueue v0.19.2 resolves and validates them: what tasgate judges with.

A verdict must follow the gates the cluster's Kueue runs, not its defaults: with
``TopologyAwareScheduling`` off Kueue places nothing by topology, with ``TASProfileMixed`` off an
unconstrained PodSet is placed BestFit, and so on (docs/design.md, "Kueue compatibility").
`PlacementGates` carries the value of each placement gate (`state.kueue_proven`) as Kueue
resolves a ``--feature-gates`` flag or ``featureGates`` map: a named gate wins, else Kubernetes'
``AllAlpha``/``AllBeta`` for a gate of that stage, else the default.

Kueue v0.19.2 also refuses to start with some sets (``pkg/config/validation.go:
LoadAndValidateFeatureGates``, exit 1 "conflicting feature gates detected"): every TAS gate that is
on needs ``TopologyAwareScheduling``, so turning TAS off alone stops Kueue. `refusals` names those
errors in Kueue's words and order; a Kueue that does not start places nothing, so tasgate then
judges with the defaults and says why (`decide.kueue.release`). Only the TAS rules are modelled, and only
for v0.19.2: another release's rules are not measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from webhook.state.kueue_proven import PLACEMENT_GATES, PROVEN_RELEASE, Gate

TAS, NODE_REPLACEMENT = "TopologyAwareScheduling", "TASFailedNodeReplacement"
ELASTIC, ELASTIC_TAS = "ElasticJobsViaWorkloadSlices", "ElasticJobsViaWorkloadSlicesWithTAS"
# The other gates v0.19.2's validation ties to TAS, with their defaults (pkg/features/kube_features.go;
# tests/e2e/test_kueue_gate_start.py holds both tables to Kueue's source and binary).
OTHER_TAS_GATES: dict[str, Gate] = {
    NODE_REPLACEMENT: Gate(True, "Beta"),
    "TASFailedNodeReplacementFailFast": Gate(True, "Beta"),
    "TASReplaceNodeOnPodTermination": Gate(True, "Beta"),
    "TASReplaceNodeDueToNotReadyOverFixedTime": Gate(False, "Deprecated"),
    "TASReplaceNodeOnNodeTaints": Gate(True, "Beta"),
    "TASRecomputeAssignmentWithinSchedulingCycle": Gate(True, "Beta"),
    ELASTIC_TAS: Gate(False, "Alpha"),
    ELASTIC: Gate(True, "Beta"),
}
# validateFeatureGateDependency(gate, requires...) calls of LoadAndValidateFeatureGates, in order.
DEPENDENCIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (NODE_REPLACEMENT, (TAS,)),
    ("TASFailedNodeReplacementFailFast", (TAS, NODE_REPLACEMENT)),
    ("TASReplaceNodeOnPodTermination", (TAS, NODE_REPLACEMENT)),
    ("TASReplaceNodeDueToNotReadyOverFixedTime", (TAS, NODE_REPLACEMENT)),
    ("TASBalancedPlacement", (TAS,)),
    ("TASReplaceNodeOnNodeTaints", (TAS,)),
    ("TASMultiLayerTopology", (TAS,)),
    ("TASRespectNodeAffinityPreferred", (TAS,)),
    ("TASRecomputeAssignmentWithinSchedulingCycle", (TAS,)),
)
KNOWN: dict[str, Gate] = {**PLACEMENT_GATES, **OTHER_TAS_GATES}


@dataclass(frozen=True, slots=True)
class PlacementGates:
    """The placement gates' values tasgate judges with; the defaults are Kueue v0.19.2's."""

    tas: bool = True  # TopologyAwareScheduling: TAS at all
    profile_mixed: bool = True  # TASProfileMixed: LeastFreeCapacity for unconstrained PodSets
    multi_layer: bool = True  # TASMultiLayerTopology: the slice constraints annotation
    overlapping: bool = True  # TASHandleOverlappingFlavors: usage across flavors sharing nodes
    balanced: bool = False  # TASBalancedPlacement: balanced placement of preferred PodSets
    affinity_preferred: bool = False  # TASRespectNodeAffinityPreferred: preferred affinity ranks


FIELDS = {  # gate name -> its PlacementGates field
    TAS: "tas",
    "TASProfileMixed": "profile_mixed",
    "TASMultiLayerTopology": "multi_layer",
    "TASHandleOverlappingFlavors": "overlapping",
    "TASBalancedPlacement": "balanced",
    "TASRespectNodeAffinityPreferred": "affinity_preferred",
}
DEFAULTS = PlacementGates()
assert set(FIELDS) == set(PLACEMENT_GATES) and set(FIELDS.values()) == {f.name for f in fields(DEFAULTS)}


def value(gates: Mapping[str, bool], name: str) -> bool:
    """Gate ``name`` as Kueue resolves ``gates``: named, else ``All<stage>``, else its default."""
    gate = KNOWN[name]
    return gates.get(name, gates.get(f"All{gate.stage}", gate.default))


def refusals(gates: Mapping[str, bool]) -> tuple[str, ...]:
    """The TAS errors Kueue v0.19.2's LoadAndValidateFeatureGates returns for ``gates`` (it then
    exits); () when it starts, as far as the TAS gates go."""
    on = {name: value(gates, name) for name in KNOWN}
    found = []
    if not on[TAS] and on["TASProfileMixed"]:
        found.append("cannot use a TAS profile with TAS disabled")
    if not on[TAS] and on["TASHandleOverlappingFlavors"]:
        found.append(f"TASHandleOverlappingFlavors requires {TAS} to be enabled")
    for gate, needs in DEPENDENCIES:
        if on[gate]:
            found += [f"{gate} requires {need} to be enabled" for need in needs if not on[need]]
    if on[ELASTIC_TAS]:
        found += [f"{ELASTIC_TAS} requires {need} to be enabled" for need in (ELASTIC, TAS) if not on[need]]
    return tuple(found)


def judged_gates(
    version: str | None, gates: Mapping[str, bool] | None
) -> tuple[PlacementGates, tuple[str, ...]]:
    """(the placement gates to judge with, why Kueue refuses to start with ``gates``): Kueue's
    defaults when the gates are unknown, or when Kueue ``version`` (v0.19.2) does not start."""
    if gates is None:
        return DEFAULTS, ()
    refused = refusals(gates) if version == PROVEN_RELEASE else ()
    if refused:
        return DEFAULTS, refused
    return PlacementGates(**{field: value(gates, name) for name, field in FIELDS.items()}), ()
