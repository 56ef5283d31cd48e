"""PodGroups of gangs Kueue may admit partially, sized to the count Kueue admits.

Kueue may admit a batch Job with ``kueue.x-k8s.io/job-min-parallelism`` (its Workload's
``spec.podSets[].minCount``) with fewer pods than it asks for: the Workload's
``status.admission.podSetAssignments[].count``, and the Job then runs that many (Kueue sets its
``parallelism``). A PodGroup whose minMember counts every pod of the Job waits forever for pods
that are never made. So the decision path marks such a PodGroup (``decide.gangs.plan.PARTIAL_MINIMUM``:
Kueue's minimum) and the reconciler writes it sized (``decide.gangs.plan.resized``) to:

- **the admitted count**, once the Workload's admission is known (its controller owner is the job);
- **Kueue's minimum until then.** The reconciler makes PodGroups before admission (the review's
  hint, the Workload's creation), and Kueue never admits fewer pods than the minimum, so such a
  PodGroup never demands more pods than Kueue starts and the gang starts even if the repair
  below were late. Deferring the PodGroup until the admission instead would leave the pods of a
  Job Kueue does not manage (it has no Workload) waiting for it forever; its PodGroup keeps
  the minimum.

**Repair.** When a Workload's admission is seen (its count, or that it came), the PodGroups its
PodSet's template names are read and, when tasgate made them (``app.kubernetes.io/managed-by``,
owned by the Workload's owner) and their minMember is not the admitted count, minMember and
minResources are patched to the admitted figures (a JSON merge patch: only those fields). That
fixes a PodGroup written before the admission — with the minimum, or with every pod by an earlier
tasgate. A user's own PodGroup is theirs. RBAC: ``patch`` on both groups' ``podgroups``.
Level-triggered like the rest: a Workload whose PodGroups were checked at its current admission
is remembered (``confirmed``) only until the Workload changes or a PodGroup its template names
appears (made, or listed anew); a restart checks each admitted one once again.

The view keeps one small record per Workload that has a ``minCount`` (only a batch Job's only
PodSet has one in Kueue v0.19.2); every other Workload is read and dropped, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.decide.gangs import GANG_BACKENDS
from webhook.decide.gangs.plan import partial_minimum, resized
from webhook.live import reconcile_native as native
from webhook.live import reconcile_view as view
from webhook.live.api import call_json
from webhook.live.reconcile_http import MANAGED_BY, merge_patch, object_path
from webhook.state.admission import condition_true

log = logging.getLogger("tasgate.podgroups")
Warn = Callable[[Mapping[str, Any], str, str, str], None]  # (owner, PodGroup name, note, status)


@dataclass(frozen=True)
class Repair:
    """A Workload Kueue may admit partially whose PodGroups are to match its admission."""

    namespace: str
    name: str


@dataclass(frozen=True)
class Elastic:
    """What is kept of a Workload Kueue may admit partially."""

    owner: view.OwnerRef | None  # its controller: the job
    groups: tuple[view.Target, ...]  # the PodGroups its PodSet's template names
    admitted: int | None  # the count Kueue admitted, while it holds quota; None before and after


def parse_workload(obj: Mapping[str, Any]) -> Elastic | None:
    """The record of a Workload with a PodSet ``minCount``; None for any other Workload."""
    spec = obj.get("spec") or {}
    pod_sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    if not isinstance(pod_sets, list) or len(pod_sets) != 1 or not isinstance(pod_sets[0], Mapping):
        return None
    pod_set = pod_sets[0]
    if pod_set.get("minCount") is None:
        return None
    template = pod_set.get("template") or {}
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    groups = _named(meta if isinstance(meta, Mapping) else {}, namespace)
    return Elastic(view.controller_of(obj), groups, _admitted(obj, str(pod_set.get("name") or "")))


def _named(meta: Mapping[str, Any], namespace: str) -> tuple[view.Target, ...]:
    """The PodGroups of each gang backend (`decide.gangs`) a pod made from this template joins."""
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if not isinstance(labels, Mapping) or not isinstance(annotations, Mapping):
        return ()
    marks = ((b.api_version, b.marked(labels, annotations)) for b in GANG_BACKENDS.values())
    return tuple(view.Target(api, namespace, name) for api, name in marks if name)


def _admitted(obj: Mapping[str, Any], pod_set: str) -> int | None:
    """The PodSet's admitted count while the Workload holds quota and is not finished (an evicted
    one loses its admission, and may be admitted again with another count)."""
    if not condition_true(obj, "QuotaReserved") or condition_true(obj, "Finished"):
        return None
    admission = (obj.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or ():
        if not isinstance(assignment, Mapping) or assignment.get("name") != pod_set:
            continue
        count = assignment.get("count")
        return count if isinstance(count, int) and count > 0 else None
    return None


def repair_patch(group: Mapping[str, Any], record: Elastic, admitted: int) -> dict[str, Any] | None:
    """The merge patch that sizes a stored PodGroup to ``admitted``; None when it is already
    sized so, or is not tasgate's PodGroup for this Workload's owner."""
    meta = group.get("metadata") or {}
    owners = {str(ref.get("uid")) for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping)}
    ours = (meta.get("labels") or {}).get(MANAGED_BY) == "tasgate"
    if not ours or record.owner is None or record.owner.uid not in owners:
        return None
    if (group.get("spec") or {}).get("minMember") == admitted:
        return None
    spec = resized(group, admitted)["spec"]
    return {"spec": {field: spec[field] for field in ("minMember", "minResources") if field in spec}}


def _key_of(target: view.Target) -> view.PodKey:
    return target.namespace, target.name


def _key(obj: Mapping[str, Any]) -> view.PodKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class WorkloadPages(view.Listed):
    """A Workload list, each page reduced at once to the records of the elastic Workloads."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.elastic: dict[view.PodKey, Elastic] = {}

    def add(self, items: Iterable[Mapping[str, Any]]) -> None:
        for obj in items:
            found = parse_workload(obj)
            if found is not None:
                self.elastic[_key(obj)] = found


