"""/validate after a change of the cluster between /mutate and /validate (one `kubectl apply` of a
LocalQueue with its Job): the object is judged as written, never refused as "mutation missing"."""

from __future__ import annotations

import json
from typing import Any

from tests.webhook.test_server import manifest, review
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.review import judge
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.live.holder import EARLIER_KEPT, StateHolder
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


def test_without_an_earlier_state_that_asked_for_nothing_a_missing_mutation_is_refused() -> None:
    _, after = _states()
    req = _request(manifest("lws-unannotated.yaml"))
    assert judge(req, after, POLICY, mutating=True).patch
    refused = judge(req, after, POLICY, mutating=False, earlier=(after,))
    assert not refused.allowed and refused.reason is Reason.MUTATION_MISSING


def test_an_object_that_never_fits_is_refused_whatever_the_earlier_states() -> None:
    before, after = _states()
    req = _request(manifest("jobset-never-fits.yaml"))
    assert not judge(req, after, POLICY, mutating=False, earlier=(before,)).allowed


def test_the_holder_keeps_states_replaced_by_a_change_of_structure_only() -> None:
    before, after = _states()
    holder = StateHolder()
    holder.publish(before)
    assert holder.earlier() == ()
    holder.publish(after)
    assert holder.earlier() == (before,)
    same = after.with_usage({}, {}, 3, ())  # usage only: the mutation cannot differ
    holder.publish(same)
    assert holder.earlier() == (before,)
    for generation in range(EARLIER_KEPT + 2):
        holder.publish(build_state(_objects(True), 10 + generation))
    assert len(holder.earlier()) == EARLIER_KEPT
