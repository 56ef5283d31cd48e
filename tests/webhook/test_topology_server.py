"""`GET /topology` on the metrics port, the waiting gangs the decision path feeds it, and the
fragmentation gauges on /metrics — through the very app `tasgate serve` runs."""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook.conftest import node
from tests.webhook.test_server import ClientFactory, Harness, manifest, post, review
from webhook.decide.decision import decide
from webhook.decide.policy_text import parse_policy
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.files.sample import BLOCK, RACK, sample_objects
from webhook.live.tracker import Row
from webhook.serve import topology
from webhook.serve.app import create_app, create_metrics_app
from webhook.serve.brief import brief_of
from webhook.serve.keys import POLICY, STATE, WAITING, Settings, StateSource
from webhook.serve.lifecycle_metrics import LIFECYCLE
from webhook.serve.waiting import RecentWaiting

Client = TestClient[web.Request, web.Application]


def waits() -> dict[str, Any]:
    """The README's PyTorchJob: 15 x 8-GPU workers required in one block; the best block has room for 10."""
    return manifest("pytorchjob-waits.yaml")


async def clients(
    aiohttp_client: ClientFactory, harness: Harness | None = None
) -> tuple[Harness, Client, Client]:
    h = harness or Harness()
    return h, await aiohttp_client(h.app), await aiohttp_client(create_metrics_app(h.app))


async def test_topology_is_on_the_metrics_port_only(aiohttp_client: ClientFactory) -> None:
    _, main, side = await clients(aiohttp_client)
    assert (await main.get("/topology")).status == 404
    resp = await side.get("/topology")
    assert resp.status == 200 and resp.content_type == "text/html"
    page = await resp.text()
    assert page.count('class="domain"') == 2 + 8 + 32
    assert re.search(r'data-domain="b2" data-free="104" data-total="128"', page)
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


async def test_a_must_wait_verdict_shows_as_a_waiting_gang(aiohttp_client: ClientFactory) -> None:
    _, main, side = await clients(aiohttp_client)
    assert "Waiting gangs</h3><p>None." in await (await side.get("/topology")).text()
    answer = await post(main, "/mutate", review(waits()))
    assert answer["response"]["auditAnnotations"]["reason"] == "waits"
    page = await (await side.get("/topology")).text()
    assert "PyTorchJob default/llama-finetune" in page
    assert "<td>the best block has room for 10 of 15 pods now (5 short)</td><td>b2</td>" in page
    assert re.search(r'data-domain="b2"[^>]*>\s*<title>[^<]*</title>\s*<rect[^>]*stroke="#7b2cbf"', page)
    assert not re.search(r'data-domain="b1"[^>]*>\s*<title>[^<]*</title>\s*<rect[^>]*stroke="#7b2cbf"', page)
    text = await (await side.get("/topology", params={"format": "text"})).text()
    assert "waiting W1 PyTorchJob default/llama-finetune worker: 15 x 8 GPU required block" in text
    assert "tie: on an empty cluster Kueue's order picks b1" in text


async def test_the_live_page_reloads_and_says_its_generation_and_time(aiohttp_client: ClientFactory) -> None:
    h, _, side = await clients(aiohttp_client)
    state = h.app[STATE].current
    assert state is not None
    page = await (await side.get("/topology")).text()
    assert f'<meta http-equiv="refresh" content="{topology.REFRESH_SECONDS}">' in page
    stamp = rf"state generation {state.generation} · rendered \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert re.search(stamp + " · reloads every 30 s<", page)
    text = await (await side.get("/topology", params={"format": "text"})).text()
    assert re.match(stamp, text), "the text's first line is the stamp"


