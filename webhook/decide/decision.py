"""The decision path the webhook and `tasgate check` share: one object in, one verdict out.

Pure: no network, no clock, no logging. Each registered backend (``decide.backends``: the
native Kubernetes gangs, then Kueue) is asked in turn; the first that claims the object judges
it (``decide.backend`` says what a backend is and how to add one). What no backend claims is
not a workload: allowed, unchanged.
"""

from __future__ import annotations

from webhook.decide.backends import BACKENDS
from webhook.decide.policy import Policy
from webhook.decide.verdicts import Decision, Review, first_decision
from webhook.state.cluster import ClusterState


def decide(review: Review, state: ClusterState, policy: Policy) -> Decision:
    base = first_decision(review, state.generation)
    for backend in BACKENDS:
        found = backend.judge(review, base, state, policy)
        if found is not None:
            return found
    return base
