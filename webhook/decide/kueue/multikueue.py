"""A MultiKueue gang judged on the worker clusters Kueue dispatches it to.

A ClusterQueue with a MultiKueue check reserves quota on the manager and dispatches the job to
its worker clusters; the first worker whose own Kueue admits it runs it, with the topology that
worker assigns (`state.admission_checks`). The manager's nodes say nothing; each worker's state
(``ClusterState.workers``: from dumps given to ``tasgate check --worker``) does. The object is
judged on a worker as the manager leaves it (tasgate's mutation applied), by the same decision.

The workers are those the queue's MultiKueueConfig lists (every worker given, when that config
is not known). In live mode (``live.multikueue``) a listed worker tasgate has no current state
for (not reached yet, stale, a kubeconfig it cannot read: ``ClusterState.unreached``) could run
it; so could a worker whose queue or Topology tasgate cannot judge there (not checked, no TAS).
Only what every listed worker refuses is denied.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, revised
from webhook.state.cluster import ClusterState

REFUSED = frozenset({Reason.NEVER_FITS, Reason.OVER_QUOTA, Reason.INVALID, Reason.PARTIAL_SLICE})
NOW = {Reason.FITS: "fits now", Reason.ADMITTED_AFTER_PREEMPTION: "fits after preemption"}


def dispatched_to(
    state: ClusterState, cluster_queue: str | None
) -> tuple[dict[str, ClusterState], dict[str, str]]:
    """The worker states ``cluster_queue`` dispatches to that tasgate can judge on, and those it
    cannot (name -> why)."""
    queue = state.cluster_queues.get(cluster_queue or "")
    delay = state.topology_delay(queue, "") if queue is not None else None
    listed = delay.workers if delay is not None and delay.workers is not None else None
    if listed is None:
        return dict(state.workers), dict(state.unreached)
    judged = {name: state.workers[name] for name in listed if name in state.workers}
    unreached = {name: state.unreached.get(name, "tasgate has no state of it") for name in listed}
    return judged, {name: why for name, why in unreached.items() if name not in judged}


def on_workers(
    manager: Decision, workers: Mapping[str, Decision], unreached: Mapping[str, str] | None = None
) -> Decision:
    """``manager``'s verdict (reason ``multikueue``) joined with the verdict of each worker;
    ``unreached``: workers it may be dispatched to that tasgate cannot judge on (never a denial)."""
    unreached = unreached or {}
    if not workers and not unreached:
        return manager
    if workers and not unreached and all(not d.allowed and d.reason in REFUSED for d in workers.values()):
        return _refused(manager, workers)
    states = {**{name: f"not judged ({why})" for name, why in unreached.items()}}
    states.update({name: _state(d) for name, d in workers.items()})
    summary = "; ".join(f"{name}: {said}" for name, said in sorted(states.items()))
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
