"""Request metrics an operator can join with Kueue's: one count per decision, dry runs apart,
Kueue's label names, and an audit line that carries the workload's UID."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook.test_server import (
    ClientFactory,
    Harness,
    manifest,
    post,
    review,
    through_both,
)
from webhook.serve.keys import METRICS

ROOT = Path(__file__).resolve().parents[2]
Client = TestClient[web.Request, web.Application]
STORED_UID = "0b7d9a5e-2f1c-4a8e-9d3b-6c5e4f3a2b1c"  # what through_both stores, as the API server would


@pytest.fixture
def served() -> Harness:
    """The webhook app on the sample cluster, with its audit lines kept (test_server's Harness)."""
    return Harness()


@pytest.fixture
async def api(served: Harness, aiohttp_client: ClientFactory) -> Client:
    return await aiohttp_client(served.app)


def sample(served: Harness, metric: str, /, **labels: str) -> float:
    """The sum of every series of ``metric`` whose labels include ``labels`` (0 when none)."""
    total = 0.0
    for family in served.app[METRICS].registry.collect():
        for s in family.samples:
            if s.name == metric and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


async def test_a_request_through_both_endpoints_is_one_decision(served: Harness, api: Client) -> None:
    mutated, validated = await through_both(api, manifest("job-rack.yaml"))
    assert mutated["allowed"] and validated is not None and validated["allowed"]
    assert sample(served, "tasgate_admission_decisions_total") == 1
    assert sample(served, "tasgate_admission_decisions_total", decision="allow", reason="fits") == 1
    assert sample(served, "tasgate_local_queue_admission_decisions_total") == 1
    # per endpoint: both calls are still there, each with its latency
    for endpoint in ("mutate", "validate"):
        assert sample(served, "tasgate_admission_requests_total", endpoint=endpoint) == 1
        assert sample(served, "tasgate_decision_duration_seconds_count", endpoint=endpoint) == 1


async def test_a_denial_at_mutate_is_the_decision(served: Harness, api: Client) -> None:
    mutated, validated = await through_both(api, manifest("jobset-never-fits.yaml"))
    assert not mutated["allowed"] and validated is None, "the API server stops at a denial"
    assert sample(served, "tasgate_admission_decisions_total", decision="deny", reason="never-fits") == 1
    assert sample(served, "tasgate_admission_decisions_total") == 1


async def test_a_mutation_missing_at_validate_is_one_decision(served: Harness, api: Client) -> None:
    """A mutate allow followed by a validate that finds the patch dropped is one decision, counted
    with the validate's reason (judged as written: allowed, and said)."""
    obj = manifest("lws-unannotated.yaml")
    assert (await post(api, "/mutate", review(obj)))["response"]["allowed"]
    assert (await post(api, "/validate", review(obj)))["response"]["allowed"]  # patch dropped
    assert sample(served, "tasgate_admission_decisions_total") == 1
    assert sample(served, "tasgate_admission_decisions_total", reason="mutation-missing") == 1


async def test_dry_runs_are_not_admissions(served: Harness, api: Client) -> None:
    await through_both(api, manifest("job-rack.yaml"), dryRun=True)
    assert sample(served, "tasgate_admission_decisions_total") == 0
    assert sample(served, "tasgate_local_queue_admission_decisions_total") == 0
    assert sample(served, "tasgate_dry_run_decisions_total", decision="allow") == 1
    assert sample(served, "tasgate_admission_requests_total", dry_run="true") == 2


async def test_queues_are_labelled_as_kueue_labels_them(served: Harness, api: Client) -> None:
    """cluster_queue as Kueue's ClusterQueue metrics; a LocalQueue as name + namespace, as
    kueue_local_queue_* metrics, so `on(name, namespace)` joins the two."""
    await through_both(api, manifest("job-rack.yaml"))
    assert sample(served, "tasgate_admission_decisions_total", cluster_queue="tas-cluster-queue") == 1
    lq = sample(
        served, "tasgate_local_queue_admission_decisions_total", name="tas-user-queue", namespace="default"
    )
    assert lq == 1
    for family in served.app[METRICS].registry.collect():
        for s in family.samples:
            assert "local_queue" not in s.labels, f"{s.name}: LocalQueue is name + namespace, as Kueue's"


async def test_a_workload_without_a_queue_has_an_empty_queue_name(served: Harness, api: Client) -> None:
    obj = manifest("job-rack.yaml")
    del obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    await through_both(api, obj)
    assert sample(served, "tasgate_local_queue_admission_decisions_total", name="", namespace="default") == 1


async def test_the_final_audit_line_carries_the_workloads_uid(served: Harness, api: Client) -> None:
    """At /mutate a CREATE has no UID yet; /validate sees the stored form and is the final line:
    its objectUID is what Kueue's Workload carries as kueue.x-k8s.io/job-uid."""
    await through_both(api, manifest("job-rack.yaml"))
    at_mutate, at_validate = served.audit[-2:]
    assert (at_mutate["endpoint"], at_mutate["final"], at_mutate["objectUID"]) == ("mutate", False, None)
    assert (at_validate["endpoint"], at_validate["final"], at_validate["objectUID"]) == (
        "validate",
        True,
        STORED_UID,
    )


async def test_an_update_carries_the_uid_and_a_bad_uid_is_dropped(served: Harness, api: Client) -> None:
    obj = manifest("job-rack.yaml")
    obj["metadata"]["uid"] = STORED_UID
    await post(api, "/validate", review(obj, operation="UPDATE", oldObject=obj))
    assert served.audit[-1]["objectUID"] == STORED_UID
    obj["metadata"]["uid"] = {"not": "a string"}
    await post(api, "/validate", review(obj, operation="UPDATE", oldObject=obj))
    assert served.audit[-1]["objectUID"] is None
    obj["metadata"]["uid"] = "x" * 100_000
    await post(api, "/validate", review(obj, operation="UPDATE", oldObject=obj))
    assert len(served.audit[-1]["objectUID"]) == 128


def test_both_webhooks_see_the_same_requests() -> None:
    """Counting a decision once (at /validate, or a /mutate denial) holds when every request that
    reaches /mutate also reaches /validate: the two configurations must match the same requests."""
    docs = list(yaml.safe_load_all((ROOT / "manifests" / "webhooks" / "webhooks.yaml").read_text()))
    mutate, validate = (doc["webhooks"][0] for doc in docs)
    for key in ("rules", "namespaceSelector", "matchConditions", "sideEffects"):
        assert mutate[key] == validate[key], key
    assert mutate["clientConfig"]["service"]["path"] == "/mutate"
    assert validate["clientConfig"]["service"]["path"] == "/validate"
