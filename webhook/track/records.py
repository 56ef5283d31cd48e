"""Slim records of the objects a gang is followed by: Kueue Workloads, their Pods, PodGroups.

The tracker never keeps a watched object whole: each event is parsed here into the few values
the classification reads (conditions, counts, phases, names), so memory is bound by the gangs
tracked, not by the size of what the API server sends. Parsing is lenient where the API server
is authoritative (a missing status is "nothing yet"), and every text kept is clipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.decide.gangs import GANG_BACKENDS, by_api_version
from webhook.track.admission import PodSetAdmission, workload_admission
from webhook.track.fields import clip as _clip
from webhook.track.fields import int_of as _int
from webhook.track.fields import list_of as _list
from webhook.track.fields import map_of as _map
from webhook.track.fields import timestamp

WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"  # Kueue's TAS annotation on the pods it admits
PODSET_LABEL = "kueue.x-k8s.io/podset"  # on every pod of an admitted Workload (its PodSet name)
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"  # a JobSet's pods are owned by its Jobs


@dataclass(frozen=True)
class Condition:
    status: str  # "True", "False" or "Unknown"
    reason: str = ""
    message: str = ""
    since: float | None = None  # lastTransitionTime, seconds since the epoch

    @property
    def true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True)
class Owner:
    """The object the user applied (a Job, JobSet …): where Events are most useful."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True)
class WorkloadRecord:
    """A Kueue Workload: what it asks for, what Kueue said, and where Kueue admitted it."""

    namespace: str
    name: str
    uid: str
    queue: str
    pod_count: int
    created: float | None = None
    owner: Owner | None = None
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    cluster_queue: str | None = None
    admission: Mapping[str, PodSetAdmission] | None = None
    admission_error: str | None = None  # a topologyAssignment that does not read
    active: bool = True
    # PodSet name -> (mode, level) of its spec.topologyRequest: "required" / "preferred" with the
    # level, "unconstrained" with "" (what placement quality is judged against, after admission)
    requests: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    native: bool = False  # a native PodGroup read as a Workload (``track.native``)
    api: str = ""  # a native PodGroup's apiVersion (the version its cluster serves)
    # Admission checks as the Workload reports them: name -> (state, message), in order.
    checks: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # Kueue reserved quota with no topology yet (``delayedTopologyRequest: Pending``): placed once
    # a ProvisioningRequest is provisioned, or on a MultiKueue worker.
    delayed_topology: bool = False
    levels: tuple[str, ...] = ()  # what its placement is judged at when no admission says

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def condition(self, kind: str) -> Condition | None:
        return self.conditions.get(kind)

    def is_true(self, kind: str) -> bool:
        found = self.conditions.get(kind)
        return found is not None and found.true

    @property
    def admitted_pods(self) -> int:
        """Pods Kueue admitted (partial admission may admit fewer than asked); else the count asked."""
        if not self.admission:
            return self.pod_count
        return sum(a.count for a in self.admission.values())


@dataclass(frozen=True)
class PodRecord:
    namespace: str
    name: str
    phase: str
    node: str | None
    created: float | None
    workload: str | None  # Kueue's workload annotation (TAS pods carry it)
    owners: frozenset[str]  # the controller's UID, and a JobSet's UID label
    group: str | None  # the PodGroup it is labelled for (Coscheduling or Volcano)
    gated: bool  # scheduling gates still on (Kueue's TAS ungater has not placed it yet)
    waiting: str = ""  # why it is not scheduled (PodScheduled=False), as the scheduler wrote it
    podset: str = ""  # Kueue's podset label
    scheduled_at: float | None = None  # PodScheduled=True lastTransitionTime
    ready_at: float | None = None  # ContainersReady (else Ready) =True lastTransitionTime
    native_group: str | None = None  # the native PodGroup it names (spec.schedulingGroup)

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def running(self) -> bool:
        return self.phase == "Running"

    @property
    def pending(self) -> bool:
        return self.phase in ("Pending", "")

    def belongs_to(self, workload: WorkloadRecord) -> bool:
        """Kueue's workload annotation names it, or it is the pod of the Workload's owner."""
        if self.namespace != workload.namespace:
            return False
        if self.workload is not None:
            return self.workload == workload.name
        return workload.owner is not None and workload.owner.uid in self.owners


@dataclass(frozen=True)
class PodGroupRecord:
    """What the gang's PodGroup controller wrote: its ``status`` is the group's own count of the
    gang, next to the one tasgate makes from the pods. scheduler-plugins v0.34.7's controller writes
    ``phase`` Pending → Scheduling (minMember pods exist) → Running (minMember run), Finished or
    Failed, and ``running``/``succeeded``/``failed`` (omitted when 0, not kept up in Pending);
    Volcano's writes the same
    three counts with its own phases (Pending, Inqueue, Running, Completed …). An empty ``phase``
    means no controller has written yet."""

    namespace: str
    name: str
    backend: str  # "coscheduling" or "volcano"
    min_member: int
    phase: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def counts_stale(self) -> bool:
        """scheduler-plugins' controller stops counting once it sets Pending (fewer pods than
        minMember): the counts stay as they were, e.g. ``running: 1`` after every pod is gone."""
        return self.backend == "coscheduling" and self.phase == "Pending"


