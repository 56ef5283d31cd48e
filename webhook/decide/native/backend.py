"""The native Kubernetes gang backend: Workload and PodGroup (``scheduling.k8s.io``) placed by
the kube-scheduler's own gang cycle (docs/native.md).

Its subject: a native gang tasgate creates itself for a named workload outside Kueue
(``native.create``, when the policy asks for one and the API is served), or an object that
belongs to a native Workload (``native.subject``: the Workload, its PodGroups, a pod of one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decide.native.create import create_native
from webhook.decide.native.judge import decide_native
from webhook.decide.native.subject import native_subject
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review, deny
from webhook.model.workloads.native import MINOR, V1ALPHA2, is_native
from webhook.state.cluster import ClusterState
from webhook.wire.errors import InvalidObject


class NativeBackend:
    name = "native"

    def judge(self, review: Review, base: Decision, state: ClusterState, policy: Policy) -> Decision | None:
        created = create_native(review, base, state, policy)  # a native gang tasgate makes itself
        if created is not None:
            return created
        unserved = unserved_version(review.obj, state)
        if unserved:
            return deny(base, Reason.INVALID, unserved)
        try:
            subject = native_subject(review.obj, base.namespace, state)
        except InvalidObject as exc:
            return deny(base, Reason.INVALID, str(exc))
        if subject is None or base.namespace in policy.exempt_namespaces:
            return None
        return decide_native(base, subject, state, review.obj, policy)


def unserved_version(obj: Mapping[str, Any], state: ClusterState) -> str:
    """Version skew: a native object written for the other release than the one serving the API
    (a v1.36 ``v1alpha2`` manifest on v1.37, which serves it no more, or the reverse). The API
    server refuses it ("no matches for kind"); offline, tasgate says so instead of judging it."""
    if not is_native(obj) or not state.native.minor_known:
        return ""
    api = str(obj.get("apiVersion"))
    if MINOR[api] == state.native.minor:
        return ""
    served = "scheduling.k8s.io/v1beta1 (and v1alpha3)" if state.native.minor >= 37 else V1ALPHA2
    return (
        f"{api} {obj.get('kind')} is not served by this cluster (Kubernetes v1.{state.native.minor} "
        f"serves {served}): the API server refuses it; write it as that version"
    )
