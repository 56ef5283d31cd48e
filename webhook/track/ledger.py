"""Every tracked gang: the slim records, indexed, and their states on a given cluster state.

One ``Ledger`` is fed by the live watches (``live.tracker``) and, once, by ``tasgate status``'s
one-shot lists, so both classify the same way. It holds slim records only; the PodSets of a
Workload (its templates) are kept while it is queued — tasgate's figures and the prediction at
admission need them — and dropped once Kueue has admitted it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.decide.policy import Policy
from webhook.model.workloads.native import NATIVE_APIS, V1ALPHA2, V1BETA1
from webhook.state.cluster import ClusterState
from webhook.track.classify import Gang, State, Status, classify
from webhook.track.native import NativeGroupRecord, as_workload, assess_native, parse_native_group
from webhook.track.predict import Assessment, assess, workload_view
from webhook.track.records import (
    PodGroupRecord,
    PodRecord,
    WorkloadRecord,
    parse_pod,
    parse_pod_group,
    parse_workload,
)
from webhook.wire.errors import InvalidObject

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Job:
    """One queued Workload to assess: plain values, safe to hand to a worker thread."""

    key: Key
    namespace: str
    queue: str
    spec: Mapping[str, Any]

    def run(self, state: ClusterState, policy: Policy) -> Assessment:
        if self.spec.get("apiVersion") in NATIVE_APIS:  # a native PodGroup (`track.native`)
            return assess_native(self.spec, state)
        try:
            view = workload_view(self.spec, state.pod_defaults(self.namespace))
        except (InvalidObject, ValueError, TypeError) as exc:  # the API server validated it; be safe
            return Assessment(state.generation, problem=f"its PodSets do not read: {exc}")
        return assess(view, self.namespace, self.queue, state, policy)


@dataclass(frozen=True)
class Tracked:
    gang: Gang
    status: Status


class Ledger:
    def __init__(self) -> None:
        self.workloads: dict[Key, WorkloadRecord] = {}
        self.specs: dict[Key, Mapping[str, Any]] = {}  # queued Workloads' PodSets, until admitted
        self.assessments: dict[Key, Assessment] = {}
        self.fitted: set[Key] = set()  # tasgate saw it fit the empty cluster at some point
        self.pods: dict[Key, PodRecord] = {}
        self.groups: dict[tuple[str, str, str], PodGroupRecord] = {}  # (backend, namespace, name)
        self.native: dict[Key, NativeGroupRecord] = {}  # native v1.36 PodGroups, followed as gangs
        self.native_pods: Mapping[Key, PodRecord] = {}  # the pods naming them (`live.native`)

    # -- records in --

    def put_workload(self, obj: Mapping[str, Any]) -> tuple[WorkloadRecord | None, WorkloadRecord]:
        """Keep a Workload; (what was kept before, what is kept now)."""
        record = parse_workload(obj)
        before = self.workloads.get(record.key)
        self.workloads[record.key] = record
        if record.admission is None and not record.is_true("Finished"):
            spec = obj.get("spec") or {}
            slim_meta = {"namespace": record.namespace, "name": record.name}
            self.specs[record.key] = {"metadata": slim_meta, "spec": {"podSets": spec.get("podSets") or []}}
        return before, record

    def forget_spec(self, key: Key) -> None:
        """Kueue admitted it: its templates are no longer needed."""
        self.specs.pop(key, None)
        self.assessments.pop(key, None)

    def drop_workload(self, key: Key) -> None:
        self.workloads.pop(key, None)
        self.forget_spec(key)
        self.fitted.discard(key)

    def put_pod(self, obj: Mapping[str, Any]) -> None:
        record = parse_pod(obj)
        self.pods[record.key] = record

    def drop_pod(self, obj: Mapping[str, Any]) -> None:
        self.pods.pop(parse_pod(obj).key, None)

    def put_native(self, obj: Mapping[str, Any]) -> tuple[NativeGroupRecord | None, NativeGroupRecord]:
        """Keep a native PodGroup; (what was kept before, what is kept now). Its spec is judged
        while the scheduler has not placed it."""
        record = parse_native_group(obj)
        before = self.native.get(record.key)
        self.native[record.key] = record
        if not record.scheduled and not record.problem:
            self.specs[record.key] = record.spec
        return before, record

    def drop_native(self, key: Key) -> None:
        self.native.pop(key, None)
        self.forget_spec(key)
        self.fitted.discard(key)

    def put_group(self, obj: Mapping[str, Any]) -> None:
        record = parse_pod_group(obj)
        self.groups[(record.backend, record.namespace, record.name)] = record

    def drop_group(self, obj: Mapping[str, Any]) -> None:
        record = parse_pod_group(obj)
        self.groups.pop((record.backend, record.namespace, record.name), None)

    def replace(self, kind: str, items: Iterable[Mapping[str, Any]]) -> None:
        """A fresh list of ``kind`` (workloads, pods, podgroups): what is not in it is gone."""
        if kind == "workloads":
            seen = set()
            for obj in items:
                seen.add(self.put_workload(obj)[1].key)
            for key in set(self.workloads) - seen:
                self.drop_workload(key)
        elif kind == "pods":
            self.pods = {}
            for obj in items:
                self.put_pod(obj)
        elif kind.startswith("nativepodgroups"):  # one table per served version
            api = V1BETA1 if kind.endswith("v1beta1") else V1ALPHA2
            seen = {self.put_native(obj)[1].key for obj in items}
            for key in {k for k, r in self.native.items() if r.spec.get("apiVersion") == api} - seen:
                self.drop_native(key)
        else:
            backend = "volcano" if kind == "volcanopodgroups" else "coscheduling"
            self.groups = {k: g for k, g in self.groups.items() if g.backend != backend}
            for obj in items:
                self.put_group(obj)

    # -- figures and states --

    def assess_queued(self, state: ClusterState, policy: Policy) -> None:
        """tasgate's figures for every queued Workload not yet assessed on ``state`` (in place)."""
        for job in self.stale(state.generation):
            self.store(job.key, job.run(state, policy))

    def stale(self, generation: int) -> list[Job]:
        """The queued Workloads whose figures are older than state ``generation``."""
        jobs = []
        for key, spec in self.specs.items():
            found = self.assessments.get(key)
            if found is None or found.generation != generation:
                record = self.workloads.get(key)
                jobs.append(Job(key, key[0], record.queue if record is not None else "", spec))
        return jobs

    def store(self, key: Key, found: Assessment) -> None:
        if key not in self.specs:
            return  # admitted or deleted meanwhile
        self.assessments[key] = found
        if found.judged and found.fits_when_empty:
            self.fitted.add(key)

    def copy(self) -> Ledger:
        """A shallow copy (the records are immutable) to classify off the event loop."""
        other = Ledger()
        other.workloads, other.specs, other.assessments = (
            dict(self.workloads),
            dict(self.specs),
            dict(self.assessments),
        )
        other.fitted, other.pods, other.groups = set(self.fitted), dict(self.pods), dict(self.groups)
        other.native, other.native_pods = dict(self.native), dict(self.native_pods)
        return other

    def tracked(self, now: float, partial_start_after: float) -> list[Tracked]:
        """Every gang with its state, by namespace and name (one pass over the pods, indexed)."""
        index: dict[tuple[str, str], list[PodRecord]] = {}
        for pod in self.pods.values():
            for token in _tokens(pod):
                index.setdefault((pod.namespace, token), []).append(pod)
        groups = {(ns, name): g for (_, ns, name), g in sorted(self.groups.items(), reverse=True)}
        for pod in self.native_pods.values():
            if pod.native_group:
                index.setdefault((pod.namespace, f"native:{pod.native_group}"), []).append(pod)
        out = []
        for key in sorted({*self.workloads, *self.native}):
            gang = self._gang(key, index, groups) if key in self.workloads else self._native(key, index)
            out.append(Tracked(gang, classify(gang, now, partial_start_after)))
        return out

    def _native(self, key: Key, index: Mapping[tuple[str, str], list[PodRecord]]) -> Gang:
        group = self.native[key]
        pods = tuple(index.get((group.namespace, f"native:{group.name}"), ()))
        return Gang(as_workload(group, pods), pods, None, self.assessments.get(key), key in self.fitted)

    def _gang(
        self,
        key: Key,
        index: Mapping[tuple[str, str], list[PodRecord]],
        groups: Mapping[Key, PodGroupRecord],
    ) -> Gang:
        record = self.workloads[key]
        found = list(index.get((record.namespace, f"workload:{record.name}"), ()))
        if record.owner is not None:
            found += index.get((record.namespace, f"owner:{record.owner.uid}"), ())
        # A pod has either the workload token or its owners' (one Workload has one owner): no repeats.
        pods = tuple(p for p in found if p.belongs_to(record))
        names = sorted({p.group for p in pods if p.group})
        group = next((groups[(record.namespace, n)] for n in names if (record.namespace, n) in groups), None)
        return Gang(record, pods, group, self.assessments.get(key), key in self.fitted)


def _tokens(pod: PodRecord) -> list[str]:
    """How a pod is found: Kueue's workload annotation when it has one, else its owners' UIDs."""
    if pod.workload is not None:
        return [f"workload:{pod.workload}"]
    return [f"owner:{uid}" for uid in pod.owners]


def current(tracked: Iterable[Tracked]) -> list[Tracked]:
    """The gangs that are not finished (what per-gang series are kept for)."""
    return [t for t in tracked if t.status.state is not State.FINISHED]
