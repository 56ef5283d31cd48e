"""From an admission request to an outcome: which operations are judged, and how.

CREATE is decided; UPDATE only when something placement-relevant changed (counts, requests,
TAS annotations, gang labels, queue); DELETE, CONNECT and subresources pass untouched. The
validating endpoint judges the final object and also refuses one whose mutation went missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook import annotations as ann
from webhook.admission import AdmissionRequest
from webhook.cluster import ClusterState
from webhook.decision import Decision, Review, decide
from webhook.errors import BadRequest, InvalidObject
from webhook.patch import added_keys
from webhook.policy import Policy
from webhook.workloads import extract

GANG_KEYS = (*ann.COSCHEDULING_LABELS, *ann.VOLCANO_GROUP_ANNOTATIONS)


@dataclass(frozen=True)
class Outcome:
    allowed: bool
    reason: str
    message: str = ""
    code: int | None = None
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()
    audit: Mapping[str, str] | None = None
    decision: Decision | None = None


def judge(req: AdmissionRequest, state: ClusterState, policy: Policy, mutating: bool) -> Outcome:
    if req.operation not in ("CREATE", "UPDATE") or req.sub_resource or req.obj is None:
        return Outcome(True, "skipped-operation")
    if req.operation == "UPDATE" and not placement_changed(req.old_obj, req.obj):
        return Outcome(True, "unchanged")
    decision = decide(Review(req.obj, req.namespace, req.operation, req.uid, req.dry_run), state, policy)
    audit = dict(decision.audit)
    if not decision.allowed:
        code = 422 if decision.reason == "invalid" else 403
        return Outcome(False, decision.reason, decision.message, code, decision.warnings, (), audit, decision)
    if mutating:
        return Outcome(True, decision.reason, "", None, decision.warnings, decision.patch, audit, decision)
    if decision.patch:
        missing = sorted({key for op in decision.patch for key in added_keys(op)})
        message = (
            "tasgate's mutation is missing from this object (is the tasgate mutating webhook registered "
            f"and reached?): expected {', '.join(missing)}"
        )
        return Outcome(
            False,
            "mutation-missing",
            message,
            403,
            decision.warnings,
            (),
            {"decision": "mutation-missing"},
            decision,
        )
    return Outcome(True, decision.reason, "", None, decision.warnings, (), audit, decision)


def placement_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether an UPDATE touches anything placement depends on; unreadable objects count as changed."""
    if old is None:
        return True
    try:
        return _fingerprint(old) != _fingerprint(new)
    except (InvalidObject, BadRequest):
        return True


def _fingerprint(obj: Mapping[str, Any]) -> tuple[object, ...]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    wl = extract(obj)
    if wl is None:
        return (None,)
    sets = []
    for p in wl.pod_sets:
        meta = p.template.get("metadata") or {}
        notes, pod_labels = meta.get("annotations") or {}, meta.get("labels") or {}
        tas = tuple(
            sorted((k, str(v)) for k, v in notes.items() if k in ann.TAS_ANNOTATIONS or k in GANG_KEYS)
        )
        gang = tuple(sorted((k, str(v)) for k, v in pod_labels.items() if k in GANG_KEYS))
        sets.append((p.name, p.count, tuple(sorted(p.requests.items())), tas, gang))
    return (labels.get(ann.QUEUE_LABEL), wl.groups, tuple(sets))
