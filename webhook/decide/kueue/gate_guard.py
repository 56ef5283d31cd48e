"""The placement gates a verdict follows: reproduced where tasgate can, a guard where it cannot.

``TASProfileMixed`` off makes Kueue place an unconstrained PodSet BestFit, as every other one
(``tas_flavor_snapshot.go: useLeastFreeCapacityAlgorithm``); the scorer does so when the request
says ``least_free=False`` (`placed_request`). Proven on Kueue's own code with the gate off
(tests/e2e/test_kueue_gates_placement.py).

``TASBalancedPlacement`` and ``TASRespectNodeAffinityPreferred`` change which domains Kueue picks
(``findBestDomainsForBalancedPlacement`` for a preferred-topology PodSet; preferred node affinity
first in ``sortedDomains``), rankings the scorer does not model. Balanced placement falls back to
BestFit when it finds no fit, so a preferred PodSet fits exactly when the default gates say so
(on Kueue's code: none of 1,804 workloads with one differs in that), but the domains it picks
decide what is left for the PodSets placed after it, and there Kueue admitted a workload the
default gates deny. A preferred node affinity reorders the domains of its own PodSet, which the
peer cannot give Kueue, so nothing of it is measured. So `guarded` keeps tasgate from denying
what either gate could admit: after the first preferred-topology PodSet (balanced), and from the
first PodSet with a preferred node affinity on, itself included, a "never fits" stays a figure
(``anomaly``: the verdict reads it as no denial) with why in its warning, never a guessed
placement. A workload with neither is judged exactly: Kueue's answer with the gate on is the
default gates' (on Kueue's code: all 1,196 such workloads with balanced placement on, all 3,000
with the affinity gate on; tests/e2e/test_kueue_gates_placement.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from scorer.model import Mode, TopologyRequest
from webhook.decide.verdicts import PodSetVerdict
from webhook.model.podset import PodSetView
from webhook.state.kueue_gates import PlacementGates

BALANCED = (
    'Kueue runs with TASBalancedPlacement=true and may place the preferred-topology PodSet "{name}" '
    "before it elsewhere than tasgate does, leaving it room"
)
AFFINITY = (
    "Kueue runs with TASRespectNodeAffinityPreferred=true and ranks domains by the preferred node "
    'affinity of PodSet "{name}", which tasgate does not model, so what is left for it may differ'
)


def placed_request(request: TopologyRequest, gates: PlacementGates) -> TopologyRequest:
    """``request`` as Kueue places it under ``gates``: BestFit for an unconstrained one when
    ``TASProfileMixed`` is off."""
    return request if gates.profile_mixed or not request.least_free else replace(request, least_free=False)


def guarded(
    verdicts: Sequence[PodSetVerdict], pod_sets: Sequence[PodSetView], gates: PlacementGates
) -> tuple[PodSetVerdict, ...]:
    """``verdicts`` with each "never fits" a gate tasgate does not model could turn into a fit
    kept from denying (`guard_start`)."""
    if not (gates.balanced or gates.affinity_preferred):
        return tuple(verdicts)
    judged = [(v, p) for v, p in zip(verdicts, pod_sets, strict=True) if v.judged]
    placed = [(v.name, v.request, has_preferred_affinity(p.pod_set.template)) for v, p in judged]
    found = guard_start(placed, gates)
    if found is None:
        return tuple(verdicts)
    start, cause = found
    kept = {v.name for v, _ in judged[start:]}
    return tuple(_kept(v, cause) if v.judged and v.name in kept else v for v in verdicts)


def guard_start(
    placed: Sequence[tuple[str, TopologyRequest, bool]], gates: PlacementGates
) -> tuple[int, str] | None:
    """(the first of the PodSets Kueue places, in its order, whose "never fits" is no denial; why)
    for ``placed`` (name, request, has a preferred node affinity): from the first PodSet with a
    preferred node affinity, itself included; after the first preferred-topology PodSet under
    balanced placement. None: every PodSet is judged exactly."""
    for i, (name, request, affinity) in enumerate(placed):
        if gates.affinity_preferred and affinity:
            return i, AFFINITY.format(name=name)
        if gates.balanced and request.mode is Mode.PREFERRED:
            return i + 1, BALANCED.format(name=name)
    return None


def _kept(v: PodSetVerdict, cause: str) -> PodSetVerdict:
    never = v.never
    if never is None or never.fits or never.anomaly:
        return v
    return replace(v, never=replace(never, anomaly=True, reason=f"{never.reason}; not denied: {cause}"))


def has_preferred_affinity(template: Mapping[str, Any]) -> bool:
    """Kueue's test: the pod template's ``preferredDuringSchedulingIgnoredDuringExecution`` node
    affinity has a term (``len(preferredAffinity) > 0``)."""
    found: Any = template
    for key in ("spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"):
        found = found.get(key) if isinstance(found, Mapping) else None
    return isinstance(found, list) and len(found) > 0
