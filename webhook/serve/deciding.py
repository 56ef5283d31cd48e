"""One review decided on a held cluster state: the same steps in the server and in a decision process.

The state is checked (loaded, not stale), the request judged on a thread within its budget
(a slow decision never blocks the loop), judged again briefly when the state is behind what
the Job controller just created (`catch_up`), and an undecidable verdict answered per
``--on-timeout``. The caller turns a `TimeoutError` or an exception into its answer and counts
it: the server does so for its own decisions and for those a decision process reports.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import replace

from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome, judge
from webhook.live.holder import StateHolder
from webhook.serve.catch_up import judged_again
from webhook.serve.keys import Settings
from webhook.state.cluster import ClusterState
from webhook.wire.admission import AdmissionRequest


def state_problem(holder: StateHolder, settings: Settings) -> str:
    """Why no decision can be made on the held state now ("" when one can)."""
    if holder.current is None:
        return "cluster state not loaded yet"
    age = holder.age()
    if settings.stale_after and age is not None and age > settings.stale_after:
        return f"cluster state is stale ({age:.0f}s old)"
    return ""


async def decide_held(
    holder: StateHolder,
    settings: Settings,
    req: AdmissionRequest,
    mutating: bool,
    policy: Policy,
    budget: float,
    executor: Executor | None,
) -> Outcome:
    """The outcome of ``req`` on ``holder``'s state; raises `TimeoutError` past ``budget`` seconds."""
    state = holder.current
    problem = state_problem(holder, settings)
    if problem or state is None:
        return unavailable(settings, problem)
    loop = asyncio.get_running_loop()
    earlier = () if mutating else holder.earlier()
    started = loop.time()

    async def on(state: ClusterState) -> Outcome:
        call = loop.run_in_executor(executor, judge, req, state, policy, mutating, earlier)
        return await asyncio.wait_for(call, max(budget - (loop.time() - started), 0.001))

    return settled(await judged_again(holder, state, await on(state), on, budget), settings)


def settled(outcome: Outcome, settings: Settings) -> Outcome:
    """An undecidable verdict (judged on a state that lacks what it needs) per ``--on-timeout``."""
    if outcome.undecided and settings.on_timeout == "deny":
        audit = {**(outcome.audit or {}), "decision": "deny"}
        message = f"tasgate could not decide: {outcome.undecided}"
        return replace(outcome, allowed=False, message=message, code=503, audit=audit)
    return outcome


def unavailable(settings: Settings, why: str) -> Outcome:
    """The answer when tasgate cannot judge: the policy's documented choice, said plainly."""
    if settings.on_timeout == "deny":
        return Outcome(False, Reason.UNAVAILABLE, f"tasgate could not decide: {why}", 503)
    return Outcome(True, Reason.UNAVAILABLE, "", None, (f"tasgate did not check this workload: {why}",))
