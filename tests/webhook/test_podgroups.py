"""PodGroups come from the object the API server stored, never from the review's body.

Anyone who reaches the webhook port can POST /validate; a forged review names a workload but
cannot choose what tasgate creates for it. The API server is faked at the Creator's one call.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import jsonpatch
import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient

from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.live.podgroups import Creator
from webhook.serve.app import _pod_groups_of, create_app
from webhook.serve.keys import PODGROUPS, Settings, StateSource

from .test_server import manifest, review

ClientFactory = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]


class FakeApiServer(Creator):
    """The Creator with its API calls answered from ``stored``; what it POSTs is kept."""

    def __init__(self, app: web.Application, stored: dict[str, dict[str, Any]]) -> None:
        self.results: list[str] = []
        super().__init__(None, self.results.append, _pod_groups_of(app))  # type: ignore[arg-type]
        self.stored = stored
        self.created: list[dict[str, Any]] = []

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        if method == "GET":
            return copy.deepcopy(self.stored[path.rsplit("/", 1)[-1]])
        if path.endswith("/podgroups"):
            self.created.append(body)
        return dict(body)


def job(pods: int) -> dict[str, Any]:
    obj = manifest("job-rack.yaml")
    obj["spec"]["parallelism"] = obj["spec"]["completions"] = pods
    return obj


async def mutated(client: TestClient[web.Request, web.Application], obj: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post("/mutate", data=orjson.dumps(review(obj)))
    answer = (await resp.json())["response"]
    assert answer["allowed"] is True
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(answer["patch"])))
    return patched


async def settle(creator: FakeApiServer) -> None:
    for _ in range(200):
        if creator.queue.empty() and (creator.created or creator.results):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


async def started(
    aiohttp_client: ClientFactory, stored: dict[str, dict[str, Any]]
) -> tuple[Any, FakeApiServer]:
    app = create_app(Settings(policy=load_policy("default")), lambda _: None, StateSource(sample_objects()))
    creator = FakeApiServer(app, stored)
    app[PODGROUPS] = creator
    workers: list[asyncio.Task[None]] = []

    async def stop(_: web.Application) -> None:
        for worker in workers:
            worker.cancel()

    app.on_cleanup.append(stop)
    client = await aiohttp_client(app)
    workers.append(asyncio.create_task(creator.run()))
    return client, creator


async def test_a_forged_review_creates_the_podgroup_of_the_stored_object(
    aiohttp_client: ClientFactory,
) -> None:
    stored: dict[str, dict[str, Any]] = {}
    client, creator = await started(aiohttp_client, stored)
    real = await mutated(client, job(4))
    real["metadata"]["uid"] = "uid-real"
    stored["resnet-rack"] = real
    forged = await mutated(client, job(2))  # the same Job, told to be a gang of 2
    resp = await client.post("/validate", data=orjson.dumps(review(forged, uid="forged")))
    assert (await resp.json())["response"]["allowed"] is True
    await settle(creator)
    (pod_group,) = creator.created
    assert pod_group["metadata"]["name"] == "resnet-rack"
    assert pod_group["spec"]["minMember"] == 4, "minMember of the stored Job, not of the forged body"
    assert pod_group["metadata"]["ownerReferences"][0]["uid"] == "uid-real"


async def test_a_stored_object_that_needs_no_podgroup_gets_none(aiohttp_client: ClientFactory) -> None:
    stored: dict[str, dict[str, Any]] = {}
    client, creator = await started(aiohttp_client, stored)
    single = job(1)
    single["metadata"]["uid"] = "uid-single"
    stored["resnet-rack"] = single  # one pod: the policy makes no gang of it
    forged = await mutated(client, job(4))
    resp = await client.post("/validate", data=orjson.dumps(review(forged, uid="forged")))
    assert (await resp.json())["response"]["allowed"] is True
    await settle(creator)
    assert creator.created == [] and creator.results == ["none-needed"]
