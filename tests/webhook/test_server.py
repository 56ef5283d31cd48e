"""The webhook server through aiohttp's test client: response shapes, bad input, timeouts."""

from __future__ import annotations

import asyncio
import base64
import copy
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook.test_decision import RACK_HOLDS
from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import deciding
from webhook.serve import handlers as server
from webhook.serve.app import create_app, create_metrics_app
from webhook.serve.keys import RUNTIME, STATE, Settings, StateSource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ClientFactory = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def review(
    obj: dict[str, Any] | None, operation: str = "CREATE", uid: str = "uid-1", **extra: Any
) -> dict[str, Any]:
    meta = (obj or {}).get("metadata", {})
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": (obj or {}).get("kind", "")},
        "resource": {"group": "", "version": "v1", "resource": "things"},
        "operation": operation,
        "namespace": meta.get("namespace", "default"),
        "name": meta.get("name", ""),
        "userInfo": {"username": "alice"},
        "object": obj,
        "dryRun": False,
        **extra,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class Harness:
    def __init__(self, settings: Settings | None = None, loaded: bool = True) -> None:
        self.audit: list[dict[str, Any]] = []
        source = StateSource(objects=sample_objects() if loaded else None, label="sample")
        self.app = create_app(settings or Settings(policy=load_policy("default")), self.audit.append, source)
        self.holder = self.app[STATE]


@pytest.fixture
def harness() -> Harness:
    return Harness()


@pytest.fixture
async def client(harness: Harness, aiohttp_client: ClientFactory) -> TestClient[web.Request, web.Application]:
    return await aiohttp_client(harness.app)


async def post(client: TestClient[web.Request, web.Application], path: str, body: Any) -> dict[str, Any]:
    resp = await client.post(path, data=orjson.dumps(body), headers={"Content-Type": "application/json"})
    assert resp.status == 200, await resp.text()
    data: dict[str, Any] = await resp.json()
    return data


