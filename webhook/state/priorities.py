"""Workload priorities and ClusterQueue preemption policies, as Kueue v0.19.2 reads them.

A workload's priority is what ``jobframework.ExtractPriority`` resolves when Kueue builds its
Workload: the ``kueue.x-k8s.io/priority-class`` label names a ``WorkloadPriorityClass``
(``GetPriorityFromWorkloadPriorityClass``); else the job's own priority class (Kubeflow's and
MPIJob's ``runPolicy.schedulingPolicy.priorityClass``, ``JobWithPriorityClass``) or the first
pod template's ``priorityClassName`` (``extractPriorityFromPodSets``) names a ``PriorityClass``
(``GetPriorityFromPriorityClass``); with none named, the ``globalDefault`` PriorityClass of the
lowest value (``getDefaultPriorityClass``), else 0 (``constants.DefaultPriority``). A class that
does not exist stops Kueue from creating the Workload: the priority is then unknown (None).
The feature gates ``WorkloadPriorityClassDefaulting`` and ``PriorityBoost`` are off by default
in v0.19.2 and not modelled. An admitted Workload's priority is its ``spec.priority``
(``priority.Priority``: nil is 0), carried on its quota charge (`state.quota_usage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.state.fields import metadata
from webhook.wire.errors import InvalidObject

PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
NEVER, LOWER, LOWER_OR_NEWER_EQUAL, ANY = "Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"
POLICIES = frozenset({NEVER, LOWER, LOWER_OR_NEWER_EQUAL, ANY})


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's ``spec.preemption`` (Kueue's defaults: Never, Never, Never)."""

    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER


@dataclass(frozen=True)
class PriorityClasses:
    """WorkloadPriorityClass values and PriorityClass (value, globalDefault) by name."""

    workload: Mapping[str, int] = field(default_factory=dict)
    pod: Mapping[str, tuple[int, bool]] = field(default_factory=dict)

    def default_value(self) -> int:
        """``getDefaultPriority``: the lowest-valued globalDefault PriorityClass, else 0."""
        defaults = [value for value, default in self.pod.values() if default]
        return min(defaults) if defaults else 0


def parse_preemption(name: str, spec: Mapping[str, Any]) -> Preemption:
    """``spec.preemption`` of ClusterQueue ``name``; an unknown policy raises InvalidObject."""
    raw = spec.get("preemption") or {}
    if not isinstance(raw, Mapping):
        raise InvalidObject.at(f"ClusterQueue {name}: spec.preemption", "must be an object")
    borrow = raw.get("borrowWithinCohort") or {}
    if not isinstance(borrow, Mapping):
        raise InvalidObject.at(
            f"ClusterQueue {name}: spec.preemption.borrowWithinCohort", "must be an object"
        )
    found = Preemption(
        str(raw.get("withinClusterQueue") or NEVER),
        str(raw.get("reclaimWithinCohort") or NEVER),
        str(borrow.get("policy") or NEVER),
    )
    for key, value in (
        ("withinClusterQueue", found.within_cluster_queue),
        ("reclaimWithinCohort", found.reclaim_within_cohort),
    ):
        if value not in POLICIES:
            raise InvalidObject.at(f"ClusterQueue {name}: spec.preemption.{key}", f"unknown policy {value!r}")
    return found


def add_priority_class(obj: Mapping[str, Any], kind: str, name: str, into: dict[str, Any]) -> None:
    """Fold a WorkloadPriorityClass (``value``) or PriorityClass (``value``, ``globalDefault``)."""
    value = obj.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidObject.at(f"{kind} {name}: value", "must be an integer")
    into[name] = value if kind == "WorkloadPriorityClass" else (value, obj.get("globalDefault") is True)


def workload_priority(
    obj: Mapping[str, Any], templates: Sequence[Mapping[str, Any]], classes: PriorityClasses
) -> int | None:
    """The priority Kueue gives the Workload of ``obj`` (``ExtractPriority``); None when the class
    it names does not exist (Kueue then creates no Workload)."""
    labels = metadata(obj).get("labels") or {}
    wpc = labels.get(PRIORITY_CLASS_LABEL) if isinstance(labels, Mapping) else None
    if wpc:
        return classes.workload.get(str(wpc))
    name = _own_priority_class(obj) or next(
        (str(n) for t in templates if (n := (t.get("spec") or {}).get("priorityClassName"))), ""
    )
    if not name:
        return classes.default_value()
    found = classes.pod.get(name)
    return None if found is None else found[0]


def _own_priority_class(obj: Mapping[str, Any]) -> str:
    """Kubeflow's and MPIJob's ``runPolicy.schedulingPolicy.priorityClass`` (``PriorityClass()``)."""
    spec = obj.get("spec") or {}
    run = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    policy = run.get("schedulingPolicy") if isinstance(run, Mapping) else None
    value = policy.get("priorityClass") if isinstance(policy, Mapping) else None
    return str(value) if value else ""


def charged_priority(workload: Mapping[str, Any]) -> tuple[int, str, str, bool]:
    """An admitted Workload's (``spec.priority`` or 0, UID, QuotaReserved time, evicted): what
    Kueue's ``CandidatesOrdering`` sorts preemption candidates by."""
    spec = workload.get("spec") or {}
    raw = spec.get("priority") if isinstance(spec, Mapping) else None
    priority = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
    uid = str(metadata(workload).get("uid") or "")
    conditions = (workload.get("status") or {}).get("conditions") or ()
    reserved, evicted = "", False
    for c in conditions:
        if isinstance(c, Mapping) and c.get("status") == "True":
            if c.get("type") == "QuotaReserved":
                reserved = str(c.get("lastTransitionTime") or "")
            evicted = evicted or c.get("type") == "Evicted"
    return priority, uid, reserved, evicted
