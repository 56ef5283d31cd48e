"""The lifecycle tracker's plain parts: its rows, list pages, jobs and tasks (``live.tracker``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.decide.policy import Policy
from webhook.state.cluster import ClusterState
from webhook.track.ledger import Job, Key
from webhook.track.records import PodRecord, WorkloadRecord, parse_pod


@dataclass(frozen=True)
class Row:
    """One current gang as the lifecycle metrics label it."""

    namespace: str
    name: str  # the owner the user applied (the Workload's name when it has none)
    uid: str
    workload: str
    cluster_queue: str
    state: str
    seconds: float


class PodPages:
    """The tracked pods' list as it arrives: each page parsed into `PodRecord`s at once, so a
    100,000-pod list never sits in memory as objects."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.pods: dict[Key, PodRecord] = {}

    def add(self, items: Iterable[Mapping[str, Any]]) -> None:
        for obj in items:
            record = parse_pod(obj)
            self.pods[record.key] = record


def cluster_queue_of(record: WorkloadRecord, state: ClusterState | None) -> str:
    """Kueue's admission says; before it, the LocalQueue's ClusterQueue ("" when unknown)."""
    if record.cluster_queue:
        return record.cluster_queue
    queue = state.local_queues.get((record.namespace, record.queue)) if state is not None else None
    return queue.cluster_queue if queue is not None else ""


def run_jobs(jobs: Sequence[Job], state: ClusterState, policy: Policy) -> list[tuple[Key, Any]]:
    return [(job.key, job.run(state, policy)) for job in jobs]
