"""A decision as JSON: `tasgate check -o json|yaml` results (the CLI renders the text form)."""

from __future__ import annotations

from typing import Any

from scorer.model import Assignment, Placement
from webhook.decide.verdicts import Decision, PodSetVerdict
from webhook.model.quantity import format_quantity


def decision_json(d: Decision) -> dict[str, Any]:
    return {
        "apiVersion": d.api_version,
        "kind": d.kind,
        "namespace": d.namespace,
        "name": d.name,
        "allowed": d.allowed,
        "reason": d.reason,
        "message": d.message,
        "warnings": list(d.warnings),
        "patch": list(d.patch),
        "auditAnnotations": dict(d.audit),
        "podGroups": list(d.pod_groups),
        "topology": d.topology,
        "flavors": [
            {
                "flavor": f.flavor,
                "topology": f.topology,
                "fitsNow": f.fits_now,
                "fitsWhenEmpty": f.fits_when_empty,
            }
            for f in d.flavors
        ],
        "queue": d.queue,
        "clusterQueue": d.cluster_queue,
        "generation": d.generation,
        "podSets": [pod_set_json(v) for v in d.pod_sets],
    }


def pod_set_json(v: PodSetVerdict) -> dict[str, Any]:
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
        "fitsNow": v.fits_now,  # the topology now (``now.fits``) and the quota free now
        "quotaNow": v.quota or None,  # Kueue's reason when the quota free now does not hold it
        "now": placement_json(v.now, v.count),
        "whenEmpty": placement_json(v.never, v.count),
        "levels": levels_json(v),
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
