"""Follow every gang after admission: Workloads, their pods and PodGroups, watched into a Ledger.

The ``Tracker`` is a watch ``Sink`` (``live.watch.run_kind`` feeds it as it feeds the Mirror) for
its own kinds: Kueue Workloads, the pods Kueue admitted (label ``kueue.x-k8s.io/podset``, Pending
ones included: the Mirror's pod watch sees only bound, running pods), and both gang backends'
PodGroups. Events only update slim records; ``run`` then, at most every ``interval`` seconds:

- assesses queued Workloads on the current ``ClusterState`` (in a worker thread, on a copy);
- compares each fresh admission with tasgate's placement on the state of the moment the
  admission was seen (``track.compare``): a counter, and an Event on a mismatch;
- classifies every gang, keeps when it entered its state, and emits an Event when a gang enters
  ``partial_start`` or ``never_fits`` (once per state change);
- reports each gang's placement when it reaches running and its start-up phases
  (``track.observe``, once per gang) to ``observed``, with an Event ``TopologyViolated`` when a
  required topology is not met by the pods' nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.decide.policy import Policy
from webhook.live.events import EventRecorder, GangEvent, ObjectRef
from webhook.live.holder import StateHolder
from webhook.live.native_track import NativePredictions
from webhook.live.tracked import WORKLOAD_API, ledger_table
from webhook.live.tracker_parts import PodPages, Row, cluster_queue_of, run_jobs
from webhook.live.watch import Collected
from webhook.model.workloads.native import NATIVE_API
from webhook.state.cluster import ClusterState
from webhook.track.classify import State
from webhook.track.compare import Comparison, compare
from webhook.track.ledger import Job, Key, Ledger, Tracked
from webhook.track.native import as_workload
from webhook.track.observe import Observation, Observer
from webhook.track.quality import Placement
from webhook.track.records import PodRecord, WorkloadRecord

__all__ = ["Row", "Tracker", "cluster_queue_of"]

log = logging.getLogger("tasgate.track")
EVENT_STATES = {State.PARTIAL_START, State.NEVER_FITS}


class Tracker:
    def __init__(
        self,
        holder: StateHolder,
        policy: Callable[[], Policy],
        events: EventRecorder | None = None,
        predicted: Callable[[Comparison], None] = lambda comparison: None,
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        observed: Callable[[Observation, str], None] = lambda seen, cluster_queue: None,
        native_pods: Callable[[], Mapping[Key, PodRecord]] = dict,
    ) -> None:
        self.holder, self.policy, self.events, self.predicted = holder, policy, events, predicted
        self.interval, self.clock = interval, clock
        self.ledger = Ledger()
        self.admissions: list[tuple[Key, ClusterState | None]] = []
        self.entered: dict[Key, tuple[State, float]] = {}  # gang -> (state, wall time it entered it)
        self.current: list[Tracked] = []
        self.dirty = asyncio.Event()
        self.observed, self.observer = observed, Observer()
        self.native_pods, self.native = native_pods, NativePredictions()  # `live.native_track`

    # -- the watch Sink --

    def listing(self, kind: str) -> Collected | PodPages:
        """Pods (every pod Kueue admitted: the bulk of a cluster) are parsed page by page into
        slim records; Workloads and PodGroups, one per gang, are kept whole until complete."""
        return PodPages(kind) if ledger_table(kind) == "pods" else Collected(kind)

    def commit(self, pages: Collected | PodPages) -> None:
        if isinstance(pages, PodPages):
            self.ledger.pods = pages.pods
            self._relisted()
        else:
            self.replace(pages.kind, pages.items)

    def replace(self, kind: str, items: Sequence[Mapping[str, Any]]) -> None:
        self.ledger.replace(ledger_table(kind), items)
        self._relisted()

    def _relisted(self) -> None:
        for record in self.ledger.workloads.values():
            if record.admission is not None:
                self.ledger.forget_spec(record.key)  # admitted while nobody watched: no prediction
        self.dirty.set()

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        table = ledger_table(kind)
        if table == "workloads":
            self._workload(event, obj)
        elif table.startswith("nativepodgroups"):
            self._native_group(event, obj)
        elif table == "pods":
            self.ledger.drop_pod(obj) if event == "DELETED" else self.ledger.put_pod(obj)
        elif event == "DELETED":
            self.ledger.drop_group(obj)
        else:
            self.ledger.put_group(obj)
        self.dirty.set()

    def mark_absent(self, kind: str) -> None:
        """A CRD that is not installed (Volcano's, say): nothing of that kind is tracked."""
        self.ledger.replace(ledger_table(kind), [])

    def healthy(self, kind: str) -> None:
        """Freshness is the Mirror's business (readiness); the tracker reports what it has."""

    def connected(self, kind: str) -> None:
        """As ``healthy``."""

    def disconnected(self, kind: str) -> None:
        """The records stay as they were: the next list replaces them."""

    def _workload(self, event: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if event == "DELETED":
            self.ledger.drop_workload(key)
            return
        before, record = self.ledger.put_workload(obj)
        if record.admission is not None and before is not None and before.admission is None:
            # The state Kueue admitted on is the one published now: keep it for the comparison.
            self.admissions.append((key, self.holder.current))
        elif record.admission is not None and key not in dict(self.admissions):
            self.ledger.forget_spec(key)

    def _native_group(self, event: str, obj: Mapping[str, Any]) -> None:
        """A native PodGroup; when the scheduler placed it, the prediction made while it was
        queued goes to the comparison (none for a group first seen already placed)."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if event == "DELETED":
            self.ledger.drop_native(key)
            self.native.forget(key)
            return
        before, record = self.ledger.put_native(obj)
        if record.scheduled and (before is None or not before.scheduled):
            if before is not None:
                self.native.scheduled(key, self.ledger.assessments.get(key))
            self.ledger.forget_spec(key)

    # -- the loop --

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # not wait_for: it can drop a cancellation on 3.11
                async with asyncio.timeout(self.interval):
                    await self.dirty.wait()
            self.dirty.clear()
            try:
                await self.step()
            except Exception:  # one bad round must not stop the tracking
                log.exception("lifecycle tracking round failed")

    async def step(self) -> None:
        policy, state = self.policy(), self.holder.current
        self.ledger.native_pods = self.native_pods()
        if state is not None:
            jobs = self.ledger.stale(state.generation)
            if jobs:
                found = await asyncio.to_thread(run_jobs, jobs, state, policy)
                for key, assessment in found:
                    self.ledger.store(key, assessment)
        await self._compare_admissions(policy)
        for compared in await self.native.round(self.ledger, self.holder):
            self._compared(compared.group.key, compared.comparison)
        await self._classify(policy)

    async def _compare_admissions(self, policy: Policy) -> None:
        admissions, self.admissions = self.admissions, []
        for key, state in admissions:
            record, spec = self.ledger.workloads.get(key), self.ledger.specs.get(key)
            self.ledger.forget_spec(key)
            if record is None or spec is None or state is None or record.admission is None:
                continue
            job = Job(key, record.namespace, record.queue, spec)
            # The Mirror may have published the admission already: predict on the state
            # without it, or the gang would be judged against its own assignment.
            before = state.without_workload(key)
            found = compare(record.admission, await asyncio.to_thread(job.run, before, policy))
            if found is not None:
                self._compared(key, found)

    def _compared(self, key: Key, found: Comparison) -> None:
        """Count a prediction against the placement Kueue (or the kube-scheduler) made."""
        self.predicted(found)
        log.info("prediction for %s/%s: %s (%s) %s", *key, found.result, found.reason, found.detail)
        record, group = self.ledger.workloads.get(key), self.ledger.native.get(key)
        if found.agree:
            return
        if record is not None:
            note = f"Kueue's placement differs: {found.detail}"
            self._emit(record, "PredictionMismatch", "Compare", note, f"admission:{record.uid}")
        elif group is not None:
            note = f"the kube-scheduler's placement differs: {found.detail}"
            self._emit(
                as_workload(group, ()), "PredictionMismatch", "Compare", note, f"admission:{group.uid}"
            )

    async def _classify(self, policy: Policy) -> None:
        now = self.clock()
        # Off the event loop, on a copy: a round over thousands of gangs takes tens of milliseconds.
        tracked = await asyncio.to_thread(self.ledger.copy().tracked, now, policy.partial_start_after)
        entered: dict[Key, tuple[State, float]] = {}
        for t in tracked:
            key = t.gang.workload.key
            before = self.entered.get(key)
            if before is not None and before[0] is t.status.state:
                entered[key] = before
                continue
            since = now if before is not None or t.status.since is None else min(t.status.since, now)
            entered[key] = (t.status.state, since)
            was = before[0].value if before is not None else "new"
            log.info(
                "gang %s/%s: %s -> %s (%s) %s",
                *key,
                was,
                t.status.state.value,
                t.status.reason,
                t.status.message,
            )
            if t.status.state in EVENT_STATES:
                episode = f"{t.status.state.value}:{t.status.since}"
                self._emit(t.gang.workload, t.status.reason, "Track", t.status.message, episode)
        self.entered, self.current = entered, tracked
        self._observe(tracked)

    def _observe(self, tracked: Sequence[Tracked]) -> None:
        state = self.holder.current
        for seen in self.observer.round(tracked, state):
            wl, where = seen.tracked.gang.workload, seen.placement
            self.observed(seen, cluster_queue_of(wl, state))
            if where is not None and where.result == "violated":
                note = f"{where.detail} (the pods' nodes, against Kueue's assignment)"
                self._emit(wl, "TopologyViolated", "Track", note, f"violated:{wl.uid}")

    def _emit(self, record: WorkloadRecord, reason: str, action: str, note: str, episode: str) -> None:
        if self.events is None:
            return
        api, kind = (record.api or NATIVE_API, "PodGroup") if record.native else (WORKLOAD_API, "Workload")
        workload = ObjectRef(api, kind, record.namespace, record.name, record.uid)
        owner = record.owner
        regarding = (
            ObjectRef(owner.api_version, owner.kind, record.namespace, owner.name, owner.uid)
            if owner
            else workload
        )
        self.events.emit(
            GangEvent(regarding, workload if owner else None, reason, action, note, episode=episode)
        )

    def rows(self) -> list[Row]:
        """The current (not finished) gangs, labelled for ``tasgate_gang_state_seconds``."""
        now, state = self.clock(), self.holder.current
        out = []
        for t in self.current:
            if t.status.state is State.FINISHED:
                continue
            wl = t.gang.workload
            since = self.entered.get(wl.key, (t.status.state, now))[1]
            owner = wl.owner
            out.append(
                Row(
                    wl.namespace,
                    owner.name if owner else wl.name,
                    owner.uid if owner else wl.uid,
                    wl.name,
                    cluster_queue_of(wl, state),
                    t.status.state.value,
                    max(now - since, 0.0),
                )
            )
        return out

    def placed(self) -> list[tuple[Tracked, Placement]]:
        """The running gangs and where their pods landed (judged when each reached running)."""
        found = self.observer.placements
        return [(t, found[t.gang.workload.key]) for t in self.current if t.gang.workload.key in found]

    def counts(self) -> dict[tuple[str, str, str], int]:
        """(state, cluster_queue, namespace) -> gangs, finished ones included."""
        state = self.holder.current
        out: dict[tuple[str, str, str], int] = {}
        for t in self.current:
            wl = t.gang.workload
            key = (t.status.state.value, cluster_queue_of(wl, state), wl.namespace)
            out[key] = out.get(key, 0) + 1
        return out
