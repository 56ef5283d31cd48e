"""A MultiKueue gang judged on the worker clusters Kueue dispatches it to.

A ClusterQueue with a MultiKueue check reserves quota on the manager and dispatches the job to
its worker clusters; the first worker whose own Kueue admits it runs it, with the topology that
worker assigns (`state.admission_checks`). The manager's nodes say nothing; each worker's state
(``ClusterState.workers``: from dumps given to ``tasgate check --worker``) does. The object is
judged on a worker as the manager leaves it (tasgate's mutation applied), by the same decision.

Only what no worker could ever run is denied; a worker whose queue or Topology tasgate cannot
judge there (not checked, no TAS) could run it, so it never adds to a denial.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, revised

REFUSED = frozenset({Reason.NEVER_FITS, Reason.OVER_QUOTA, Reason.INVALID, Reason.PARTIAL_SLICE})
NOW = {Reason.FITS: "fits now", Reason.ADMITTED_AFTER_PREEMPTION: "fits after preemption"}


def on_workers(manager: Decision, workers: Mapping[str, Decision]) -> Decision:
    """``manager``'s verdict (reason ``multikueue``) joined with the verdict of each worker."""
    if not workers:
        return manager
    if all(not d.allowed and d.reason in REFUSED for d in workers.values()):
        return _refused(manager, workers)
    summary = "; ".join(f"{name}: {_state(d)}" for name, d in sorted(workers.items()))
    held = sorted(name for name, d in workers.items() if d.allowed and d.reason in NOW)
    lead = "no worker cluster holds it now"
    if held:
        lead = f"worker clusters that hold it now: {', '.join(held)}"
    return revised(manager, warnings=(*manager.warnings, f"MultiKueue {lead} ({summary})"))


def _refused(manager: Decision, workers: Mapping[str, Decision]) -> Decision:
    """Every worker refuses it: a denial with each worker's reason, by name."""
    first = next(iter(sorted(workers.items())))[1]
    reasons = "; ".join(f"{name}: {d.message}" for name, d in sorted(workers.items()))
    message = f"no MultiKueue worker cluster can ever run it. {reasons}"
    audit = {**manager.audit, "decision": "deny", "reason": first.reason.value}
    return revised(manager, allowed=False, reason=first.reason, message=message, audit=audit, patch=())


def _state(d: Decision) -> str:
    if not d.allowed:
        return f"refused ({d.reason.value})"
    if d.reason in NOW:
        return NOW[d.reason]
    if d.reason is Reason.WAITS:
        return "must wait"
    return f"not judged ({d.reason.value})"
