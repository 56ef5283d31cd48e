"""Whether a TAS verdict is for the Kueue the cluster runs: a warning when it is not.

tasgate places as Kueue v0.19.2 (`state.kueue_proven`). Kueue's own Go code answers differently
in other releases (docs/design.md, "Kueue compatibility"): run on 1,250 random cases each,
v0.17.0 gives another admit/reject answer than v0.19.2 for 0.3% of workloads and another
placement for 3% (multi-PodSet workloads and leader/worker groups, kueue#11287), v0.15.0 another
answer for 10% (unconstrained and implied-TAS PodSets, kueue#8157); Kueue's changelog says which
releases carry each bug. So a verdict on a cluster whose Kueue release differs from what tasgate
is proven against says so in one line, naming what is known to differ and never guessing the
other release's placement.

The placement gates are followed, not only said (`state.kueue_gates`): four are reproduced
exactly (`HONOURED`, each proven on Kueue's own code with the gate flipped), two change rankings
tasgate does not model and only keep it from denying what they could admit (`GUARDED`,
`decide.kueue.gate_guard`). The same line says which is which, and when Kueue does not start with the
gates at all. Nothing known (no release, default gates) adds no warning; the audit names the
release judged for, ``unknown`` included, and the flipped gates.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.decide.verdicts import Decision, revised
from webhook.state.kueue_gates import value as gate_value
from webhook.state.kueue_proven import PLACEMENT_GATES, PROVEN_RELEASE
from webhook.state.kueue_release import KueueRelease, version_tuple

MULTI_PODSET = (
    "places multi-PodSet workloads and leader/worker groups differently (pods of earlier PodSets "
    "not counted, kueue#11287, fixed in {fixed})"
)
UNCONSTRAINED = "places unconstrained and implied-TAS PodSets differently (kueue#8157, fixed in {fixed})"
# Releases known to place differently, (first, last, what, fixed in): measured for v0.17.0 and
# v0.15.0 (see above); the ranges are Kueue's changelog (kueue#11287's fix: #11331 in v0.16.9,
# #11326 in v0.17.4, #11293 in v0.18.0; kueue#8157's: #8172 in v0.15.1, #8168 in v0.16.0).
KNOWN_DIFFERENCES = (
    ((0, 15, 0), (0, 15, 0), UNCONSTRAINED, "v0.15.1"),
    ((0, 16, 0), (0, 16, 8), MULTI_PODSET, "v0.16.9"),
    ((0, 17, 0), (0, 17, 3), MULTI_PODSET, "v0.17.4"),
)
OLDEST = (0, 15)  # the first release serving kueue.x-k8s.io/v1beta2, which tasgate reads
# What each placement gate, flipped from its v0.19.2 default, makes Kueue do, and what tasgate does.
HONOURED = {
    "TopologyAwareScheduling": "Kueue places no PodSet by topology, and tasgate judges none",
    "TASProfileMixed": "unconstrained PodSets are placed BestFit, as tasgate places them",
    "TASMultiLayerTopology": (
        "Kueue refuses the podset-slice-required-topology-constraints annotation, as tasgate does"
    ),
    "TASHandleOverlappingFlavors": (
        "a flavor sees only its own Workloads on nodes it shares with another, as tasgate counts them"
    ),
}
GUARDED = {
    "TASBalancedPlacement": (
        "tasgate does not model balanced placement: a preferred-topology PodSet may be placed "
        "elsewhere than it says, and no PodSet placed after one is denied"
    ),
    "TASRespectNodeAffinityPreferred": (
        "tasgate does not rank domains by preferred node affinity: a PodSet that has one may be "
        "placed elsewhere than it says, and neither it nor a PodSet placed after it is denied"
    ),
}


def with_release(decision: Decision, release: KueueRelease) -> Decision:
    """``decision`` with the release it was judged for in its audit, and `release_warning`."""
    audit = {**decision.audit, "kueue-release": release.version or "unknown"}
    gates = flipped(release.gates or {})
    if gates:
        audit["kueue-gates"] = ",".join(f"{name}={_bool(value)}" for name, value in gates.items())
    warning = release_warning(release)
    warnings = (*decision.warnings, warning) if warning else decision.warnings
    return revised(decision, audit=audit, warnings=warnings)


def release_warning(release: KueueRelease) -> str | None:
    """One line when the cluster's Kueue release or a placement gate differs from what tasgate
    is proven against, saying how each flipped gate is followed; None when they agree, or when
    nothing is known (no release, no gate read)."""
    version, gates = release.version, flipped(release.gates or {})
    difference = "" if version in (None, PROVEN_RELEASE) else known_difference(version)
    if not gates and not difference:
        return None
    runs = f"Kueue {version or '(release unknown)'} runs here"
    places = f"tasgate places as Kueue {PROVEN_RELEASE} does"
    if not gates:
        return f"{runs}, but {places}: {difference}"
    listed = ", ".join(f"{name}={_bool(value)}" for name, value in gates.items())
    runs += f" with feature gate{'s' if len(gates) > 1 else ''} {listed}"
    if release.refused:
        more = f" and {len(release.refused) - 1} more" if len(release.refused) > 1 else ""
        return (
            f"{runs}, with which Kueue {version} does not start ({release.refused[0]}{more}) and "
            f"admits nothing; {places} with its default gates"
        )
    said = [HONOURED.get(name) or GUARDED[name] for name in gates]
    otherwise = f"; otherwise {places}: {difference}" if difference else ""
    return f"{runs}: {'; '.join(said)}{otherwise}"


def known_difference(version: str) -> str:
    """What Kueue ``version`` is known to place differently from v0.19.2, or that it is not known."""
    found = version_tuple(version)
    for first, last, what, fixed in KNOWN_DIFFERENCES:
        if found is not None and first <= found <= last:
            return f"{version} {what.format(fixed=fixed)}"
    if found is not None and found[:2] < OLDEST:
        return f"tasgate reads Kueue v{OLDEST[0]}.{OLDEST[1]} and newer only"
    return f"how {version} places is not measured"


def flipped(gates: Mapping[str, bool]) -> dict[str, bool]:
    """The placement gates whose value, as Kueue resolves ``gates`` (Kubernetes' ``AllAlpha`` and
    ``AllBeta`` reach each gate of their stage that is not named), differs from v0.19.2's default."""
    found = {}
    for name, gate in PLACEMENT_GATES.items():
        if (on := gate_value(gates, name)) != gate.default:
            found[name] = on
    return found


def _bool(value: bool) -> str:
    return "true" if value else "false"
