"""The native Kubernetes gang backend: Workload and PodGroup (``scheduling.k8s.io``) placed by
the kube-scheduler's own gang cycle (docs/native.md).

Its subject: a native gang tasgate creates itself for a named workload outside Kueue
(``native.create``, when the policy asks for one and the API is served), or an object that
belongs to a native Workload (``native.subject``: the Workload, its PodGroups, a pod of one).
"""

from __future__ import annotations

from webhook.decide.native.create import create_native
from webhook.decide.native.judge import decide_native
from webhook.decide.native.subject import native_subject
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review, deny
from webhook.state.cluster import ClusterState
from webhook.wire.errors import InvalidObject


class NativeBackend:
    name = "native"

    def judge(self, review: Review, base: Decision, state: ClusterState, policy: Policy) -> Decision | None:
        created = create_native(review, base, state, policy)  # a native gang tasgate makes itself
        if created is not None:
            return created
        try:
            subject = native_subject(review.obj, base.namespace, state)
        except InvalidObject as exc:
            return deny(base, Reason.INVALID, str(exc))
        if subject is None or base.namespace in policy.exempt_namespaces:
            return None
        return decide_native(base, subject, state, review.obj, policy)
