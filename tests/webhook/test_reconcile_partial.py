"""PodGroups of gangs Kueue admits partially, sized to its admission (``live.reconcile_admission``).

The reconciler runs with its real watches (kubernetes-asyncio, ``watch.run_kind``) on the
in-process fake API server, here with the JSON merge patches the reconciler sends; ``compute``
is the real decision path with the default policy (a Coscheduling gang) on the world of
tests/e2e_cluster/test_partial_admission.py: one rack of three 8-GPU hosts. The Workload, Job
and PodGroup are as Kueue v0.19.2, the Job controller and tasgate left them in that test
(tests/webhook/manifests/partial/: the Workload admitted with 3 of its 4 pods); the states
before the admission are those objects with what the admission wrote taken out.
"""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web

import webhook
from e2e.kueue_scenario import BLOCK, NODE_POOL, RACK, queue_objects
from webhook.decide.decision import decide
from webhook.decide.policy_text import parse_policy
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.live.reconcile import Intent, PodGroups, Reconciler
from webhook.live.reconcile_admission import Elastic, parse_workload, repair_patch
from webhook.live.reconcile_view import OwnerRef, Target
from webhook.state.cluster import build_state

from .conftest import GPU, node
from .fakeapi import FakeApi
from .test_reconcile import Running, settled, until

NS = "gangs"
PARTIAL = Path(__file__).parent / "manifests" / "partial"
COSCHEDULING, VOLCANO = "scheduling.x-k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1"
PATHS = {
    COSCHEDULING: f"/apis/{COSCHEDULING}/namespaces/{NS}/podgroups",
    VOLCANO: f"/apis/{VOLCANO}/namespaces/{NS}/podgroups",
}
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
VOLCANO_GROUP, COSCHEDULING_LABEL = "scheduling.k8s.io/group-name", "scheduling.x-k8s.io/pod-group"
HOSTS = ("n0", "n1", "n2")
STATE = build_state([
    *queue_objects(NS),
    *(node(h, {**NODE_POOL, BLOCK: "b0", RACK: "b0-r0"}, cpu="16", memory="64Gi") for h in HOSTS),
])  # fmt: skip


def captured(name: str) -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((PARTIAL / f"{name}.yaml").read_text())
    return found


def admitted_workload(api_version: str = COSCHEDULING) -> dict[str, Any]:
    """The Workload Kueue admitted with 3 of its 4 pods (a Volcano gang's template annotated)."""
    workload = captured("workload")
    if api_version == VOLCANO:
        meta = workload["spec"]["podSets"][0]["template"]["metadata"]
        meta.setdefault("annotations", {})[VOLCANO_GROUP] = meta["labels"].pop(
            "scheduling.x-k8s.io/pod-group"
        )
    return workload


def created_workload(api_version: str = COSCHEDULING) -> dict[str, Any]:
    """The Workload as Kueue creates it, before its scheduler writes any status."""
    workload = admitted_workload(api_version)
    del workload["status"]
    return workload


def submitted_job(api_version: str = COSCHEDULING) -> dict[str, Any]:
    """The Job before the admission: its 4 pods, suspended, without what Kueue's start wrote."""
    job = captured("job")
    job["spec"].update(parallelism=4, suspend=True)
    job.pop("status", None)
    template = job["spec"]["template"]
    del template["metadata"]["annotations"]["kueue.x-k8s.io/workload"]
    for label in ("cluster-queue-name", "local-queue-name", "podset"):
        del template["metadata"]["labels"][f"kueue.x-k8s.io/{label}"]
    del template["spec"]["nodeSelector"], template["spec"]["schedulingGates"]
    if api_version == VOLCANO:
        meta = job["spec"]["template"]["metadata"]
        meta.setdefault("annotations", {})[VOLCANO_GROUP] = meta["labels"].pop(
            "scheduling.x-k8s.io/pod-group"
        )
    return job


def earlier_pod_group(api_version: str = COSCHEDULING) -> dict[str, Any]:
    """The PodGroup an earlier tasgate wrote before the admission: every pod, no minimum marked."""
    group = captured("podgroup")
    group["apiVersion"] = api_version
    group["spec"].update(minMember=4, minResources={"cpu": "4", GPU: "32"})
    group["metadata"].pop("annotations", None)
    group.pop("status", None)
    return group


