"""Quota as Kueue counts it (issue 18.1): admitted Workloads' usage, the cohort tree, its limits.

Each verdict is what Kueue v0.19.2's ``fitsResourceQuota`` on its resource nodes says, with the
numbers worked out by hand in the comments.
"""

from __future__ import annotations

from typing import Any

from tests.webhook.conftest import GPU, policy
from tests.webhook.quota_world import (
    admitted,
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
from webhook.decide.kueue.quota_text import waits_for_quota
from webhook.state.cluster import ClusterState
from webhook.state.kueue import parse_cluster_queue, parse_cohort
from webhook.state.quota_tree import QuotaTree, available, borrowing_height, potential_available
from webhook.state.quota_usage import quota_charge

NONE = policy([])
GPU_FR = ("gpu", GPU)


def world(*extra: dict[str, Any], gpus: int = 24, **cq: Any) -> ClusterState:
    return state(
        flavors_and_topology({"gpu": "gpu"}),
        rack("gpu"),
        cluster_queue("cq", [("gpu", resources(gpus))], **cq),
        local_queue("q", "cq"),
        *extra,
    )


def test_a_tight_queue_filled_then_asked_again_waits_with_kueues_words() -> None:
    # 24 GPUs nominal, 20 in use, 4 unused: 8 more are 4 more than that.
    used = admitted("first", "cq", {GPU: "20", "cpu": "4"}, "gpu")
    d = judge(gang(1), world(used), NONE)
    assert (d.allowed, d.reason) == (True, "waits")
    expected = 'Kueue: "insufficient unused quota for nvidia.com/gpu in flavor gpu, 4 more needed"'

    assert any(expected in w for w in d.warnings), d.warnings
    (v,) = d.pod_sets
    assert v.now is not None and v.now.fits and not v.fits_now  # the topology fits: quota holds it back


def test_the_same_request_fits_when_the_quota_is_free() -> None:
    used = admitted("first", "cq", {GPU: "16"}, "gpu")
    d = judge(gang(1), world(used), NONE)
    assert (d.allowed, d.reason, d.warnings) == (True, "fits", ())


def test_a_finished_workload_holds_no_quota() -> None:
    used = admitted("first", "cq", {GPU: "24"}, "gpu")
    used["status"]["conditions"].append({"type": "Finished", "status": "True"})
    assert quota_charge(used) is None
    assert judge(gang(1), world(used), NONE).reason == "fits"


def test_quota_in_use_never_turns_into_a_denial() -> None:
    # Over the whole nominal quota in use, and more asked than is free: a wait, not a denial.
    used = admitted("first", "cq", {GPU: "30"}, "gpu")
    d = judge(gang(3), world(used), NONE)
    assert (d.allowed, d.reason) == (True, "waits")


def cohort_world(lending: int | None = None, borrowing: int | None = None, used: int = 0) -> ClusterState:
    limits = {}
    if borrowing is not None:
        limits["borrowingLimit"] = {GPU: borrowing}
    lender_limits = {"lendingLimit": {GPU: lending}} if lending is not None else {}
    objects = [
        cluster_queue("cq", [("gpu", resources(8, **limits))], cohort="co"),
        cluster_queue("lender", [("gpu", resources(16, **lender_limits))], cohort="co"),
        cohort("co"),
    ]
    if used:
        objects.append(admitted("lent", "lender", {GPU: str(used)}, "gpu"))
    return state(flavors_and_topology({"gpu": "gpu"}), rack("gpu"), local_queue("q", "cq"), *objects)


def test_a_cohort_that_lends_admits_by_borrowing_and_says_so() -> None:
    # cq has 8, its cohort 8 + 16 = 24: 16 fits by borrowing 8 from "co".
    d = judge(gang(2), cohort_world(), NONE)
    assert (d.allowed, d.reason) == (True, "fits")
    assert any(
        'fits by borrowing from cohort "co"' in w
        and "uses 16 of its 8 nominal nvidia.com/gpu in flavor gpu" in w
        for w in d.warnings
    )


def test_a_lending_limit_stops_the_cohort_from_lending() -> None:
    # The lender keeps 16 - 4 = 12 local: the cohort holds 8 + 4 = 12, cq may take 12 at most.
    d = judge(gang(2), cohort_world(lending=4), NONE)
    assert (d.allowed, d.reason) == (True, "waits")  # in a cohort: never a denial
    assert any("> maximum capacity (12)" in w for w in d.warnings), d.warnings
    assert judge(gang(1), cohort_world(lending=4), NONE).reason == "fits"


def test_what_the_lender_uses_is_not_lent() -> None:
    # The lender uses 12 of its 16: 8 + 4 = 12 free in the cohort, 16 is 4 short.
    d = judge(gang(2), cohort_world(used=12), NONE)
    assert d.reason == "waits"
    assert any(
        "insufficient unused quota for nvidia.com/gpu in flavor gpu, 4 more needed" in w for w in d.warnings
    )


def test_a_borrowing_limit_caps_what_is_borrowed() -> None:
    d = judge(gang(2), cohort_world(borrowing=4), NONE)  # 8 + 4 = 12 < 16
    assert d.reason == "waits"
    assert any("> maximum capacity (12)" in w for w in d.warnings), d.warnings


def quota(nominal: int, borrowing: int | None = None, lending: int | None = None) -> list[dict[str, object]]:
    entry: dict[str, object] = {"name": GPU, "nominalQuota": str(nominal)}
    if borrowing is not None:
        entry["borrowingLimit"] = str(borrowing)
    if lending is not None:
        entry["lendingLimit"] = str(lending)
    return [{"coveredResources": [GPU], "flavors": [{"name": "gpu", "resources": [entry]}]}]


def test_resource_nodes_match_kueues_arithmetic_in_a_two_level_tree() -> None:
    # root (own 10) > team (lending 4 of its subtree) > a (6), b (4, lending 1); usage a 9, b 2.
    queues = {
        "a": parse_cluster_queue("a", {"cohortName": "team", "resourceGroups": quota(6)}),
        "b": parse_cluster_queue("b", {"cohortName": "team", "resourceGroups": quota(4, lending=1)}),
        "c": parse_cluster_queue("c", {"cohortName": "root", "resourceGroups": quota(2, borrowing=3)}),
    }
    cohorts = {
        "team": parse_cohort("team", {"parentName": "root", "resourceGroups": quota(0, lending=4)}),
        "root": parse_cohort("root", {"resourceGroups": quota(10)}),
    }
    tree = QuotaTree(queues, cohorts, {"a": {GPU_FR: 9}, "b": {GPU_FR: 2}})
    a, b, c = (tree.queue(n) for n in "abc")
    assert a is not None and b is not None and c is not None
    team, root = a.parent, c.parent
    assert team is not None and root is not None and team.parent is root
    # b keeps 4 - 1 = 3 local; team's subtree 6 + 1 = 7, of which 7 - 4 = 3 stays local.
    assert (b.local_quota(GPU_FR), team.subtree[GPU_FR], team.local_quota(GPU_FR)) == (3, 7, 3)
    # team's usage: a 9 (no local quota) + b max(0, 2 - 3) = 9; root: 10 + 4 + 2 = 16, usage 9 - 3 = 6.
    assert (team.usage[GPU_FR], root.subtree[GPU_FR], root.usage[GPU_FR]) == (9, 16, 6)
    # a: no local quota; team: local 3 - 9 -> 0 free locally, root 16 - 6 = 10.
    assert available(a, GPU_FR) == 10
    assert potential_available(a, GPU_FR) == 3 + 16
    # c borrows at most 3 above its 2: min(2 - 0 + 3, 16 - 6) = 5; potential min(2 + 3, 16).
    assert (available(c, GPU_FR), potential_available(c, GPU_FR)) == (5, 5)
    # a's 9 already exceeds its 6: any more borrows; team (height 1) cannot hold it, root can
    # (height 2: team below it is 1 high); c, under root directly, borrows at root's height too.
    assert borrowing_height(a, GPU_FR, 1) == 2
    assert borrowing_height(c, GPU_FR, 2) == 0 and borrowing_height(c, GPU_FR, 3) == 2


def test_an_implicit_cohort_pools_its_members_quota() -> None:
    queues = {
        "a": parse_cluster_queue("a", {"cohortName": "pool", "resourceGroups": quota(4)}),
        "b": parse_cluster_queue("b", {"cohortName": "pool", "resourceGroups": quota(4)}),
    }
    tree = QuotaTree(queues, {}, {"b": {GPU_FR: 3}})
    a = tree.queue("a")
    assert a is not None and a.parent is not None and a.parent.name == "pool"
    assert (available(a, GPU_FR), potential_available(a, GPU_FR)) == (5, 8)


def test_kueues_reasons_fit_an_admission_warning() -> None:
    # Every resource short in both flavors: six reasons, more than 256 characters of them.
    reasons = [
        f"insufficient unused quota for {r} in flavor f{i}, 9 more needed"
        for r in ("cpu", "memory", GPU)
        for i in (1, 2)
    ]
    text = waits_for_quota("workers", reasons)
    assert len(text) <= 256 and text.endswith(" more)") and sorted(reasons)[0] in text
    assert waits_for_quota("w", reasons[:1]) == f'PodSet "w" waits for quota in use (Kueue: "{reasons[0]}")'