async def test_dry_runs_and_validate_do_not_feed_the_list_and_a_fit_removes_the_gang(
    aiohttp_client: ClientFactory,
) -> None:
    h, main, _ = await clients(aiohttp_client)
    await post(main, "/mutate", review(waits(), dryRun=True))
    await post(main, "/validate", review(waits()))
    assert h.app[WAITING].current() == ()
    await post(main, "/mutate", review(waits()))
    assert [g.name for g in h.app[WAITING].current()] == ["llama-finetune"]
    smaller = copy.deepcopy(waits())
    smaller["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    assert (await post(main, "/mutate", review(smaller)))["response"]["auditAnnotations"]["reason"] == "fits"
    assert h.app[WAITING].current() == ()


def test_the_waiting_list_is_bounded_and_ages_out() -> None:
    state = Harness().holder.current
    assert state is not None
    policy = load_policy("default")
    recent = RecentWaiting(limit=3)
    for i in range(5):
        obj = waits()
        obj["metadata"]["name"] = f"gang-{i}"
        recent.note(brief_of(decide(Review(obj, namespace="default"), state, policy), policy.gpu_resources))
    assert [g.name for g in recent.current()] == ["gang-2", "gang-3", "gang-4"]
    recent.max_age = 0.0
    assert recent.current() == ()


def test_only_a_mutate_brief_carries_the_waiting_gang() -> None:
    """/validate's brief is never noted (serve.waiting), so it leaves the gang out; all else equal."""
    state, policy = Harness().holder.current, load_policy("default")
    assert state is not None
    decision = decide(Review(waits(), namespace="default"), state, policy)
    mutating, validating = (brief_of(decision, policy.gpu_resources, m) for m in (True, False))
    assert mutating is not None and mutating.waiting is not None and mutating.waiting.name == "llama-finetune"
    assert validating == dataclasses.replace(mutating, waiting=None)


async def test_a_gang_the_tracker_sees_admitted_leaves_the_waiting_list(
    aiohttp_client: ClientFactory,
) -> None:
    """Kueue's start UPDATE no longer reaches tasgate (matchConditions): the tracker says it started."""
    h = Harness()
    _, main, side = await clients(aiohttp_client, h)
    assert (await post(main, "/mutate", review(waits())))["response"]["auditAnnotations"]["reason"] == "waits"
    (gang,) = h.app[WAITING].current()
    row = Row(gang.namespace, gang.name, "uid", "wl", "cq", "waiting_topology", 1.0)
    h.app[LIFECYCLE].follow(lambda: [row], dict)
    assert gang.name in await (await side.get("/topology", params={"format": "text"})).text()
    h.app[LIFECYCLE].follow(lambda: [dataclasses.replace(row, state="assembling")], dict)
    assert gang.name not in await (await side.get("/topology", params={"format": "text"})).text()
    assert h.app[WAITING].current() == ()


async def test_bad_format_and_no_state(aiohttp_client: ClientFactory) -> None:
    _, _, side = await clients(aiohttp_client)
    resp = await side.get("/topology", params={"format": "pdf"})
    assert resp.status == 400 and "format must be one of html, text" in await resp.text()
    _, _, unloaded = await clients(aiohttp_client, Harness(loaded=False))
    resp = await unloaded.get("/topology")
    assert resp.status == 503 and "not loaded" in await resp.text()


async def test_names_from_the_cluster_are_escaped(aiohttp_client: ClientFactory) -> None:
    objects = [o for o in sample_objects() if o["kind"] != "Node"]
    hostile = '<img src=x onerror="alert(1)">&'
    objects.append(node("evil", {BLOCK: hostile, RACK: "r<1>", "cloud.provider.com/node-group": "tas-group"}))
    h = Harness()
    h.app = create_app(Settings(policy=load_policy("default")), [].append, StateSource(objects=objects))
    _, _, side = await clients(aiohttp_client, h)
    page = await (await side.get("/topology")).text()
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in page
    assert "r&lt;1&gt;" in page
    text = await (await side.get("/topology", params={"format": "text"})).text()
    assert hostile in text, "plain text is plain (text/plain)"


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in /metrics")


async def test_fragmentation_gauges(aiohttp_client: ClientFactory) -> None:
    h, _, side = await clients(aiohttp_client)
    text = await (await side.get("/metrics")).text()
    flavor = {"topology": "default", "flavor": "tas-flavor"}
    assert metric(text, "tasgate_domain_free_accelerators", **flavor, level=BLOCK, domain="b2") == 104
    assert metric(text, "tasgate_domain_free_accelerators", **flavor, level=RACK, domain="b2,b2-r1") == 24
    assert 'tasgate_domain_free_accelerators{domain="b1,b1-r1,b1-r1-h1"' not in text, "no hostname level"
    # b2-r4-h3 and -h4 are away in the sample (NotReady / cordoned): 16 GPUs lost to its rack and block.
    assert metric(text, "tasgate_domain_unavailable_accelerators", **flavor, level=BLOCK, domain="b2") == 16
    assert (
        metric(text, "tasgate_domain_unavailable_accelerators", **flavor, level=RACK, domain="b2,b2-r4") == 16
    )
    assert metric(text, "tasgate_domain_unavailable_accelerators", **flavor, level=BLOCK, domain="b1") == 0
    assert metric(text, "tasgate_gang_shape_fits", **flavor, level=BLOCK, shape="8x8") == 1
    assert metric(text, "tasgate_gang_shape_domains", **flavor, level=BLOCK, shape="8x8") == 2
    assert metric(text, "tasgate_gang_shape_fits", **flavor, level=BLOCK, shape="32x8") == 0
    assert metric(text, "tasgate_gang_shape_fits", **flavor, level=RACK, shape="8x8") == 0
    assert (
        metric(text, "tasgate_largest_free_domain", **flavor, level=BLOCK, resource="nvidia.com/gpu") == 104
    )
    # The policy in force names the shapes: a reloaded policy changes them at the next scrape.
    head = "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\n"
    h.app[POLICY].current = parse_policy(head + "spec: {gangShapes: [{pods: 4, gpusPerPod: 8}]}\n", "p")
    text = await (await side.get("/metrics")).text()
    assert 'shape="8x8"' not in text
    assert metric(text, "tasgate_gang_shape_domains", **flavor, level=RACK, shape="4x8") == 4


@pytest.mark.parametrize("fmt", ["html", "text"])
async def test_the_page_is_rendered_once_per_state_and_waiting_list(
    aiohttp_client: ClientFactory, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = topology.cluster_figures

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(topology, "cluster_figures", counted)
    _, main, side = await clients(aiohttp_client)
    for _ in range(3):
        assert (await side.get("/topology", params={"format": fmt})).status == 200
    assert len(calls) == 1
    await post(main, "/mutate", review(waits()))
    await side.get("/topology", params={"format": fmt})
    assert len(calls) == 2
