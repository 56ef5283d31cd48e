"""A native object judged before the state shows what its verdict reads: judged again, briefly.

The Job controller creates a Job's Workload and PodGroup within milliseconds of the Job, so
their reviews can arrive before tasgate's Job watch delivered the Job (and the publisher swapped
it in, ``live.mirror``): judged then, they read ``native-unknown``. A review whose verdict is
``native-unknown`` therefore waits for the next published states, up to `CATCH_UP_SECONDS` (and
a third of its budget), and is judged again on each; the first verdict that is not unknown, or
the last one, is the answer. Only Workloads and PodGroups wait (a pod created before its PodGroup
is unknown for real); a static state (files) never changes and is not waited on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome
from webhook.live.holder import StateHolder
from webhook.state.cluster import ClusterState

CATCH_UP_SECONDS = 1.0
WAITED = frozenset({"Workload", "PodGroup"})  # what the Job controller creates right after a Job
POLL_SECONDS = 0.05


async def judged_again(
    holder: StateHolder,
    state: ClusterState,
    outcome: Outcome,
    judge: Callable[[ClusterState], Awaitable[Outcome]],
    budget: float,
) -> Outcome:
    """``outcome`` (made on ``state``), or the verdict on a newer published state."""
    if not waits(holder, outcome):
        return outcome
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(CATCH_UP_SECONDS, budget / 3)
    while loop.time() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        current = holder.current
        if current is None or current is state:
            continue
        state, outcome = current, await judge(current)
        if outcome.reason is not Reason.NATIVE_UNKNOWN:
            break
    return outcome


def waits(holder: StateHolder, outcome: Outcome) -> bool:
    """Whether ``outcome`` is judged again on the next states (see the module's docstring)."""
    d = outcome.decision
    if outcome.reason is not Reason.NATIVE_UNKNOWN or holder.confirmed is None or d is None:
        return False
    return d.kind in WAITED  # a pod before its PodGroup is unknown for real: the scheduler holds it
