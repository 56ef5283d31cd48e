"""From an admission request to an outcome: which operations are judged, and how.

CREATE is decided; UPDATE too, where the decision skips a workload that is not suspended
(admitted or running: Kueue's own start/stop writes) and one whose placement-relevant fields
(counts, requests, TAS annotations, gang labels, queue) did not change; DELETE, CONNECT and
subresources pass untouched. The validating endpoint judges the final object. One whose
mutation is missing is judged as written, as Kueue will run it: refused only when it would be
refused as written, never for the missing mutation itself. /mutate and /validate may judge on
different states (the cluster moved between the two calls, or another replica answered), and a
mutation missing because the mutating webhook is not reached is a misconfiguration to report
(reason ``mutation-missing``, allowed with a warning), not a workload Kueue would not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.decide.decision import decide
from webhook.decide.messages import clip, left_out
from webhook.decide.patch import added_keys
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.state.cluster import ClusterState
from webhook.wire.admission import AdmissionRequest


@dataclass(frozen=True)
class Outcome:
    allowed: bool
    reason: Reason
    message: str = ""
    code: int | None = None
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()
    audit: Mapping[str, str] | None = None
    decision: Decision | None = None
    # Why tasgate could not judge the object (an object its verdict depends on is left out of
    # the state); "" when it judged. The server answers such an outcome per --on-timeout, as it
    # answers an unavailable state: this outcome is the "allow" answer, with its warning.
    undecided: str = ""


def judge(
    req: AdmissionRequest,
    state: ClusterState,
    policy: Policy,
    mutating: bool,
    earlier: Sequence[ClusterState] = (),
) -> Outcome:
    """``earlier``: the states /mutate may have judged this request on (``StateHolder.earlier``)."""
    if req.operation not in ("CREATE", "UPDATE") or req.sub_resource or req.obj is None:
        return Outcome(True, Reason.SKIPPED_OPERATION)
    old = req.old_obj if req.operation == "UPDATE" else None
    review = Review(req.obj, req.namespace, req.operation, req.uid, req.dry_run, old, req.user)
    decision = decide(review, state, policy)
    if decision.reason in (Reason.UNCHANGED, Reason.NOT_SUSPENDED):
        return Outcome(True, decision.reason)
    audit = dict(decision.audit)
    warnings = tuple(clip(w) for w in decision.warnings)  # Kubernetes' limit; the CLI keeps it all
    if decision.rejected is not None:
        why = left_out(decision.rejected)
        return Outcome(True, decision.reason, "", None, warnings, (), audit, decision, undecided=why)
    if not decision.allowed:
        return _refusal(decision, warnings)
    if mutating:
        return Outcome(True, decision.reason, "", None, warnings, decision.patch, audit, decision)
    if decision.patch:
        changed = any(not decide(review, older, policy).patch for older in earlier)
        return _as_written(review, state, policy, decision, changed)
    return Outcome(True, decision.reason, "", None, warnings, (), audit, decision)


def _as_written(
    review: Review, state: ClusterState, policy: Policy, wanted: Decision, changed: bool
) -> Outcome:
    """The mutation the policy asks for now is not on the object: Kueue runs it as it is, so it
    is judged as written and told what the policy would add. ``changed``: an earlier state asked
    for none (a LocalQueue, a Topology or a Namespace label arrived between the two calls), said
    as such; otherwise the mutation went missing (`_missing_note`)."""
    decision = decide(review, state, replace(policy, rules=()))  # its settings kept, nothing injected
    keys = sorted({key for op in wanted.patch for key in added_keys(op)})
    if changed:
        note = (
            f"tasgate's policy now asks for {', '.join(keys)}; not added, because the cluster changed "
            "while this request was being admitted (judged as written)"
        )
    else:
        note = _missing_note(keys)
    warnings = tuple(clip(w) for w in (*decision.warnings, note))
    if not decision.allowed:
        return _refusal(decision, warnings)
    if changed:
        return Outcome(True, decision.reason, "", None, warnings, (), dict(decision.audit), decision)
    audit = {**decision.audit, "reason": Reason.MUTATION_MISSING.value}
    return Outcome(True, Reason.MUTATION_MISSING, "", None, warnings, (), audit, decision)


def _refusal(decision: Decision, warnings: tuple[str, ...]) -> Outcome:
    code = 422 if decision.reason is Reason.INVALID else 403
    return Outcome(
        False, decision.reason, decision.message, code, warnings, (), dict(decision.audit), decision
    )


def _missing_note(keys: list[str]) -> str:
    return (
        f"tasgate's mutation is missing from this object: expected {', '.join(keys)} (is the tasgate "
        "mutating webhook registered and reached, or did the cluster change between the two calls?); "
        "judged as written"
    )
