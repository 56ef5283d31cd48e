"""The Kueue backend: a workload Kueue admits, its PodSets placed by Kueue's topology-aware
scheduling (``kueue.admit`` → ``kueue.placement``), on this cluster or, behind a MultiKueue
check, on each worker cluster it may be dispatched to (``kueue.multikueue``).

It claims every object (the last backend asked): a workload it does not know is still said
(reason unknown-kind), never denied.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.decide.kueue.admit import judge_workload
from webhook.decide.kueue.multikueue import dispatched_to, on_workers
from webhook.decide.patch import apply_entries
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review, first_decision
from webhook.state.cluster import ClusterState


class KueueBackend:
    name = "kueue"

    def judge(self, review: Review, base: Decision, state: ClusterState, policy: Policy) -> Decision:
        decision = judge_workload(review, base, state, policy)
        if decision.reason is Reason.MULTIKUEUE and decision.allowed and (state.workers or state.unreached):
            # Judged where Kueue dispatches it, as the manager leaves it (`kueue.multikueue`).
            workers, unreached = dispatched_to(state, decision.cluster_queue)
            dispatched = replace(review, obj=apply_entries(review.obj, decision.patch))
            judged = {
                name: judge_workload(
                    dispatched, first_decision(dispatched, worker.generation), worker, policy
                )
                for name, worker in workers.items()
            }
            return on_workers(decision, judged, unreached)
        return decision

    @staticmethod
    def _on(review: Review, state: ClusterState, policy: Policy) -> Decision:
        return judge_workload(review, first_decision(review, state.generation), state, policy)
