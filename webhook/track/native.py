"""Native gangs after admission: a ``scheduling.k8s.io`` PodGroup (v1.36's ``v1alpha2``, v1.37's
``v1beta1``) and its pods, followed with the same lifecycle states, phases and prediction check as
a Kueue Workload. v1.37's scheduler names its condition ``PodGroupInitiallyScheduled`` (same
reasons, never set back once True): read as ``PodGroupScheduled``.

The kube-scheduler v1.36.5 writes one condition on a PodGroup (``schedule_one_podgroup.go``,
``updatePodGroupCondition``; types in ``k8s.io/api/scheduling/v1alpha2``): ``PodGroupScheduled``
— ``True``/``Scheduled`` once a cycle placed ``minCount`` pods (never set back to False after
that), ``False``/``Unschedulable`` when no placement held the group, ``False``/``SchedulerError``
on an internal error. ``DisruptionTarget`` (``PreemptionByScheduler``) is declared for
workload-aware preemption; no v1.36.5 component writes it yet, tasgate reads it as an eviction.
A native gang has no quota and no Kueue admission, so its record (``as_workload``) reads as a
Kueue Workload would: scheduled is admitted, unschedulable is waiting for topology, every pod
Succeeded is finished. The prediction is tasgate's verdict on the PodGroup on the state before
its pods bound (``assess_native``, the decision path itself), compared with the domain of the
topology key the scheduler bound them in (``placed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scorer.model import Placement
from webhook.decide.decision import decide
from webhook.decide.policy import NONE_POLICY
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Review
from webhook.model.workloads.native import NATIVE_API, NATIVE_APIS, read_native
from webhook.state.admission import PodSetAdmission
from webhook.state.cluster import ClusterState
from webhook.track.fields import timestamp
from webhook.track.predict import Assessment, PodSetFigure
from webhook.track.records import Condition, Owner, PodRecord, WorkloadRecord, parse_conditions
from webhook.wire.errors import InvalidObject

SCHEDULED, DISRUPTION = "PodGroupScheduled", "DisruptionTarget"
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"  # v1.37's name for it
UNSCHEDULABLE, SCHEDULER_ERROR = "Unschedulable", "SchedulerError"
ANY_NODE = "(any node)"  # the one domain of a group without a topology key
Labels = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class NativeGroupRecord:
    """A native PodGroup: its gang (policy, minCount, topology key), owner and conditions."""

    namespace: str
    name: str
    uid: str
    min_count: int
    topology: str | None  # the topology key (None: any nodes)
    created: float | None = None
    owner: Owner | None = None
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)  # what a verdict reads (no status)
    problem: str = ""  # why its spec does not read (then not judged)

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def scheduled(self) -> bool:
        found = self.conditions.get(SCHEDULED)
        return found is not None and found.true


def parse_native_group(obj: Mapping[str, Any]) -> NativeGroupRecord:
    """Lenient where the API server is authoritative: a spec that does not read is kept as a
    problem (the gang is still followed, not judged)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    api = obj.get("apiVersion") if obj.get("apiVersion") in NATIVE_APIS else NATIVE_API
    slim = {"apiVersion": api, "kind": "PodGroup", "metadata": _slim_meta(meta), "spec": spec}
    min_count, key, problem = 1, None, ""
    try:
        group = read_native(slim).groups[0]
        min_count, key = group.min_count, group.key
    except InvalidObject as exc:
        problem = str(exc)
    status = obj.get("status") or {}
    return NativeGroupRecord(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        min_count=max(min_count, 1),
        topology=key,
        created=timestamp(meta.get("creationTimestamp")),
        owner=_controller(meta),
        conditions=_scheduled_as_v136(parse_conditions(status.get("conditions"))),
        spec=slim,
        problem=problem,
    )


