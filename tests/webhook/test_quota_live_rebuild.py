"""A quota charge that lands while a rebuild runs off the event loop is published: the review
says what the same world without the rebuild says (`test_quota_live`), and the state never
reads as caught up while it lacks the charge. A rebuild took the charges as they were when it
began, and no ledger journals a charge."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.webhook.held_rebuild import holding
from tests.webhook.quota_world import admitted, gang, judge, local_queue, rack, state
from tests.webhook.test_quota_live import NONE, mirror_of, objects, published
from webhook.live.mirror import Mirror
from webhook.live.publisher import Publisher

GPU = "nvidia.com/gpu"


def node_edit(mirror: Mirror) -> list[dict[str, Any]]:
    """A node change placement reads (a label): the kept snapshots are edited off the loop."""
    edited = rack("gpu")[0]
    edited["metadata"]["labels"]["zone"] = "z1"
    mirror.apply("nodes", "MODIFIED", edited)
    return [edited]


def kueue_change(mirror: Mirror) -> list[dict[str, Any]]:
    """A Kueue object change: the state and every snapshot are rebuilt off the loop."""
    queue = local_queue("other", "cq")
    mirror.apply("localqueues", "ADDED", queue)
    return [queue]


@pytest.mark.parametrize("change", [kueue_change, node_edit])
async def test_a_charge_during_a_rebuild_is_published_and_the_gang_waits(change: Any) -> None:
    mirror = mirror_of(objects())
    assert judge(gang(2), await published(mirror), NONE).reason == "fits"  # 8 + 16 free
    lent = admitted("lent", "lender", {GPU: "12"}, "gpu")
    with holding() as held:
        changed = change(mirror)
        await held.begin(mirror)
        mirror.apply("workloads", "ADDED", lent)  # the charge lands while the rebuild runs
        await held.finish()
    assert mirror.dirty.is_set()
    await mirror.publish_once()  # what the publisher does next: nothing left to publish
    live = mirror.state
    assert live is not None and mirror.pending_since is None, "caught up"
    offline = state(objects(), changed, lent)
    for world in (live, offline):  # 8 + 4 free: 16 is 4 short
        assert judge(gang(2), world, NONE).reason == "waits"
    assert live.charges == offline.charges


class GatedPublisher(Publisher):
    """A publisher whose publish waits for the test: a change can land in the middle of it."""

    def __init__(self) -> None:
        super().__init__(["pods"])
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def _publish(self) -> bool:
        self.entered.set()
        await self.gate.wait()
        return True


async def test_a_change_during_a_publish_that_began_caught_up_stays_pending() -> None:
    publisher = GatedPublisher()
    assert publisher.pending_since is None  # as after a publish that caught up
    publishing = asyncio.create_task(publisher.publish_once())  # a retry, say: nothing pending
    await publisher.entered.wait()
    publisher._changed()  # lands after the publish took its copy
    publisher.gate.set()
    await publishing
    assert publisher.pending_since is not None, "the published state may lack that change"
