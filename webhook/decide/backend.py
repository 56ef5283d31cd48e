"""What a scheduling backend is to the decision: one class, registered once (``decide.backends``).

tasgate judges a workload for whichever component will place its gang: Kueue's topology-aware
scheduling (``decide.kueue``), or the kube-scheduler's own gang placement of native Kubernetes
Workloads and PodGroups (``decide.native``). Each is a package behind this one interface, as a
Kueue ``jobframework`` integration or a kube-scheduler framework plugin is: the decision asks
every registered backend in order, and the first whose subject the object is judges it. A
backend owns all of its path — recognising its subject, resolving its targets (queue, flavor,
topology), placing through the scorer's public engines (``scorer.Engine`` for Kueue,
``scorer.native`` for the kube-scheduler; never a private module), the gang objects it needs —
and imports no other backend (import-linter's independence contract).

Adding one (docs/design.md, "Adding a backend"): a package ``webhook/decide/<name>/`` with a
class implementing `Backend`, one line in ``decide.backends``, its modules in the independence
contract of pyproject.toml; nothing else in the decision changes.
"""

from __future__ import annotations

from typing import Protocol

from webhook.decide.policy import Policy
from webhook.decide.verdicts import Decision, Review
from webhook.state.cluster import ClusterState


class Backend(Protocol):
    """One scheduling backend's judgement."""

    name: str

    def judge(self, review: Review, base: Decision, state: ClusterState, policy: Policy) -> Decision | None:
        """The verdict on ``review``'s object when it is this backend's subject, else None (the
        next backend is asked). ``base`` is the object's identity, allowed, reason
        not-a-workload. A malformed object of its own kind is this backend's to deny."""
        ...
