"""Where a gang stands and why: a typed snapshot in, a state and its reason out.

Pure (the time is passed in). The inputs are the slim records of ``track.records`` — the Kueue
Workload, the pods that belong to it, its PodGroup — and, for a queued workload, tasgate's own
figures on the current cluster state (``track.predict``). The order of the checks is the order of
a gang's life read backwards: finished, evicted, admitted (running, partial start, assembling),
queued (never fits any more, waiting for topology, waiting for quota).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from webhook.track.predict import Assessment
from webhook.track.records import Condition, PodGroupRecord, PodRecord, WorkloadRecord

TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"  # Kueue's QuotaReserved reason for TAS waits
# tasgate's own reason: it fits the empty cluster, no domain has room now (Kueue v0.19.2 says
# only "Pending", with its numbers in the message, which is appended).
WAITING_FOR_CAPACITY = "WaitingForCapacity"
# A native PodGroup without PodGroupScheduled: the scheduler waits for minCount pods to exist.
NATIVE_NOT_TRIED = "WaitingForPods"


class State(StrEnum):
    """The lifecycle states; the values are the ``state`` label of the lifecycle metrics."""

    WAITING_TOPOLOGY = "waiting_topology"
    WAITING_QUOTA = "waiting_quota"
    WAITING_PROVISIONING = "waiting_provisioning"
    NEVER_FITS = "never_fits"
    ASSEMBLING = "assembling"
    PARTIAL_START = "partial_start"
    RUNNING = "running"
    EVICTED = "evicted"
    FINISHED = "finished"


@dataclass(frozen=True)
class Status:
    """``reason`` is a CamelCase code (Kueue's own where Kueue said it); ``message`` the numbers."""

    state: State
    reason: str
    message: str
    since: float | None = None  # when the state began, as far as the objects tell


@dataclass(frozen=True)
class Gang:
    """One Kueue Workload and what belongs to it. ``fitted_before``: tasgate once saw it fit the
    empty cluster (so "never fits" now means capacity was lost, not a workload that never could)."""

    workload: WorkloadRecord
    pods: tuple[PodRecord, ...] = ()
    group: PodGroupRecord | None = None
    assessment: Assessment | None = None
    fitted_before: bool = False


def classify(gang: Gang, now: float, partial_start_after: float) -> Status:
    wl = gang.workload
    for kind, state in (("Finished", State.FINISHED), ("Evicted", State.EVICTED)):
        found = wl.condition(kind)
        if found is not None and found.true:
            return Status(state, found.reason or kind, found.message, found.since)
    if wl.is_true("Admitted"):
        return _admitted(gang, now, partial_start_after)
    if wl.is_true("QuotaReserved"):
        waiting = wl.condition("Admitted") or Condition("False", "UnsatisfiedAdmissionChecks")
        since = waiting.since or wl.created
        if wl.delayed_topology:
            return _provisioning(wl, since)
        return Status(State.WAITING_QUOTA, waiting.reason, waiting.message, since)
    return _queued(gang)


def _provisioning(wl: WorkloadRecord, since: float | None) -> Status:
    """Quota reserved, topology delayed: capacity is being provisioned (a check Pending, with the
    ProvisioningRequest's word), or it is there and Kueue places the gang next."""
    pending = [(name, message) for name, (state, message) in wl.checks.items() if state != "Ready"]
    if pending:
        name, message = pending[0]
        text = f'admission check "{name}": {message}' if message else f'admission check "{name}" is not ready'
        return Status(State.WAITING_PROVISIONING, "PendingProvisioning", text, since)
    text = "capacity provisioned; Kueue places the topology on the new nodes next"
    return Status(State.WAITING_PROVISIONING, "Provisioned", text, since)


def _queued(gang: Gang) -> Status:
    """Never fits / waits for topology by tasgate's figures (or Kueue's TAS reason); else quota."""
    wl, figures = gang.workload, gang.assessment
    reserved = wl.condition("QuotaReserved") or Condition("False", "PendingEvaluation", "", wl.created)
    since = reserved.since or wl.created
    kueue = f" Kueue: {reserved.message}" if reserved.message else ""
    if figures is not None and figures.judged:
        if not figures.fits_when_empty:
            if gang.fitted_before:
                lost = "capacity was lost since it was queued (nodes cordoned, NotReady or deleted): "
                return Status(State.NEVER_FITS, "CapacityLost", lost + figures.why_never(), since)
            return Status(State.NEVER_FITS, "NeverFits", figures.why_never(), since)
        if not figures.fits_now:
            return Status(State.WAITING_TOPOLOGY, WAITING_FOR_CAPACITY, figures.why_waiting() + kueue, since)
    if reserved.reason == TOPOLOGY_PLACEMENT_FAILED:
        return Status(State.WAITING_TOPOLOGY, reserved.reason, reserved.message, since)
    if wl.native:  # no quota: the scheduler found no placement, or has not tried (pods missing)
        if wl.condition("QuotaReserved") is not None:
            return Status(State.WAITING_TOPOLOGY, reserved.reason, reserved.message, since)
        return Status(State.ASSEMBLING, NATIVE_NOT_TRIED, "the kube-scheduler has not tried it yet", since)
    return Status(State.WAITING_QUOTA, reserved.reason or "Pending", reserved.message, since)


def _admitted(gang: Gang, now: float, partial_start_after: float) -> Status:
    wl = gang.workload
    admitted = wl.condition("Admitted")
    since = admitted.since if admitted is not None else wl.created
    expected = wl.admitted_pods
    done = running = scheduled = 0
    pending: list[PodRecord] = []
    for p in gang.pods:
        if p.phase == "Succeeded":
            done += 1
        elif p.phase != "Failed":
            running += p.running
            scheduled += p.node is not None
            if p.pending:
                pending.append(p)
    counts = f"{scheduled} of {expected} pods scheduled, {running} running"
    if expected and running + done >= expected:
        ready = wl.condition("PodsReady")
        started = ready.since if ready is not None and ready.true else since
        text = f"{running + done} of {expected} pods running{_group(gang.group)}"
        return Status(State.RUNNING, "AllRunning", text, started)
    if running and pending:
        oldest = min(p.created if p.created is not None else now for p in pending)
        if now - oldest >= partial_start_after:
            why = next((p.waiting for p in pending if p.waiting), "")
            text = (
                f"{running} of {expected} pods running, {len(pending)} pending for {now - oldest:.0f}s "
                f"(bound {partial_start_after:g}s){_group(gang.group)}"
            )
            return Status(State.PARTIAL_START, "PartialStart", f"{text}: {why}" if why else text, oldest)
    gated = sum(1 for p in pending if p.gated)
    reason = "WaitingForTopologyUngate" if gated else "Scheduling"
    return Status(State.ASSEMBLING, reason, counts + _group(gang.group), since)


def _group(group: PodGroupRecord | None) -> str:
    """The PodGroup as its controller reports it, so a reader sees both counts side by side (they
    differ while the controller lags, and its Running means minMember run, not every pod)."""
    if group is None:
        return ""
    status = ""
    if group.phase:
        ended = ((group.succeeded, "succeeded"), (group.failed, "failed"))
        counts = [f"{group.running} running", *(f"{n} {what}" for n, what in ended if n)]
        status = f", phase {group.phase}" + ("" if group.counts_stale else f", {', '.join(counts)}")
    return f" (PodGroup {group.name}: minMember {group.min_member}{status})"
