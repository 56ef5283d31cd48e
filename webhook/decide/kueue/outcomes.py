"""The small verdicts of the decision path: allowed or denied with a reason, not checked, no
TAS, and the audit annotations every verdict carries (``decision`` allow/deny, ``reason`` the code).
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide import messages
from webhook.decide.kueue.topology import Resolution, Target
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import (
    Decision,
    PodSetVerdict,
    all_fit_now,
    all_fit_when_empty,
    revised,
    with_reason,
)
from webhook.state.cluster import ClusterState
from webhook.state.rejected import Rejected


def audit_of(verdicts: Sequence[PodSetVerdict], target: Target, reason: Reason) -> dict[str, str]:
    levels = sorted({v.request.level or v.request.mode.value for v in verdicts})
    return {
        "decision": "deny" if reason is Reason.NEVER_FITS else "allow",
        "reason": reason.value,
        "topology": target.topology.name,
        "flavor": target.flavor or "policy-default",
        "level": ",".join(levels),
        "fits-now": str(all_fit_now(verdicts)).lower(),
        "fits-when-empty": str(all_fit_when_empty(verdicts)).lower(),
        "injected": str(any(v.injected for v in verdicts)).lower(),
    }


def not_checked(base: Decision, state: ClusterState, queue: str | None, rejected: Rejected) -> Decision:
    """Not judged: an object the verdict depends on is left out of the state (`decide.kueue.depends`)."""
    lq = state.local_queues.get((base.namespace, queue)) if queue else None
    warning = f"not checked: {messages.left_out(rejected)}"
    decision = with_reason(base, Reason.OBJECT_REJECTED, (warning,))
    return revised(decision, queue=queue, cluster_queue=lq.cluster_queue if lq else None, rejected=rejected)


TAS_OFF = "Kueue runs with feature gate TopologyAwareScheduling=false: it places no PodSet by topology"


def no_target(resolution: Resolution, policy: Policy) -> str:
    default = policy.default_topology
    if resolution.tas_off:
        return TAS_OFF
    if resolution.cluster_queue:
        return f'ClusterQueue "{resolution.cluster_queue}" has no flavor with a topologyName'
    if default is None:
        return "it names no Kueue queue, and the policy has no defaultTopology"
    return f'it names no Kueue queue, and the policy\'s default Topology "{default.name}" is not in the state'


def no_tas(base: Decision, why: str) -> Decision:
    """Not placed by TAS, saying why in the message: the CLI shows it (a state missing the Topology
    reads "not checked" with the cause); an allowed admission carries no message, so the webhook
    stays as quiet as before for every Job that is not TAS's."""
    return revised(with_reason(base, Reason.NO_TAS), message=f"no TAS: {why}")