async def through_both(
    client: TestClient[web.Request, web.Application], obj: dict[str, Any], **extra: Any
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One API request as the API server sends it: /mutate; if allowed, the patch applied, the UID
    and creation time set (as the registry does before validating admission), then /validate."""
    mutated = (await post(client, "/mutate", review(obj, uid="req-1", **extra)))["response"]
    if not mutated["allowed"]:
        return mutated, None
    patch = orjson.loads(base64.b64decode(mutated["patch"])) if "patch" in mutated else []
    stored = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
    stored["metadata"] |= {
        "uid": "0b7d9a5e-2f1c-4a8e-9d3b-6c5e4f3a2b1c",
        "creationTimestamp": "2026-12-01T12:00:00Z",
    }
    validated = (await post(client, "/validate", review(stored, uid="req-2", **extra)))["response"]
    return mutated, validated


async def test_mutate_fits_returns_patch_and_echoes_identity(
    client: TestClient[web.Request, web.Application],
) -> None:
    obj = manifest("lws-unannotated.yaml")
    answer = await post(client, "/mutate", review(obj, uid="abc-123"))
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "abc-123" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = orjson.loads(base64.b64decode(response["patch"]))
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
    notes = patched["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    assert notes["kueue.x-k8s.io/podset-required-topology"] == "cloud.provider.com/topology-rack"
    assert (response["auditAnnotations"]["decision"], response["auditAnnotations"]["reason"]) == (
        "allow",
        "fits",
    )


async def test_validate_never_returns_a_patch_and_says_a_missing_mutation(
    client: TestClient[web.Request, web.Application],
) -> None:
    """Judged as written (Kueue runs it so), allowed with a warning naming what is missing."""
    response = (await post(client, "/validate", review(manifest("lws-unannotated.yaml"))))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert any("mutation is missing" in w for w in response["warnings"])


async def test_validate_accepts_the_mutated_object(client: TestClient[web.Request, web.Application]) -> None:
    obj = manifest("lws-unannotated.yaml")
    mutated = (await post(client, "/mutate", review(obj)))["response"]
    patched = jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(mutated["patch"])))
    response = (await post(client, "/validate", review(patched)))["response"]
    assert response["allowed"] is True and "patch" not in response


async def test_never_fits_is_denied_with_numbers(client: TestClient[web.Request, web.Application]) -> None:
    response = (await post(client, "/mutate", review(manifest("jobset-never-fits.yaml"))))["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    held = f"the largest rack holds {RACK_HOLDS} such pods even when empty"  # counted from the sample
    assert held in response["status"]["message"]
    assert "patch" not in response


async def test_waiting_workload_is_admitted_with_a_short_warning(
    client: TestClient[web.Request, web.Application],
) -> None:
    response = (await post(client, "/mutate", review(manifest("pytorchjob-waits.yaml"))))["response"]
    assert response["allowed"] is True
    assert response["warnings"] and all(len(w) <= 120 for w in response["warnings"])
    assert "must wait" in response["warnings"][0]


async def test_invalid_object_is_denied_with_422(client: TestClient[web.Request, web.Application]) -> None:
    obj = manifest("job-rack.yaml")
    obj["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "2"
    response = (await post(client, "/mutate", review(obj)))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 422


@pytest.mark.parametrize(
    ("operation", "extra", "reason"),
    [
        ("DELETE", {}, "skipped-operation"),
        ("CONNECT", {}, "skipped-operation"),
        ("UPDATE", {"subResource": "status"}, "skipped-operation"),
    ],
)
async def test_operations_passed_untouched(
    harness: Harness,
    client: TestClient[web.Request, web.Application],
    operation: str,
    extra: dict[str, Any],
    reason: str,
) -> None:
    obj = manifest("jobset-never-fits.yaml")
    body = review(obj, operation, **extra)
    if operation == "UPDATE":
        body["request"]["oldObject"] = obj
    response = (await post(client, "/mutate", body))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert harness.audit[-1]["reason"] == reason


async def test_update_decided_only_when_placement_changes(
    harness: Harness,
    client: TestClient[web.Request, web.Application],
) -> None:
    old = manifest("jobset-never-fits.yaml")
    old["spec"]["suspend"] = True  # as Kueue's webhook leaves a queued JobSet
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"]["team"] = "ml"
    body = review(relabelled, "UPDATE", oldObject=old)
    assert (await post(client, "/mutate", body))["response"]["allowed"] is True
    assert harness.audit[-1]["reason"] == "unchanged"
    smaller = copy.deepcopy(old)
    smaller["spec"]["replicatedJobs"][0]["replicas"] = 1
    body = review(smaller, "UPDATE", oldObject=old)
    assert (await post(client, "/mutate", body))["response"]["allowed"] is True
    assert harness.audit[-1]["reason"] == "fits"


async def test_updates_of_admitted_or_running_workloads_are_kueues(
    harness: Harness,
    client: TestClient[web.Request, web.Application],
) -> None:
    """Kueue starts a queued workload by unsuspending it (and adds node selectors, scheduling
    gates, template annotations), stops it by suspending it again: never judged, even when the
    object would be refused on its own."""
    queued = manifest("jobset-never-fits.yaml")
    queued["spec"]["suspend"] = True
    started = copy.deepcopy(queued)
    started["spec"]["suspend"] = False
    template = started["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["spec"]["nodeSelector"] = {"pool": "gpu"}
    template["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    kueue = {"userInfo": {"username": "system:serviceaccount:kueue-system:kueue-controller-manager"}}
    for old, new in ((queued, started), (started, queued)):
        body = review(new, "UPDATE", oldObject=old, **kueue)
        response = (await post(client, "/mutate", body))["response"]
        assert response["allowed"] is True and "patch" not in response
        assert harness.audit[-1]["reason"] == "not-suspended"
    bigger = copy.deepcopy(started)
    bigger["spec"]["replicatedJobs"][0]["replicas"] = 99
    response = (await post(client, "/validate", review(bigger, "UPDATE", oldObject=started)))["response"]
    assert response["allowed"] is True and harness.audit[-1]["reason"] == "not-suspended"


@pytest.mark.parametrize(
    ("body", "status", "echoed"),
    [
        (b"not json", 400, None),
        (b"[1, 2]", 400, None),
        (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), 400, None),
        (
            orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}),
            400,
            None,
        ),
        (
            orjson.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1beta1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "u-9", "operation": "CREATE", "object": {}},
                }
            ),
            200,
            "u-9",
        ),
        (
            orjson.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "u-8", "operation": "CREATE"},
                }
            ),
            200,
            "u-8",
        ),
        (
            orjson.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "u-7", "operation": "PATCH", "object": {}},
                }
            ),
            200,
            "u-7",
        ),
    ],
)
async def test_malformed_reviews_get_a_clear_4xx(
    client: TestClient[web.Request, web.Application], body: bytes, status: int, echoed: str | None
) -> None:
    resp = await client.post("/mutate", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == status
    data = await resp.json()
    if echoed is None:
        assert "malformed AdmissionReview" in data["error"]
    else:
        assert data["response"]["uid"] == echoed
        assert data["response"]["allowed"] is False
        assert data["response"]["status"]["code"] == 400


async def test_object_that_is_not_an_object_is_denied_not_crashed(
    client: TestClient[web.Request, web.Application],
) -> None:
    body = review(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": "x"}}
    )
    response = (await post(client, "/mutate", body))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "parallelism" in response["status"]["message"]


async def test_bodies_above_the_limit_are_refused_with_413(
    client: TestClient[web.Request, web.Application],
) -> None:
    obj = manifest("job-rack.yaml")
    obj["metadata"]["annotations"] = {"padding": "x" * (7 * 1024 * 1024)}
    resp = await client.post(
        "/mutate", data=orjson.dumps(review(obj)), headers={"Content-Type": "application/json"}
    )
    assert resp.status == 413


async def test_bodies_just_under_the_limit_are_accepted(
    client: TestClient[web.Request, web.Application],
) -> None:
    obj = manifest("job-rack.yaml")
    obj["metadata"]["annotations"] = {"padding": "x" * (6 * 1024 * 1024)}
    response = (await post(client, "/mutate", review(obj)))["response"]
    assert response["allowed"] is True


async def test_unknown_workload_kind_is_allowed_untouched_and_said_so(
    client: TestClient[web.Request, web.Application],
) -> None:
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "TrainingThing",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    response = (await post(client, "/mutate", review(obj)))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert "does not know TrainingThing" in response["warnings"][0]


class HeldJudge:
    """A judge that decides only once released (or after ``hold`` seconds): a decision that
    overruns is a fault a real cluster cannot be made to produce on demand."""

    def __init__(self, hold: float = 10.0) -> None:
        self.hold = hold
        self.entered, self.released, self.returned = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, *args: Any) -> Outcome:
        self.entered.set()
        self.released.wait(self.hold)
        self.returned.set()
        return Outcome(True, Reason.FITS)


@pytest.mark.parametrize(("on_timeout", "allowed"), [("allow", True), ("deny", False)])
async def test_timeout_is_honoured_and_answered_per_policy(
    monkeypatch: pytest.MonkeyPatch, aiohttp_client: ClientFactory, on_timeout: str, allowed: bool
) -> None:
    """The decision gets the budget ``?timeout=1s`` allows (80 % of it, as the server computed
    it, not as a clock measured it) and is answered per ``--on-timeout`` while the judge still
    runs: it returns only when released, or after 10 s, twelve budgets on."""
    held = HeldJudge()
    monkeypatch.setattr(deciding, "judge", held)
    budgets: list[float] = []
    decide_held = server.decide_held

    async def spied(*args: Any) -> Outcome:
        budgets.append(args[5])
        return await decide_held(*args)

    monkeypatch.setattr(server, "decide_held", spied)
    h = Harness(Settings(policy=load_policy("default"), on_timeout=on_timeout))
    client = await aiohttp_client(h.app)
    try:
        resp = await client.post("/mutate?timeout=1s", data=orjson.dumps(review(manifest("job-rack.yaml"))))
        response = (await resp.json())["response"]
        assert held.entered.is_set() and not held.returned.is_set(), "answered while the judge runs"
    finally:
        held.released.set()
    assert budgets == [0.8], "the API server's 1 s, less the margin"
    assert response["allowed"] is allowed
    assert h.audit[-1]["reason"] == "unavailable"


@pytest.mark.parametrize("on_timeout", ["allow", "deny"])
async def test_an_exception_in_the_decision_is_answered_per_on_timeout(
    monkeypatch: pytest.MonkeyPatch,
    aiohttp_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
    on_timeout: str,
) -> None:
    def explode(*args: Any) -> Outcome:
        raise RuntimeError("boom")

    monkeypatch.setattr(deciding, "judge", explode)
    h = Harness(Settings(policy=load_policy("default"), on_timeout=on_timeout))
    client = await aiohttp_client(h.app)
    response = (await post(client, "/mutate", review(manifest("job-rack.yaml"), uid="u-500")))["response"]
    if on_timeout == "deny":
        assert response == {
            "uid": "u-500",
            "allowed": False,
            "status": {
                "code": 503,
                "message": "tasgate could not decide: tasgate failed to decide; see its log",
                "reason": "Invalid",
            },
        }
    else:
        assert response["uid"] == "u-500" and response["allowed"] is True
        assert response["warnings"] == [
            "tasgate did not check this workload: tasgate failed to decide; see its log"
        ]
    assert h.audit[-1]["reason"] == "internal-error"
    assert "uid=u-500" in caplog.text and "resnet-rack" in caplog.text


async def test_health_readiness_and_metrics(
    harness: Harness, client: TestClient[web.Request, web.Application], aiohttp_client: ClientFactory
) -> None:
    side = await aiohttp_client(create_metrics_app(harness.app))
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 200
    assert (await side.get("/healthz")).status == 200 and (await side.get("/readyz")).status == 200
    assert (await client.get("/metrics")).status == 404, "metrics only on the metrics port"
    await through_both(client, manifest("job-rack.yaml"))
    text = await (await side.get("/metrics")).text()
    assert 'tasgate_admission_decisions_total{cluster_queue="tas-cluster-queue"' in text
    assert "tasgate_decision_duration_seconds_bucket" in text and 'le="0.0001"' in text
    assert 'tasgate_scorer_duration_seconds_count{implementation="compiled"}' in text
    assert 'tasgate_topology_domains{flavor="tas-flavor",level="cloud.provider.com/topology-rack"' in text
    assert 'tasgate_largest_free_domain{flavor="tas-flavor",level="cloud.provider.com/topology-block"' in text
    assert "tasgate_cluster_snapshot_age_seconds" in text
    harness.app[RUNTIME].draining = True
    resp = await client.get("/readyz")
    assert resp.status == 503 and "draining" in await resp.text()
    resp = await side.get("/readyz")
    assert resp.status == 503 and "draining" in await resp.text()


async def test_not_ready_without_state_and_answers_per_policy(aiohttp_client: ClientFactory) -> None:
    h = Harness(loaded=False)
    client = await aiohttp_client(h.app)
    resp = await client.get("/readyz")
    assert resp.status == 503 and "cluster state not loaded" in await resp.text()
    response = (await post(client, "/mutate", review(manifest("job-rack.yaml"))))["response"]
    assert response["allowed"] is True and "did not check" in response["warnings"][0]


async def test_stale_state_turns_readiness_off(aiohttp_client: ClientFactory) -> None:
    h = Harness(Settings(policy=load_policy("default"), stale_after=0.05, on_timeout="deny"))
    client = await aiohttp_client(h.app)
    time.sleep(0.1)
    resp = await client.get("/readyz")
    assert resp.status == 503 and "old" in await resp.text()
    response = (await post(client, "/mutate", review(manifest("job-rack.yaml"))))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 503


AUDIT_KEYS = {
    "schema",
    "time",
    "uid",
    "objectUID",
    "endpoint",
    "operation",
    "user",
    "kind",
    "namespace",
    "name",
    "dryRun",
    "final",
    "allowed",
    "decision",
    "reason",
    "message",
    "warnings",
    "podSets",
    "topology",
    "queue",
    "clusterQueue",
    "generation",
    "latencyMicros",
}


async def test_audit_line_schema(harness: Harness, client: TestClient[web.Request, web.Application]) -> None:
    await post(client, "/mutate", review(manifest("jobset-never-fits.yaml"), uid="aud-1"))
    record = harness.audit[-1]
    assert set(record) == AUDIT_KEYS
    assert record["uid"] == "aud-1" and record["user"] == "alice" and record["decision"] == "deny"
    assert record["reason"] == "never-fits" and record["topology"] == "default" and record["generation"] == 1
    assert isinstance(record["latencyMicros"], int) and record["latencyMicros"] > 0
    (ps,) = record["podSets"]
    assert ps == {
        "name": "workers",
        "count": 8,
        "requests": "nvidia.com/gpu: 8",
        "mode": "required",
        "level": "cloud.provider.com/topology-rack",
        "injected": False,
        "fitsNow": False,
        "fitsWhenEmpty": False,
        "bestDomain": "b1/b1-r1",
    }
    orjson.dumps(record)  # one JSON line: everything in it serialises


async def test_metric_labels_come_from_bounded_sets(
    harness: Harness, client: TestClient[web.Request, web.Application], aiohttp_client: ClientFactory
) -> None:
    """200 reviews with 100 KB random kind, namespace and queue names leave /metrics small."""
    import secrets  # noqa: PLC0415

    side = await aiohttp_client(create_metrics_app(harness.app))
    before = len(await (await side.get("/metrics")).read())
    planted: list[str] = []
    for i in range(200):
        obj = manifest("job-rack.yaml")
        noise = [secrets.token_hex(50 * 1024) for _ in range(3)]  # 100 KB each
        planted.extend(n[:64] for n in noise)
        obj["metadata"]["namespace"] = noise[0]
        obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": noise[1]}
        body = review(obj, uid=f"noise-{i}")
        body["request"]["kind"]["kind"] = noise[2] if i % 2 else "Job"
        body["request"]["namespace"] = noise[0]
        for endpoint in ("/mutate", "/validate"):
            resp = await client.post(endpoint, data=orjson.dumps(body))
            assert resp.status == 200
    text = (await (await side.get("/metrics")).read()).decode()
    assert len(text) < before + 20_000, f"/metrics grew by {len(text) - before} bytes"
    assert not any(p in text for p in planted)
    assert 'namespace="other"' in text and 'kind="other"' in text
    await through_both(client, manifest("job-rack.yaml"))
    text = (await (await side.get("/metrics")).read()).decode()
    assert 'cluster_queue="tas-cluster-queue"' in text and 'namespace="default"' in text


def scale_review(name: str, replicas: int, resource: str = "pytorchjobs") -> dict[str, Any]:
    scale_obj = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas},
    }
    body = review(scale_obj, "UPDATE", subResource="scale", oldObject=dict(scale_obj, spec={"replicas": 1}))
    body["request"]["kind"] = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    body["request"]["resource"] = {"group": "kubeflow.org", "version": "v1", "resource": resource}
    body["request"]["name"] = name
    return body


@pytest.mark.parametrize(("on_timeout", "allowed"), [("allow", True), ("deny", False)])
async def test_scale_without_an_api_server_is_answered_per_on_timeout(
    aiohttp_client: ClientFactory, on_timeout: str, allowed: bool
) -> None:
    h = Harness(Settings(policy=load_policy("default"), on_timeout=on_timeout))
    client = await aiohttp_client(h.app)
    response = (await post(client, "/validate", scale_review("llama-finetune", 1000)))["response"]
    assert response["allowed"] is allowed and h.audit[-1]["reason"] == "unavailable"
    said = response["warnings"][0] if allowed else response["status"]["message"]
    assert "scale change can only be checked in live mode" in said


async def test_scale_is_judged_on_the_stored_parent_as_a_create(
    monkeypatch: pytest.MonkeyPatch, aiohttp_client: ClientFactory
) -> None:
    """The parent comes from the API server (faked at its one call); a running workload's scale
    is judged too: not-suspended does not apply to a count change through /scale."""
    from webhook.serve.keys import API  # noqa: PLC0415

    parent = manifest("pytorchjob-waits.yaml")
    parent["spec"].pop("runPolicy", None)
    paths: list[str] = []

    async def stored(api: object, path: str, timeout: float) -> dict[str, Any]:
        paths.append(path)
        return copy.deepcopy(parent)

    monkeypatch.setattr(server, "get_object", stored)
    h = Harness()
    h.app[API] = object()  # type: ignore[assignment]
    client = await aiohttp_client(h.app)
    name = parent["metadata"]["name"]
    for endpoint in ("/mutate", "/validate"):
        response = (await post(client, endpoint, scale_review(name, 1000)))["response"]
        assert response["allowed"] is False and "patch" not in response
        assert h.audit[-1]["reason"] in ("never-fits", "over-quota"), h.audit[-1]
        assert "1000" in response["status"]["message"] or "never" in response["status"]["message"]
    assert paths[0] == f"/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/{name}"
    response = (await post(client, "/mutate", scale_review(name, 1)))["response"]
    assert response["allowed"] is True and "patch" not in response, "never a patch for a Scale"
    unknown = (await post(client, "/validate", scale_review(name, 1000, "tfjobs")))["response"]
    assert unknown["allowed"] is True and h.audit[-1]["reason"] == "skipped-operation"


async def test_scale_judges_the_parent_as_written(
    monkeypatch: pytest.MonkeyPatch, aiohttp_client: ClientFactory
) -> None:
    """Nothing can be injected through a Scale and Kueue runs the parent as stored: a parent
    without what the policy would add now (made before tasgate, or before the policy asked)
    is judged as it is, never refused as a mutation that went missing."""
    from webhook.serve.keys import API  # noqa: PLC0415

    parent = manifest("pytorchjob-waits.yaml")

    async def stored(api: object, path: str, timeout: float) -> dict[str, Any]:
        return copy.deepcopy(parent)

    monkeypatch.setattr(server, "get_object", stored)
    h = Harness()
    h.app[API] = object()  # type: ignore[assignment]
    client = await aiohttp_client(h.app)
    for replicas in (1, 3):
        for endpoint in ("/mutate", "/validate"):
            response = await post(client, endpoint, scale_review(parent["metadata"]["name"], replicas))
            assert response["response"]["allowed"] is True, (replicas, endpoint, h.audit[-1])
            assert h.audit[-1]["reason"] != "mutation-missing" and "patch" not in response["response"]


async def test_policy_file_is_reloaded_on_change_and_a_broken_one_keeps_the_old(
    tmp_path: Path, aiohttp_client: ClientFactory
) -> None:
    import asyncio  # noqa: PLC0415

    from webhook.serve.app import create_metrics_app  # noqa: PLC0415
    from webhook.serve.keys import POLICY  # noqa: PLC0415

    shipped = (Path(__file__).resolve().parents[2] / "manifests" / "base" / "policy.yaml").read_text()
    path = tmp_path / "policy.yaml"
    path.write_text(shipped)
    settings = Settings(policy=load_policy(str(path)), policy_file=str(path), cert_poll_seconds=0.05)
    h = Harness(settings)
    client = await aiohttp_client(h.app)
    side = await aiohttp_client(create_metrics_app(h.app))
    assert "patch" in (await post(client, "/mutate", review(manifest("job-rack.yaml"))))["response"]

    async def until(check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 20  # generous: a poll every 0.05 s acts long before
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError("the policy poller never acted")
            await asyncio.sleep(0.02)

    quiet = yaml.safe_load(shipped)
    quiet["metadata"]["name"] = "quiet"
    for rule in quiet["spec"]["rules"]:
        rule["inject"], rule["gang"] = {"mode": "none"}, {"backend": "none"}
    path.write_text(yaml.safe_dump(quiet))
    await until(lambda: h.app[POLICY].current.name == "quiet")
    assert "patch" not in (await post(client, "/mutate", review(manifest("job-rack.yaml"))))["response"]
    path.write_text("spec: [this is not a policy")
    await until(lambda: h.app[POLICY].error is not None)
    assert h.app[POLICY].current.name == "quiet", "a broken policy keeps the one in force"
    text = await (await side.get("/metrics")).text()
    assert 'tasgate_policy_reloads_total{result="ok"} 1.0' in text
    assert 'tasgate_policy_reloads_total{result="error"} 1.0' in text
    assert "tasgate_policy_reload_error 1.0" in text


async def test_certificate_expiry_is_a_metric(tmp_path: Path, aiohttp_client: ClientFactory) -> None:
    from cryptography import x509  # noqa: PLC0415

    from webhook.serve import certs  # noqa: PLC0415
    from webhook.serve.app import create_metrics_app  # noqa: PLC0415
    from webhook.serve.tls import CertReloader, server_context  # noqa: PLC0415

    files = certs.generate(tmp_path, ["localhost"], days=30)
    reloader = CertReloader(server_context(files.cert, files.key), files.cert, files.key)
    app = create_app(Settings(policy=load_policy("default")), lambda _: None, StateSource(), reloader)
    side = await aiohttp_client(create_metrics_app(app))
    await aiohttp_client(app)
    expiry = x509.load_pem_x509_certificate(files.cert.read_bytes()).not_valid_after_utc.timestamp()
    text = await (await side.get("/metrics")).text()
    (line,) = [x for x in text.splitlines() if x.startswith("tasgate_certificate_expiry_timestamp_seconds ")]
    assert float(line.split()[1]) == pytest.approx(expiry)


async def test_cheap_reviews_do_not_queue_behind_expensive_ones(
    monkeypatch: pytest.MonkeyPatch, aiohttp_client: ClientFactory
) -> None:
    """Large bodies decide on a thread of their own: with four 1 MiB reviews being decided, their
    thread held by the first (a slow decision is a fault real clusters do not produce on demand,
    so the judge is held here until the test releases it), a small one is answered before any.
    The small one is sent once all four have reached the decision, not after a fixed pause."""
    real, held = deciding.judge, HeldJudge(hold=30.0)

    def judge(req: Any, *args: Any) -> Outcome:
        if req.name == "big":
            held()
        return real(req, *args)

    monkeypatch.setattr(deciding, "judge", judge)
    deciding_now: list[str] = []
    decide_held = server.decide_held

    async def counted(*args: Any) -> Outcome:
        deciding_now.append(args[2].uid)
        return await decide_held(*args)

    monkeypatch.setattr(server, "decide_held", counted)
    h = Harness(Settings(policy=load_policy("default"), decision_threads=4))
    client = await aiohttp_client(h.app)
    big = manifest("job-rack.yaml")
    big["metadata"]["name"] = "big"
    big["metadata"]["annotations"] = {"padding": "x" * (1024 * 1024)}
    slow = [
        asyncio.create_task(client.post("/mutate?timeout=30s", data=orjson.dumps(review(big, uid=f"b{i}"))))
        for i in range(4)
    ]
    try:
        async with asyncio.timeout(30):
            while not (held.entered.is_set() and len(deciding_now) == 4):  # all four being decided
                await asyncio.sleep(0.01)
            small = (await post(client, "/mutate?timeout=10s", review(manifest("job-rack.yaml"), uid="s")))[
                "response"
            ]
        # Decided (its patch: not a timeout's answer), while the large ones, one at a time on
        # their thread, are all still deciding.
        assert small["allowed"] is True and "patch" in small and not any(t.done() for t in slow)
    finally:
        held.released.set()
    for task in slow:
        assert (await task).status == 200
