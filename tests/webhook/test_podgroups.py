"""PodGroups come from the object the API server stored, never from the review's body.

Anyone who reaches the webhook port can POST /validate; a forged review names a workload but
cannot choose what tasgate creates for it. The app is the one production runs (static sample
state); the API server is the in-process fake (``fakeapi``), so the writer GETs the stored Job
and POSTs the PodGroup over HTTP.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import jsonpatch
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.live.reconcile import Reconciler
from webhook.serve.app import create_app
from webhook.serve.keys import PODGROUPS, Settings, StateSource
from webhook.serve.live_tasks import _pod_groups_of

from .fakeapi import FakeApi
from .test_server import manifest, review

ClientFactory = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]
JOBS = "/apis/batch/v1/namespaces/default/jobs"
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
JOB_RESOURCE = {"group": "batch", "version": "v1", "resource": "jobs"}


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


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


async def started(
    aiohttp_client: ClientFactory, fake: FakeApi
) -> tuple[TestClient[web.Request, web.Application], list[str]]:
    """The served app with the PodGroup writer the validating review hands its hint to."""
    app = create_app(Settings(policy=load_policy("default")), lambda _: None, StateSource(sample_objects()))
    results: list[str] = []
    api = fake.client()
    writer = Reconciler(api, _pod_groups_of(app), results.append)
    app[PODGROUPS] = writer
    workers: list[asyncio.Task[None]] = []

    async def stop(_: web.Application) -> None:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await api.close()

    app.on_cleanup.append(stop)
    client = await aiohttp_client(app)
    workers.append(asyncio.create_task(writer.run()))
    return client, results


async def settled(results: list[str]) -> None:
    for _ in range(300):
        if results:
            return
        await asyncio.sleep(0.01)


async def test_a_forged_review_creates_the_podgroup_of_the_stored_object(
    aiohttp_client: ClientFactory, fake: FakeApi
) -> None:
    client, results = await started(aiohttp_client, fake)
    real = fake.put(JOBS, await mutated(client, job(4)))
    forged = await mutated(client, job(2))  # the same Job, told to be a gang of 2
    body = review(forged, uid="forged", resource=JOB_RESOURCE)
    resp = await client.post("/validate", data=orjson.dumps(body))
    assert (await resp.json())["response"]["allowed"] is True
    await settled(results)
    assert results == ["created"]
    pod_group = fake.get(f"{GROUPS}/resnet-rack")
    assert pod_group is not None
    assert pod_group["spec"]["minMember"] == 4, "minMember of the stored Job, not of the forged body"
    assert pod_group["metadata"]["ownerReferences"][0]["uid"] == real["metadata"]["uid"]


async def test_a_stored_object_that_needs_no_podgroup_gets_none(
    aiohttp_client: ClientFactory, fake: FakeApi
) -> None:
    client, results = await started(aiohttp_client, fake)
    fake.put(JOBS, job(1))  # one pod: the policy makes no gang of it
    forged = await mutated(client, job(4))
    resp = await client.post(
        "/validate", data=orjson.dumps(review(forged, uid="forged", resource=JOB_RESOURCE))
    )
    assert (await resp.json())["response"]["allowed"] is True
    await settled(results)
    assert fake.posts("/podgroups") == [] and results == ["none-needed"]