def as_workload(group: NativeGroupRecord, pods: Sequence[PodRecord]) -> WorkloadRecord:
    """The group as the classification reads a Kueue Workload (``track.classify``)."""
    conditions = dict(group.conditions)
    scheduled = conditions.pop(SCHEDULED, None)
    disrupted = conditions.pop(DISRUPTION, None)
    out: dict[str, Condition] = {}
    if scheduled is not None:
        out["QuotaReserved"] = scheduled
        if scheduled.true:
            out["Admitted"] = scheduled
    if disrupted is not None and disrupted.true:
        out["Evicted"] = disrupted
    done = [p for p in pods if p.phase == "Succeeded"]
    if pods and len(done) == len(pods) and len(done) >= group.min_count:
        out["Finished"] = Condition("True", "Succeeded", f"{len(done)} pods succeeded")
    return WorkloadRecord(
        namespace=group.namespace,
        name=group.name,
        uid=group.uid,
        queue="",
        pod_count=group.min_count,
        created=group.created,
        owner=group.owner,
        conditions=out,
        requests={group.name: ("required", group.topology)} if group.topology else {},
        native=True,
        levels=(group.topology,) if group.topology else (),
        api=str(group.spec.get("apiVersion") or NATIVE_API),
    )


def assess_native(spec: Mapping[str, Any], state: ClusterState) -> Assessment:
    """tasgate's verdict on the PodGroup on ``state``: the decision path, without a policy (the
    stored object is what the scheduler reads; nothing is injected into it any more)."""
    namespace = str((spec.get("metadata") or {}).get("namespace") or "")
    d = decide(Review(spec, namespace=namespace), state, NONE_POLICY)
    if d.reason in (Reason.NATIVE_UNKNOWN, Reason.INVALID) or not d.pod_sets:
        return Assessment(state.generation, problem=d.message or "; ".join(d.warnings) or d.reason.value)
    figures = []
    for v in d.pod_sets:
        fits_when_empty = v.never is not None and v.never.fits
        figures.append(
            PodSetFigure(
                name=v.name,
                count=v.count,
                flavor=None,
                level=v.request.level or ANY_NODE,
                fits_now=v.fits_now,
                fits_when_empty=fits_when_empty,
                hosts=_domains(v.now),
                waits="" if v.fits_now else " ".join(d.warnings),
                never="" if fits_when_empty else d.message,
            )
        )
    return Assessment(state.generation, tuple(figures))


def placed(group: NativeGroupRecord, pods: Sequence[PodRecord], labels: Labels) -> PodSetAdmission:
    """Where the scheduler bound the group's pods: pods per value of its topology key, shaped as
    Kueue's admission is so ``track.compare`` compares the two as it does for Kueue."""
    counts: dict[str, int] = {}
    for p in pods:
        if p.node is None or p.phase == "Failed":
            continue
        value = labels.get(p.node, {}).get(group.topology, "?") if group.topology else ANY_NODE
        counts[value] = counts.get(value, 0) + 1
    domains = tuple(((value,), n) for value, n in sorted(counts.items()))
    level = group.topology or ANY_NODE
    return PodSetAdmission(group.name, sum(counts.values()), {}, (level,), domains)


def _domains(placement: Placement | None) -> dict[str, int]:
    """Pods per domain of the predicted placement (a group without a key: one domain)."""
    if placement is None or not placement.fits or placement.assignment is None:
        return {}
    out: dict[str, int] = {}
    for domain in placement.assignment.domains:
        value = domain.values[-1] if domain.values else ANY_NODE
        out[value] = out.get(value, 0) + domain.count
    return out


def _scheduled_as_v136(conditions: Mapping[str, Condition]) -> Mapping[str, Condition]:
    """v1.37's ``PodGroupInitiallyScheduled`` under v1.36's name, which the classification reads."""
    found = conditions.get(INITIALLY_SCHEDULED)
    if found is None or SCHEDULED in conditions:
        return conditions
    return {**{k: v for k, v in conditions.items() if k != INITIALLY_SCHEDULED}, SCHEDULED: found}


def _slim_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    kept = ("name", "namespace", "uid", "ownerReferences", "creationTimestamp")
    return {k: meta[k] for k in kept if k in meta}


def _controller(meta: Mapping[str, Any]) -> Owner | None:
    """The controlling owner (the Job a Job-made PodGroup is owned by); None when hand-written."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return Owner(
                str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", "")),
                str(ref.get("uid", "")),
            )  # fmt: skip
    return None
