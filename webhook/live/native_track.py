"""The kube-scheduler's placement of a native gang against tasgate's prediction, once per gang.

When the tracker sees a native PodGroup's ``PodGroupScheduled`` turn True (``live.tracker``), it
hands over the last verdict it made on the group while it was queued (``track.native.
assess_native``, on a state before any pod of the group was bound). The comparison waits until
``minCount`` pods are bound, then reads the domain of the topology key their nodes are in and
compares it with the prediction (``track.compare``, as Kueue's admissions are): what
``tasgate_predictions_total`` counts. A gang scheduled before tasgate had judged it queued is
predicted on the newest state the holder still keeps in which none of its pods was bound
(``StateHolder.earlier``); when there is none, no prediction is counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, replace

from webhook.live.holder import StateHolder
from webhook.state.cluster import ClusterState
from webhook.track.compare import Comparison, compare
from webhook.track.ledger import Key, Ledger
from webhook.track.native import NativeGroupRecord, assess_native, placed
from webhook.track.predict import Assessment
from webhook.track.records import PodRecord


@dataclass(frozen=True)
class Compared:
    group: NativeGroupRecord
    comparison: Comparison


class NativePredictions:
    """The native gangs scheduled but not yet compared, with their predictions (None: to make)."""

    def __init__(self) -> None:
        self.pending: dict[Key, Assessment | None] = {}

    def scheduled(self, key: Key, prediction: Assessment | None) -> None:
        self.pending[key] = prediction

    def forget(self, key: Key) -> None:
        self.pending.pop(key, None)

    async def round(self, ledger: Ledger, holder: StateHolder) -> list[Compared]:
        """Compare every pending gang whose minCount pods are bound; drop those that went."""
        out = []
        for key, made in list(self.pending.items()):
            group = ledger.native.get(key)
            if group is None:
                self.forget(key)
                continue
            pods = [p for p in ledger.native_pods.values() if _of(p, group)]
            if sum(p.node is not None for p in pods) < group.min_count:
                continue  # the scheduler binds a gang's pods one by one
            self.forget(key)
            prediction = made if made is not None and made.judged else await _predict_before(group, holder)
            state = holder.current
            if prediction is None or state is None:
                continue
            labels = {n.name: n.labels for n in state.nodes if n.name in {p.node for p in pods}}
            admission = placed(group, pods, labels)
            found = compare({p.name: admission for p in prediction.pod_sets}, prediction)
            if found is not None and found.agree:
                found = replace(found, detail="the kube-scheduler bound the group where tasgate predicted")
            if found is not None:
                out.append(Compared(group, found))
        return out


def _of(pod: PodRecord, group: NativeGroupRecord) -> bool:
    return pod.namespace == group.namespace and pod.native_group == group.name


async def _predict_before(group: NativeGroupRecord, holder: StateHolder) -> Assessment | None:
    """The verdict on the newest kept state where no pod of the group is bound yet."""
    state = next(iter(_unbound_states(group, (holder.current, *holder.earlier()))), None)
    if state is None:
        return None
    found = await asyncio.to_thread(assess_native, group.spec, state)
    return found if found.judged else None


def _unbound_states(
    group: NativeGroupRecord, states: Iterable[ClusterState | None]
) -> Iterable[ClusterState]:
    for state in states:
        if state is None:
            continue
        members = state.native.members.get(group.key)
        if (group.key in state.native.pod_groups) and (members is None or members.bound == 0):
            yield state
