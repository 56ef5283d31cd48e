"""A decision as JSON (`-o json`, the audit log) and as text a person reads on a terminal."""

from __future__ import annotations

from typing import Any

from scorer.model import Assignment, Mode, Placement
from webhook.decide.messages import short_level
from webhook.decide.patch import added_keys
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
            {"flavor": f.flavor, "topology": f.topology, "fitsNow": f.fits_now, "fitsNever": f.fits_never}
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
        "now": placement_json(v.now, v.count),
        "never": placement_json(v.never, v.count),
        "levels": _levels_json(v),
    }


def placement_json(p: Placement | None, count: int) -> dict[str, Any] | None:
    if p is None:
        return None
    assignment = p.assignment
    return {
        "fits": p.fits,
        "maxPods": count if p.fits else p.fit_count,
        "message": "" if p.fits else p.reason,
        "assignmentLevels": list(assignment.levels) if assignment else [],
        "assignment": _assignment_json(assignment),
    }


def _assignment_json(a: Assignment | None) -> list[dict[str, Any]]:
    return [{"values": list(d.values), "count": d.count} for d in a.domains] if a else []


def _levels_json(v: PodSetVerdict) -> list[dict[str, Any]]:
    table = v.never if v.never and v.never.levels else v.now
    rows = []
    for level in (row.level for row in table.levels) if table else ():
        now = v.now.level_row(level) if v.now else None
        never = v.never.level_row(level) if v.never else None
        rows.append(
            {
                "level": level,
                "nowMaxPods": now.max_pods if now else 0,
                "neverMaxPods": never.max_pods if never else 0,
                "nowBestDomain": list(now.best_domain or ()) if now else [],
                "neverBestDomain": list(never.best_domain or ()) if never else [],
                "domains": never.domains if never else 0,
                "neverFittingDomains": never.fitting_domains if never else 0,
            }
        )
    return rows


def decision_text(d: Decision) -> str:
    """One verdict per workload, then a per-level table for each PodSet."""
    verdict = "ALLOWED" if d.allowed else "DENIED"
    lines = [f"{d.kind} {d.namespace}/{d.name}: {verdict} ({d.reason})"]
    if d.topology:
        where = f"topology {d.topology}" + (f", queue {d.queue}" if d.queue else "")
        lines.append(f"  {where}")
    if d.message:
        lines.append(f"  {d.message}")
    lines += [f"  warning: {w}" for w in d.warnings]
    for v in d.pod_sets:
        lines += _pod_set_text(v)
    if d.patch:
        keys = ", ".join(sorted({key for op in d.patch for key in added_keys(op)}))
        lines.append(f"  patch: {len(d.patch)} op(s) adding {keys}")
    lines += [
        f"  podgroup: {g['kind']} {g['metadata']['name']} minMember={g['spec']['minMember']}"
        for g in d.pod_groups
    ]
    return "\n".join(lines)


def _pod_set_text(v: PodSetVerdict) -> list[str]:
    req = v.request
    how = req.mode.value + (f" {short_level(req.level)}" if req.level else "")
    if req.mode is Mode.IMPLIED:
        how = "implied (no annotation)"
    injected = ", injected" if v.injected else ""
    status = "fits" if v.now and v.now.fits else ("waits" if v.never and v.never.fits else "never fits")
    lines = [f"  PodSet {v.name}: {v.count} pods, {how}{injected}: {status}"]
    rows = _levels_json(v)
    if rows:
        width = max(len(short_level(r["level"])) for r in rows)
        lines.append(f"    {'level'.ljust(width)}  {'best now':>9}  {'best empty':>10}  domains")
        for r in rows:
            lines.append(
                f"    {short_level(r['level']).ljust(width)}  {r['nowMaxPods']:>9}  {r['neverMaxPods']:>10}"
                f"  {r['neverFittingDomains']}/{r['domains']} hold all"
            )
    return lines