def parse_workload(obj: Mapping[str, Any]) -> WorkloadRecord:
    meta = _map(obj.get("metadata"))
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    conditions = parse_conditions(status.get("conditions"))
    admission: Mapping[str, PodSetAdmission] | None = None
    error = None
    try:
        admission = workload_admission(obj)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        error = _clip(f"status.admission does not read: {exc}")
    count = sum(_int(p.get("count")) for p in _list(spec.get("podSets")) if isinstance(p, Mapping))
    return WorkloadRecord(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        queue=str(spec.get("queueName") or ""),
        pod_count=count,
        created=timestamp(meta.get("creationTimestamp")),
        owner=_controller(meta),
        conditions=conditions,
        cluster_queue=str(_map(status.get("admission")).get("clusterQueue") or "") or None,
        admission=admission,
        admission_error=error,
        active=spec.get("active", True) is not False,
        requests=_requests(_list(spec.get("podSets"))),
        checks=_checks(_list(status.get("admissionChecks"))),
        delayed_topology=any(
            isinstance(a, Mapping) and a.get("delayedTopologyRequest") == "Pending"
            for a in _list(_map(status.get("admission")).get("podSetAssignments"))
        ),
    )


def _checks(raw: list[Any]) -> dict[str, tuple[str, str]]:
    """``status.admissionChecks``: each check's state (Pending, Ready, Retry, Rejected) and message."""
    found = {}
    for check in raw:
        if isinstance(check, Mapping) and check.get("name"):
            found[str(check["name"])] = (str(check.get("state") or ""), _clip(check.get("message")))
    return found


def parse_pod(obj: Mapping[str, Any]) -> PodRecord:
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    labels, annotations = _map(meta.get("labels")), _map(meta.get("annotations"))
    owners = {str(r.get("uid")) for r in _list(meta.get("ownerReferences")) if isinstance(r, Mapping)}
    if labels.get(JOBSET_UID_LABEL):
        owners.add(str(labels[JOBSET_UID_LABEL]))
    found = {str(c.get("type")): c for c in _list(status.get("conditions")) if isinstance(c, Mapping)}
    scheduled = found.get("PodScheduled", {})
    ready = next((found[k] for k in ("ContainersReady", "Ready") if _true(found.get(k))), {})
    waiting = _clip(scheduled.get("message")) if scheduled.get("status") == "False" else ""
    group = next((g for b in GANG_BACKENDS.values() if (g := b.marked(labels, annotations))), None)
    return PodRecord(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        phase=str(status.get("phase") or ""),
        node=str(spec.get("nodeName") or "") or None,
        created=timestamp(meta.get("creationTimestamp")),
        workload=str(annotations[WORKLOAD_ANNOTATION]) if annotations.get(WORKLOAD_ANNOTATION) else None,
        owners=frozenset(owners),
        group=str(group) if group else None,
        gated=bool(_list(spec.get("schedulingGates"))),
        waiting=waiting,
        podset=str(labels.get(PODSET_LABEL) or ""),
        scheduled_at=timestamp(scheduled.get("lastTransitionTime")) if _true(scheduled) else None,
        ready_at=timestamp(ready.get("lastTransitionTime")),
        native_group=str(_map(spec.get("schedulingGroup")).get("podGroupName") or "") or None,
    )


def parse_conditions(raw: object) -> dict[str, Condition]:
    """``status.conditions`` by type (metav1.Condition: Kueue's Workloads, native PodGroups)."""
    return {
        str(c.get("type")): Condition(
            str(c.get("status", "")),
            _clip(c.get("reason")),
            _clip(c.get("message")),
            timestamp(c.get("lastTransitionTime")),
        )
        for c in _list(raw)
        if isinstance(c, Mapping) and c.get("type")
    }


def _true(condition: object) -> bool:
    return isinstance(condition, Mapping) and condition.get("status") == "True"


def _requests(pod_sets: list[Any]) -> dict[str, tuple[str, str]]:
    """Each PodSet's topologyRequest as (mode, level); a PodSet without one is left out."""
    out = {}
    for p in pod_sets:
        request = _map(p.get("topologyRequest")) if isinstance(p, Mapping) else {}
        if request.get("required"):
            out[str(p.get("name"))] = ("required", _clip(request["required"]))
        elif request.get("preferred"):
            out[str(p.get("name"))] = ("preferred", _clip(request["preferred"]))
        elif request.get("unconstrained"):
            out[str(p.get("name"))] = ("unconstrained", "")
    return out


def parse_pod_group(obj: Mapping[str, Any]) -> PodGroupRecord:
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    found = by_api_version(str(obj.get("apiVersion", "")))
    backend = found.name if found is not None else "coscheduling"
    return PodGroupRecord(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        backend=backend,
        min_member=_int(spec.get("minMember")),
        phase=_clip(status.get("phase") or ""),
        running=_int(status.get("running")),
        succeeded=_int(status.get("succeeded")),
        failed=_int(status.get("failed")),
    )


def _controller(meta: Mapping[str, Any]) -> Owner | None:
    refs = [r for r in _list(meta.get("ownerReferences")) if isinstance(r, Mapping)]
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if ref is None:
        return None
    return Owner(
        str(ref.get("apiVersion", "")),
        str(ref.get("kind", "")),
        str(ref.get("name", "")),
        str(ref.get("uid", "")),
    )
