"""/validate after a change of the cluster between /mutate and /validate (one `kubectl apply` of a
LocalQueue with its Job), or on a state /mutate did not use: the object is judged as written, never
refused as "mutation missing" (issue 37.4)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tests.webhook.conftest import GPU, job, job_review, node, policy, rule
from tests.webhook.quota_world import (
    admitted,
    cluster_queue,
    flavors_and_topology,
    local_queue,
    rack,
    resources,
    state,
)
from tests.webhook.test_server import manifest, review
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.review import judge
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.live.holder import EARLIER_KEPT, RECENT_KEPT, StateHolder
from webhook.state.cluster import ClusterState, build_state
from webhook.wire.admission import AdmissionRequest, parse_review

POLICY: Policy = load_policy("default")


def _objects(with_queue: bool) -> list[dict[str, Any]]:
    return [o for o in sample_objects() if with_queue or o.get("kind") != "LocalQueue"]


def _request(obj: dict[str, Any]) -> AdmissionRequest:
    return parse_review(json.dumps(review(obj)).encode())


def _states() -> tuple[ClusterState, ClusterState]:
    return build_state(_objects(False), 1), build_state(_objects(True), 2)


def test_the_queue_arriving_between_the_calls_is_judged_as_written() -> None:
    before, after = _states()
    req = _request(manifest("lws-unannotated.yaml"))
    mutated = judge(req, before, POLICY, mutating=True)
    assert mutated.allowed and not mutated.patch and mutated.reason is Reason.KUEUE_CONFIG
    validated = judge(req, after, POLICY, mutating=False, earlier=(before,))
    assert validated.allowed, validated.message
    assert validated.reason is not Reason.MUTATION_MISSING
    assert any("not added, because the cluster changed" in w for w in validated.warnings)


def test_a_missing_mutation_with_no_earlier_state_to_explain_it_is_judged_as_written() -> None:
    """The state /mutate used aged out of the holder (or another replica answered): what Kueue
    runs as written is allowed, with the reason and a warning naming what is missing."""
    _, after = _states()
    req = _request(manifest("lws-unannotated.yaml"))
    assert judge(req, after, POLICY, mutating=True).patch
    validated = judge(req, after, POLICY, mutating=False, earlier=(after,))
    assert validated.allowed and validated.reason is Reason.MUTATION_MISSING
    assert validated.audit == {**(validated.audit or {}), "decision": "allow", "reason": "mutation-missing"}
    assert any("tasgate's mutation is missing from this object" in w for w in validated.warnings)


def test_an_object_that_never_fits_is_refused_whatever_the_earlier_states() -> None:
    before, after = _states()
    req = _request(manifest("jobset-never-fits.yaml"))
    assert not judge(req, after, POLICY, mutating=False, earlier=(before,)).allowed


def test_the_holder_keeps_recent_states_and_those_replaced_by_a_change_of_structure_longer() -> None:
    before, after = _states()
    holder = StateHolder()
    holder.publish(before)
    assert holder.earlier() == ()
    holder.publish(after)
    assert holder.earlier() == (before,)
    usage = [after.with_usage({}, {}, 3 + i, ()) for i in range(RECENT_KEPT + 1)]
    for state_ in usage:
        holder.publish(state_)
    kept = holder.earlier()
    assert before in kept, "replaced by a change of structure: kept beyond the recent ones"
    assert after not in kept and len(kept) == RECENT_KEPT + 1  # the 8 newest replaced, and before
    for generation in range(RECENT_KEPT + EARLIER_KEPT + 2):
        holder.publish(build_state(_objects(True), 100 + generation))
    assert len(holder.earlier()) <= RECENT_KEPT + EARLIER_KEPT


def test_a_change_of_usage_between_the_calls_is_judged_as_written() -> None:
    """The flavor Kueue picks now depends on quota in use, and each flavor has its own plan: an
    admission between /mutate and /validate may change what the policy asks for."""
    two = flavors_and_topology({"first": "a", "second": "b"})
    spread = [node(f"a-h{h}", {"block": f"a-b{h}", "rack": f"a-r{h}", "pool": "a"}) for h in range(4)]
    queue = cluster_queue("cq", [("first", resources(64)), ("second", resources(64))])
    world = [two, spread, rack("b"), queue, local_queue("q", "cq")]
    before, after = state(*world), state(*world, admitted("other", "cq", {GPU: "60"}, "first"))
    tightest = policy([rule("required", "tightest")])
    req = parse_review(job_review(job(2, gpus=8, queue="q", namespace="team"), "u1", "team", "alice"))
    mutated = judge(req, before, tightest, mutating=True)
    assert mutated.allowed and not mutated.patch
    if not judge(req, after, tightest, mutating=True).patch:
        raise AssertionError("the world no longer makes the plan depend on usage: change it")
    holder = StateHolder()
    holder.publish(before)
    holder.publish(after)  # usage only: kept among the recent states
    validated = judge(req, after, tightest, mutating=False, earlier=holder.earlier())
    assert validated.allowed, validated.message


def test_judged_as_written_keeps_the_policys_settings() -> None:
    """Only the rules are dropped: the default topology (and exemptions, Kueue's users …) stay, so
    a queue-less object judged as written is still judged."""
    written = replace(POLICY, rules=())
    assert written.default_topology == POLICY.default_topology and written.kueue_users == POLICY.kueue_users
