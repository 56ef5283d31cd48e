"""Partial admission as Kueue searches it (issue 18.5): each count checked against quota and topology."""

from __future__ import annotations

from tests.webhook.conftest import policy
from tests.webhook.quota_world import (
    cluster_queue,
    flavors_and_topology,
    gang,
    hosts_now,
    judge,
    local_queue,
    rack,
    resources,
    state,
)
from webhook.state.cluster import ClusterState

NONE = policy([])


def queue_of(gpus: int) -> ClusterState:
    return state(
        flavors_and_topology({"gpu": "gpu"}),
        rack("gpu"),
        cluster_queue("cq", [("gpu", resources(gpus))]),
        local_queue("q", "cq"),
    )


def test_quota_limits_the_count_kueue_admits() -> None:
    # 8 pods x 4 GPUs = 32 > 31: Kueue's search settles on 7 (28 GPUs), placed 2, 2, 2, 1.
    d = judge(gang(8, gpus=4, minimum=7), queue_of(31), NONE)
    (v,) = d.pod_sets
    assert (d.allowed, d.reason, v.admitted) == (True, "fits", 7)
    assert sorted(hosts_now(d).values()) == [1, 2, 2, 2]
    assert any("Kueue admits 7 of 8 pods now" in w for w in d.warnings)


def test_the_search_finds_the_largest_count_the_quota_holds() -> None:
    # min 2 of 10: 7 x 4 = 28 <= 31, 8 x 4 = 32 > 31.
    d = judge(gang(10, gpus=4, minimum=2), queue_of(31), NONE)
    assert (d.reason, d.pod_sets[0].admitted) == ("fits", 7)


def test_the_full_count_when_the_quota_holds_it() -> None:
    d = judge(gang(8, gpus=4, minimum=7), queue_of(32), NONE)
    assert (d.reason, d.pod_sets[0].admitted) == ("fits", None)
    assert sorted(hosts_now(d).values()) == [2, 2, 2, 2]


def test_below_the_minimum_it_waits_or_is_denied_as_before() -> None:
    d = judge(gang(8, gpus=4, minimum=7), queue_of(27), NONE)  # 7 x 4 = 28 > 27, no cohort
    assert (d.allowed, d.reason) == (False, "over-quota")
