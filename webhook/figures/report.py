"""A decision as JSON: `tasgate check -o json|yaml` results (the CLI renders the text form).

The facts a person reads in the text are the facts here, derived once (``facts``) for both:
quota is the workload's (Kueue reserves it for the whole workload, and a workload held by quota
waits on every flavor), so every judged PodSet of a quota-held workload says ``fitsNow: false``
with ``topologyFitsNow`` saying whether its topology has room, and the flavors say the same. A
podset group's leader (an MPIJob launcher) is placed with its workers: the per-level table is
theirs, so the leader names them instead of repeating their figures as its own.
"""

from __future__ import annotations

import re
from typing import Any

from scorer.model import Assignment, Placement
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, PodSetVerdict
from webhook.model.quantity import format_quantity

# Kubernetes' field.ErrorType words: where one error of an aggregate "[a, b]" starts.
_ERROR_START = re.compile(
    r", (?=[^\s,]+: (?:Invalid value|Required value|Unsupported value|Duplicate value|Forbidden|"
    r"Too many|Too long|Not found|Internal error))"
)


def quota_held(d: Decision) -> str:
    """Kueue's reason when quota in use holds the workload back ("" when it does not)."""
    return next((v.quota for v in d.pod_sets if v.quota), "")


def fits_now(v: PodSetVerdict, held: str) -> bool:
    """Whether the PodSet can start now: its topology has room and quota does not hold it."""
    return v.judged and v.now is not None and v.now.fits and not held


def field_errors(d: Decision) -> list[str]:
    """An invalid object's field errors one by one (the message is Kubernetes' aggregate,
    "[a, b]", as the API server words several; a person reads them as a list, not a Python one)."""
    if d.reason is not Reason.INVALID or not d.message:
        return []
    text = d.message
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return _ERROR_START.split(text)


def group_partners(d: Decision) -> dict[str, str]:
    """Each podset group leader's workers (leader -> workers), as Kueue pairs them: of two PodSets
    naming one group, the one with fewer pods leads (the second, when they are as many)."""
    members: dict[str, list[PodSetVerdict]] = {}
    for v in d.pod_sets:
        if v.judged and v.request.group is not None:
            members.setdefault(v.request.group, []).append(v)
    partners = {}
    for pair in members.values():
        if len(pair) == 2:
            first, second = pair
            workers, leader = (second, first) if second.count > first.count else (first, second)
            partners[leader.name] = workers.name
    return partners


def decision_json(d: Decision) -> dict[str, Any]:
    held = quota_held(d)
    partners = group_partners(d)
    return {
        "apiVersion": d.api_version,
        "kind": d.kind,
        "namespace": d.namespace,
        "name": d.name,
        "allowed": d.allowed,
        "reason": d.reason,
        "message": d.message,
        **({"fieldErrors": field_errors(d)} if d.reason is Reason.INVALID else {}),
        "warnings": list(d.warnings),
        "patch": list(d.patch),
        "auditAnnotations": dict(d.audit),
        "podGroups": list(d.pod_groups),
        "topology": d.topology,
        "flavors": [
            {
                "flavor": f.flavor,
                "topology": f.topology,
                "fitsNow": f.fits_now and not held,  # a workload held by quota starts on no flavor now
                "topologyFitsNow": f.fits_now,
                "fitsWhenEmpty": f.fits_when_empty,
            }
            for f in d.flavors
        ],
        "queue": d.queue,
        "clusterQueue": d.cluster_queue,
        "quotaNow": held or None,
        "generation": d.generation,
        "podSets": [pod_set_json(v, held, partners.get(v.name)) for v in d.pod_sets],
    }


def pod_set_json(v: PodSetVerdict, held: str = "", placed_with: str | None = None) -> dict[str, Any]:
    """One PodSet; ``held``: the workload's quota reason; ``placed_with``: a leader's workers."""
    req = v.request
    requests = {r: format_quantity(r, n) for r, n in sorted(v.requests.items())}
    requests["pods"] = "1"
    return {
        "name": v.name,
        "count": v.count,
        "requests": requests,
        "topologyRequest": {
            "mode": req.mode.value,
            "level": req.level,
            "sliceLevel": req.slice_layers[0].level if req.slice_layers else req.slice_level,
            "sliceSize": req.slice_layers[0].size if req.slice_layers else req.slice_size,
            "group": req.group,
            "injected": v.injected,
        },
        "flavor": v.flavor,
        "judged": v.judged,
        "minCount": v.min_count,
        "admittedNow": v.admitted,
        "admissible": v.admissible,
        "fitsNow": fits_now(v, held),  # it can start now: the topology has room, quota does not hold it
        "topologyFitsNow": v.judged and v.now is not None and v.now.fits,
        "quotaNow": (held or None) if v.judged else None,  # Kueue's reason when quota holds it back
        "now": placement_json(v.now, v.count),
        "whenEmpty": placement_json(v.never, v.count),
        "placedWith": placed_with,  # a group leader: the PodSet whose table is the group's
        "levels": [] if placed_with else levels_json(v),
        **({"native": dict(v.native)} if v.native is not None else {}),
    }


def placement_json(p: Placement | None, count: int) -> dict[str, Any] | None:
    if p is None:
        return None
    assignment = p.assignment
    return {
        "fits": p.fits,
        "maxPods": _placed(p, count) if p.fits else p.fit_count,
        "message": "" if p.fits else p.reason,
        "assignmentLevels": list(assignment.levels) if assignment else [],
        "assignment": _assignment_json(assignment),
    }


def _assignment_json(a: Assignment | None) -> list[dict[str, Any]]:
    return [{"values": list(d.values), "count": d.count} for d in a.domains] if a else []


def levels_json(v: PodSetVerdict) -> list[dict[str, Any]]:
    table = v.never if v.never and v.never.levels else v.now
    rows = []
    for level in (row.level for row in table.levels) if table else ():
        now = v.now.level_row(level) if v.now else None
        never = v.never.level_row(level) if v.never else None
        rows.append(
            {
                "level": level,
                "nowMaxPods": now.max_pods if now else 0,
                "whenEmptyMaxPods": never.max_pods if never else 0,
                "nowBestDomain": list(now.best_domain or ()) if now else [],
                "whenEmptyBestDomain": list(never.best_domain or ()) if never else [],
                "domains": never.domains if never else 0,
                "whenEmptyFittingDomains": never.fitting_domains if never else 0,
            }
        )
    return rows


def _placed(p: Placement, count: int) -> int:
    """Pods a fitting placement puts (fewer than asked under partial admission)."""
    return sum(d.count for d in p.assignment.domains) if p.assignment and p.assignment.domains else count
