"""What tasgate's placement is proven against: one Kueue release, with its default feature gates.

The one place that names them: the scorer, the rules and the decision path reproduce Kueue
v0.19.2's Go code (the fidelity suite, `make e2e`, runs that very release), and a cluster whose
Kueue or gates differ is told so on every TAS verdict (`decide.kueue.release`). The verdicts follow the
placement gates the cluster's Kueue runs with (`state.kueue_gates`): four reproduced, two guarded
against a denial they could lift (`decide.kueue.gate_guard`). A test holds
``PROVEN_RELEASE`` to the release the end-to-end suite pins (``e2e/tools/kueue/go.mod``).

``PLACEMENT_GATES`` are the gates that change what Kueue's TAS places, with their defaults as
sigs.k8s.io/kueue@v0.19.2 ``pkg/features/kube_features.go`` declares them. Kueue registers its
gates on Kubernetes' ``DefaultMutableFeatureGate``, whose emulation version (1.36) is above every
``0.x`` entry, so a gate's last entry is its default. The stage says which gates Kubernetes'
``AllAlpha`` and ``AllBeta`` switches reach.
"""

from __future__ import annotations

from dataclasses import dataclass

PROVEN_RELEASE = "v0.19.2"


@dataclass(frozen=True, slots=True)
class Gate:
    """One feature gate of Kueue v0.19.2 that changes a TAS placement."""

    default: bool
    stage: str  # "Alpha" or "Beta" in v0.19.2: what AllAlpha / AllBeta set


# What each changes: docs/design.md, "Kueue compatibility".
PLACEMENT_GATES: dict[str, Gate] = {
    "TopologyAwareScheduling": Gate(True, "Beta"),  # TAS itself
    "TASProfileMixed": Gate(True, "Beta"),  # LeastFreeCapacity for unconstrained PodSets
    "TASMultiLayerTopology": Gate(True, "Beta"),  # podset-slice-required-topology-constraints
    "TASHandleOverlappingFlavors": Gate(True, "Beta"),  # usage of flavors sharing nodes
    "TASBalancedPlacement": Gate(False, "Alpha"),  # balanced placement of preferred PodSets
    "TASRespectNodeAffinityPreferred": Gate(False, "Alpha"),  # preferred affinity ranks domains
}