class AdmissionView(native.NativeView):
    """The reconciler's view with the admissions of Workloads Kueue may admit partially."""

    def __init__(self) -> None:
        super().__init__()
        self.record: Callable[[str], None] = lambda result: None  # the reconciler's counter
        self.elastic: dict[view.PodKey, Elastic] = {}
        self.confirmed: dict[view.PodKey, Elastic] = {}  # checked at this record: nothing to do

    def wake(self, target: view.Target | Repair) -> None:
        """A target may be missing now, or a Workload's PodGroups not match its admission."""

    def due(self) -> list[Repair]:
        return [
            Repair(*key)
            for key, record in self.elastic.items()
            if record.admitted is not None and self.confirmed.get(key) != record
        ]

    def sized(self, owner: Mapping[str, Any], group: Mapping[str, Any]) -> Mapping[str, Any]:
        """The PodGroup to create for ``owner``: sized to its admission, else Kueue's minimum."""
        minimum = partial_minimum(group)
        if minimum is None:
            return group
        uid = str((owner.get("metadata") or {}).get("uid") or "")
        admitted = next(
            (r.admitted for r in self.elastic.values() if r.owner and r.owner.uid == uid and r.admitted),
            None,
        )
        return resized(group, admitted or minimum)

    async def repair(self, api: client.ApiClient, key: Repair, warn: Warn) -> list[str]:
        """Patch the Workload's PodGroups that do not match its admission; the names patched."""
        record = self.elastic.get((key.namespace, key.name))
        if record is None or record.admitted is None or record.owner is None:
            return []
        fixed = []
        for target in record.groups:
            present = self.exists(target.api_version, target.namespace, target.name)
            if present and await self._fix(api, target, record, record.admitted, warn):
                fixed.append(target.name)
                self.record("repaired")
                log.info(
                    "PodGroup %s/%s sized to Kueue's admitted %d pods", *_key_of(target), record.admitted
                )
        if self.elastic.get((key.namespace, key.name)) == record:
            self.confirmed[(key.namespace, key.name)] = record
        return fixed

    async def _fix(
        self, api: client.ApiClient, target: view.Target, record: Elastic, admitted: int, warn: Warn
    ) -> bool:
        path = object_path(target.api_version, target.namespace, "podgroups", target.name)
        try:
            patch = repair_patch(await call_json(api, "GET", path), record, admitted)
            if patch is not None:
                await merge_patch(api, path, patch)
        except ApiException as exc:
            if exc.status == 404:
                return False  # gone meanwhile: the pods' path makes it again, sized
            if record.owner is not None and (exc.status or 0) in (400, 403, 422):
                owner = {"apiVersion": record.owner.api_version, "kind": record.owner.kind,
                         "metadata": {"namespace": target.namespace, "name": record.owner.name,
                                      "uid": record.owner.uid}}  # fmt: skip
                note = f"cannot size PodGroup {target.name} to Kueue's admitted {admitted} pods"
                warn(owner, target.name, f"{note}: {exc.status} {exc.reason}", str(exc.status))
            raise
        return patch is not None

    # -- the watch Sink, extended to Workloads --

    def listing(self, kind: str) -> view.Listed:
        return WorkloadPages(kind) if kind == view.WORKLOADS else super().listing(kind)

    def commit(self, pages: view.Listed) -> None:
        before = {api: set(names) for api, names in self.groups.items()}
        if isinstance(pages, WorkloadPages):
            self.elastic = pages.elastic
            self.confirmed = {k: r for k, r in self.confirmed.items() if self.elastic.get(k) == r}
        super().commit(pages)
        for api, names in self.groups.items():
            for namespace, name in names - before.get(api, set()):
                self._appeared(view.Target(api, namespace, name))
        if isinstance(pages, WorkloadPages):
            for key in self.due():
                self.wake(key)

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        super().apply(kind, event, obj)
        if kind == view.WORKLOADS:
            self._workload(event, obj)
        elif kind in self.GROUPS and event == "ADDED":
            self._appeared(view.Target(self.GROUPS[kind], *_key(obj)))

    def _workload(self, event: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        record = None if event == "DELETED" else parse_workload(obj)
        if record is None:
            self.elastic.pop(key, None)
            self.confirmed.pop(key, None)
            return
        self.elastic[key] = record
        if record.admitted is not None and self.confirmed.get(key) != record:
            self.wake(Repair(*key))

    def _appeared(self, target: view.Target) -> None:
        """A PodGroup appeared (made before the admission was known, perhaps): check it again."""
        for key, record in self.elastic.items():
            if target in record.groups:
                self.confirmed.pop(key, None)
                if record.admitted is not None:
                    self.wake(Repair(*key))
