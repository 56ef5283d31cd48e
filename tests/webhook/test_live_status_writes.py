"""Kueue's status writes are no change of structure: a ClusterQueue's or LocalQueue's status
moves on every reservation and admission, and tasgate reads none of it, so it must not rebuild
the state (a rebuild per admission costs a whole state build at 50,000 nodes). A change of
what the state reads (the spec) still does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.quota_world import local_queue
from tests.webhook.test_quota_live import mirror_of, objects, published
from webhook.live.parsed import kept_of

STATUS = {
    "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}],
    "pendingWorkloads": 3,
    "reservingWorkloads": 1,
    "flavorsReservation": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "total": "8"}]}],
}


def status_write(obj: dict[str, Any], version: str) -> dict[str, Any]:
    written = copy.deepcopy(obj)
    written["status"] = STATUS
    written.setdefault("metadata", {})["resourceVersion"] = version
    return written


@pytest.mark.parametrize("kind", ["clusterqueues", "localqueues"])
async def test_a_status_write_rebuilds_nothing(kind: str) -> None:
    items = objects()
    mirror = mirror_of(items)
    before = await published(mirror)
    found = next(
        o for o in items if o["kind"] == {"clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}[kind]
    )
    mirror.apply(kind, "MODIFIED", status_write(found, "9001"))
    assert not mirror.structure_changed
    await mirror.publish_once()
    assert mirror.state is before


async def test_a_spec_change_still_rebuilds() -> None:
    items = objects()
    mirror = mirror_of(items)
    await published(mirror)
    queue = local_queue("q", "lender")  # the same LocalQueue, now pointing at another ClusterQueue
    mirror.apply("localqueues", "MODIFIED", status_write(queue, "9002"))
    assert mirror.structure_changed
    state = await published(mirror)
    assert state.local_queues[("team", "q")].cluster_queue == "lender"


def test_what_is_kept_drops_only_the_status_and_its_metadata() -> None:
    queue = status_write(local_queue("q", "cq"), "7")
    queue["metadata"]["labels"] = {"team": "a"}
    kept = kept_of("localqueues", queue)
    assert kept is not None and "status" not in kept
    assert kept["metadata"] == {"name": "q", "namespace": "team", "labels": {"team": "a"}}
    assert kept["spec"] == {"clusterQueue": "cq"}
    check = {"kind": "AdmissionCheck", "metadata": {"name": "c"}, "status": STATUS}
    assert kept_of("admissionchecks", check) == check  # its Active condition is read: kept whole


async def test_a_podgroup_written_rebuilds_nothing() -> None:
    """PodGroups are watched to know their CRD is served; each one the reconciler writes is not
    a change of the state."""
    mirror = mirror_of(objects())
    before = await published(mirror)
    meta = {"name": "g", "namespace": "team", "resourceVersion": "5"}
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta}
    mirror.apply("podgroups", "ADDED", group)
    assert not mirror.structure_changed
    await mirror.publish_once()
    assert mirror.state is before