class MergingApi(FakeApi):
    """The fake API server, answering JSON merge patches (RFC 7386) too; each one is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.patches: list[tuple[str, str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "PATCH":
            return await super().handle(request)
        self.requests.append(("PATCH", request.path))
        self.times.append(time.monotonic())
        body = orjson.loads(await request.read())
        self.patches.append((request.path, request.content_type, body))
        stored = self.get(request.path)
        if stored is None:
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        merged = merge(copy.deepcopy(stored), body)
        return web.json_response(self.put(request.path.rsplit("/", 1)[0], merged))


def merge(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


DEFAULT = load_policy("default")
VOLCANO_GANGS = parse_policy(
    (Path(webhook.__file__).parent / "data" / "default-policy.yaml")
    .read_text()
    .replace("backend: coscheduling", "backend: volcano"),
    "the default policy with Volcano gangs",
)


async def decided(obj: Mapping[str, Any]) -> PodGroups:
    """The decision path's PodGroups for the stored object (what production's ``compute`` does)."""
    volcano = VOLCANO_GROUP in (obj["spec"]["template"]["metadata"].get("annotations") or {})
    review = Review(obj, namespace=str(obj["metadata"]["namespace"]))
    return tuple(decide(review, STATE, VOLCANO_GANGS if volcano else DEFAULT).pod_groups)


@pytest.fixture
async def fake() -> AsyncIterator[MergingApi]:
    api = MergingApi()
    await api.start()
    yield api
    await api.close()


@pytest.fixture
async def running(fake: MergingApi) -> AsyncIterator[Running]:
    world = Running(fake)
    yield world
    await world.stop()


def watching(rec: Reconciler) -> bool:
    return {"reconcile-workloads", "reconcile-podgroups", "reconcile-volcanopodgroups"} <= rec.listed


def group_of(fake: MergingApi, api_version: str) -> dict[str, Any] | None:
    return fake.get(f"{PATHS[api_version]}/elastic")


@pytest.mark.parametrize("api_version", [COSCHEDULING, VOLCANO], ids=["coscheduling", "volcano"])
async def test_a_podgroup_written_before_the_admission_is_patched_to_the_admitted_count(
    fake: MergingApi, running: Running, api_version: str
) -> None:
    fake.put(JOBS, submitted_job(api_version))
    fake.put(PATHS[api_version], earlier_pod_group(api_version))
    fake.put(WORKLOADS, created_workload(api_version))
    rec, results = running.start(compute=decided)
    await until(lambda: watching(rec))
    assert fake.patches == [], "nothing to size before the admission"
    fake.put(WORKLOADS, admitted_workload(api_version))  # Kueue admits 3 of the 4 pods
    await until(lambda: len(results) == 1)  # recorded once the PATCH is answered, not when it is sent
    group = group_of(fake, api_version)
    assert group is not None and group["spec"]["minMember"] == 3
    assert group is not None and group["spec"]["minResources"] == {"cpu": "3", GPU: "24"}
    assert group["spec"]["scheduleTimeoutSeconds"] == 600  # only the sizes were patched
    assert group["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "tasgate"}
    ((path, content_type, body),) = fake.patches
    assert content_type == "application/merge-patch+json"
    assert body == {"spec": {"minMember": 3, "minResources": {"cpu": "3", GPU: "24"}}}
    assert results == ["repaired"] and path.endswith("/podgroups/elastic")


async def test_a_podgroup_made_before_the_admission_asks_for_kueues_minimum_until_it_is_known(
    fake: MergingApi, running: Running
) -> None:
    fake.put(JOBS, submitted_job())
    rec, results = running.start(compute=decided)
    await until(lambda: watching(rec))
    fake.put(WORKLOADS, created_workload())  # Kueue made it: an early trigger
    await until(lambda: len(results) == 1)  # recorded once the POST is answered, not when it is sent
    made = group_of(fake, COSCHEDULING)
    assert made is not None
    assert made["spec"]["minMember"] == 2, made["spec"]  # Kueue's minimum: never more than it starts
    assert made["spec"]["minResources"] == {"cpu": "2", GPU: "16"}
    assert made["metadata"]["annotations"] == {"tasgate.io/partial-admission-minimum": "2"}
    fake.put(WORKLOADS, admitted_workload())
    await until(lambda: len(results) == 2)
    assert results == ["created", "repaired"]
    assert (group_of(fake, COSCHEDULING) or {}).get("spec", {}).get("minMember") == 3


async def test_an_admission_known_before_the_podgroup_is_made_sizes_it_at_once(
    fake: MergingApi, running: Running
) -> None:
    """Kueue admitted the Workload, and the Job is not yet updated: the PodGroup asks for the 3,
    and nothing is patched: asserted once the writer has resynced twice since, its queue empty
    (a repair found due would have been queued and sent by then)."""
    fake.put(JOBS, submitted_job())
    fake.put(WORKLOADS, admitted_workload())
    rec, results = running.start(compute=decided)
    await until(lambda: watching(rec))
    rec.hint(Intent("batch", "v1", "jobs", "Job", "batch/v1", NS, "elastic"))
    await until(lambda: len(results) == 1)  # recorded once the POST is answered, not when it is sent
    made = group_of(fake, COSCHEDULING)
    assert made is not None and made["spec"]["minMember"] == 3 and results == ["created"]
    assert made["spec"]["minResources"] == {"cpu": "3", GPU: "24"}
    await settled(rec)
    assert not rec.due(), "checked against the admission: nothing to patch"
    assert fake.patches == [] and results == ["created"]


def test_only_tasgates_own_podgroup_of_that_owner_is_sized() -> None:
    record = parse_workload(admitted_workload())
    assert record == Elastic(
        OwnerRef("batch/v1", "Job", "elastic", captured("job")["metadata"]["uid"]),
        (Target(COSCHEDULING, NS, "elastic"),),
        3,
    )
    ours = earlier_pod_group()
    assert repair_patch(ours, record, 3) == {
        "spec": {"minMember": 3, "minResources": {"cpu": "3", GPU: "24"}}
    }
    users = copy.deepcopy(ours)
    del users["metadata"]["labels"]
    assert repair_patch(users, record, 3) is None, "a user's own PodGroup is theirs"
    other = copy.deepcopy(ours)
    other["metadata"]["ownerReferences"][0]["uid"] = "another-job"
    assert repair_patch(other, record, 3) is None
    assert parse_workload(created_workload()) == Elastic(record.owner, record.groups, None)
