"""Flavor assignment as Kueue does it (issue 18.2): quota first, then the topology, flavor after
flavor across scheduling cycles, with ``whenCanBorrow``."""

from __future__ import annotations

from typing import Any

from tests.webhook.conftest import GPU, policy
from tests.webhook.quota_world import (
    admitted,
    busy,
    cluster_queue,
    cohort,
    flavors_and_topology,
    gang,
    judge,
    local_queue,
    rack,
    resources,
    state,
)
from webhook.model.podrequests import NO_DEFAULTS
from webhook.state.cluster import ClusterState
from webhook.track.predict import assess, workload_view

NONE = policy([])
TWO = flavors_and_topology({"first": "a", "second": "b"})


def two_flavors(*extra: dict[str, Any], first: int = 64, second: int = 64, **cq: Any) -> ClusterState:
    queue = cluster_queue("cq", [("first", resources(first)), ("second", resources(second))], **cq)
    return state(TWO, rack("a"), rack("b"), queue, local_queue("q", "cq"), *extra)


def test_a_gang_that_fits_now_only_on_the_second_flavor_is_admitted_there() -> None:
    full = [busy(f"a-h{h}") for h in range(4)]  # the first flavor's rack is full now
    d = judge(gang(2), two_flavors(*full), NONE)
    assert (d.allowed, d.reason, d.pod_sets[0].flavor, d.audit["flavor"]) == (
        True,
        "fits",
        "second",
        "second",
    )
    assert [(f.flavor, f.fits_now, f.fits_when_empty) for f in d.flavors] == [
        ("first", False, True),
        ("second", True, True),
    ]


def test_when_every_flavor_is_full_it_waits_on_the_first() -> None:
    full = [busy(f"{p}-h{h}") for p in "ab" for h in range(4)]
    d = judge(gang(2), two_flavors(*full), NONE)
    assert (d.reason, d.pod_sets[0].flavor) == ("waits", "first")


def test_a_flavor_whose_quota_is_in_use_is_passed_over() -> None:
    used = admitted("other", "cq", {GPU: "60"}, "first")
    d = judge(gang(2), two_flavors(used), NONE)
    assert (d.reason, d.pod_sets[0].flavor) == ("fits", "second")


def borrowing_world(when_can_borrow: str | None) -> ClusterState:
    # "first" fits only by borrowing (8 nominal, the lender's 16 in the cohort), "second" within its own.
    queue = cluster_queue(
        "cq",
        [("first", resources(8)), ("second", resources(16))],
        cohort="co",
        when_can_borrow=when_can_borrow,
    )
    lender = cluster_queue("lender", [("first", resources(16)), ("second", resources(0))], cohort="co")
    return state(TWO, rack("a"), rack("b"), queue, lender, cohort("co"), local_queue("q", "cq"))


def test_may_stop_search_takes_the_first_flavor_by_borrowing() -> None:
    d = judge(gang(2), borrowing_world(None), NONE)  # v1beta2's default whenCanBorrow: MayStopSearch
    assert (d.reason, d.pod_sets[0].flavor) == ("fits", "first")
    assert any("fits by borrowing" in w for w in d.warnings)


def test_try_next_flavor_prefers_a_flavor_without_borrowing() -> None:
    d = judge(gang(2), borrowing_world("TryNextFlavor"), NONE)
    assert (d.reason, d.pod_sets[0].flavor) == ("fits", "second")
    assert not any("borrowing" in w for w in d.warnings)


def test_never_fits_still_needs_every_flavor_to_fail_when_empty() -> None:
    d = judge(gang(5), two_flavors(), NONE)  # a rack holds 4 such pods in both flavors
    assert (d.allowed, d.reason) == (False, "never-fits")


def test_the_trackers_prediction_makes_the_same_choice() -> None:
    full = [busy(f"a-h{h}") for h in range(4)]
    world = two_flavors(*full)
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {"podSets": [{"name": "main", "count": 2, "template": gang(2)["spec"]["template"]}]},
    }
    found = assess(workload_view(workload, NO_DEFAULTS), "team", "q", world, NONE)
    assert found.fits_now and [p.flavor for p in found.pod_sets] == ["second"]
