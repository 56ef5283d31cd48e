"""Live mode counts quota as a dump does (issue 18.1): Workload events charge and release their
ClusterQueue, Cohort objects come and go, and ``serve`` then decides as ``check`` on the same objects."""

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
from tests.webhook.test_live import synced_mirror
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.state.cluster import ClusterState

NONE = policy([])
KINDS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}
KINDS |= {"LocalQueue": "localqueues", "Cohort": "cohorts", "Node": "nodes", "Workload": "workloads"}


def objects() -> list[dict[str, Any]]:
    return [
        *flavors_and_topology({"gpu": "gpu"}),
        *rack("gpu"),
        cluster_queue("cq", [("gpu", resources(8))], cohort="co"),
        cluster_queue("lender", [("gpu", resources(16))], cohort="co"),
        local_queue("q", "cq"),
    ]


def mirror_of(items: list[dict[str, Any]]) -> Mirror:
    mirror = synced_mirror()
    for kind in set(KINDS.values()):
        mirror.replace(kind, [o for o in items if KINDS[o["kind"]] == kind])
    return mirror


async def published(mirror: Mirror) -> ClusterState:
    await mirror.publish_once()
    assert mirror.state is not None
    return mirror.state


def test_cohorts_are_watched() -> None:
    assert any(k.name == "cohorts" and k.kind == "Cohort" and k.optional for k in kinds())


async def test_workload_events_charge_and_release_quota_as_a_dump_does() -> None:
    mirror = mirror_of(objects())
    lent = admitted("lent", "lender", {GPU: "12"}, "gpu")
    assert judge(gang(2), await published(mirror), NONE).reason == "fits"  # 8 + 16 free
    mirror.apply("workloads", "ADDED", lent)
    live = await published(mirror)
    offline = state(objects(), lent)
    assert live.charges == offline.charges
    for world in (live, offline):  # 8 + 4 free: 16 is 4 short
        assert judge(gang(2), world, NONE).reason == "waits"
    mirror.apply("workloads", "DELETED", lent)
    assert judge(gang(2), await published(mirror), NONE).reason == "fits"


async def test_a_cohort_object_changes_what_is_lent() -> None:
    # A Cohort "co" with a parent that holds 16 more: 8 + 16 + 16 free in the tree.
    mirror = mirror_of(objects())
    assert judge(gang(4), await published(mirror), NONE).reason == "waits"
    mirror.apply("cohorts", "ADDED", cohort("co", parent="top"))
    mirror.apply("cohorts", "ADDED", cohort("top", flavors=[("gpu", resources(16))]))
    assert judge(gang(4), await published(mirror), NONE).reason == "fits"
