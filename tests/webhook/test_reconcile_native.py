"""The native gangs tasgate makes, reconciled from the watches (``live.reconcile_native``),
against the in-process fake API server, with the real decision path as ``compute``.

The stored Job is the captured one (``tests/fixtures/native/job-gang.yaml``) made NonIndexed and
patched as tasgate's /mutate patches it; its pods are those the Job controller made, unbound,
naming ``trainer-gang``, owned by the stored Job.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.decide.decision import decide
from webhook.decide.patch import apply_entries
from webhook.decide.verdicts import Review
from webhook.live import reconcile_native
from webhook.live.reconcile import Intent, PodGroups
from webhook.live.watch import run_kind

from .fakeapi import FakeApi
from .test_native import _docs, _native_policy
from .test_native_create import NS, RACK, SERVED, judged, nonindexed_job
from .test_reconcile import FAST, WATCH, Counted, settled, stop_all, until

ROOT = Path(__file__).parents[2]
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
NATIVE = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}"
POLICY = _native_policy(RACK)


async def compute(obj: Mapping[str, Any]) -> PodGroups:
    """What ``serve.live_tasks`` computes: the decision path on the stored object."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    return tuple(decide(Review(obj, namespace), SERVED, POLICY).pod_groups)


def stored_job(fake: FakeApi, pods: int = 3) -> dict[str, Any]:
    job = nonindexed_job(pods)
    return fake.put(JOBS, apply_entries(job, judged(job).patch))


def job_pods(fake: FakeApi, job: Mapping[str, Any], group: str = "trainer-gang") -> list[dict[str, Any]]:
    """The captured Job's pods as the Job controller creates them: unbound, Pending, owned."""
    captured = [d for d in _docs(ROOT / "tests/fixtures/native/job-gang.yaml") if d["kind"] == "Pod"]
    out = []
    for seen in captured:
        pod = copy.deepcopy(seen)
        pod["spec"].pop("nodeName")
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        pod["status"] = {"phase": "Pending"}
        pod["metadata"]["ownerReferences"][0]["uid"] = job["metadata"]["uid"]
        out.append(fake.put(PODS, pod))
    return out


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


@pytest.fixture
async def started(fake: FakeApi) -> AsyncIterator[tuple[Counted, list[str]]]:
    results: list[str] = []
    api = fake.client()
    rec = Counted(api, compute, results.append, settings=FAST)
    tasks = [asyncio.create_task(run_kind(api, kind, rec, WATCH)) for kind in rec.kinds()]
    tasks.append(asyncio.create_task(rec.run()))
    yield rec, results
    try:
        await stop_all(tasks)
    finally:
        await api.close()


def posted(fake: FakeApi) -> list[str]:
    return fake.posts("/scheduling.k8s.io/")


async def test_the_workload_then_its_pod_group_are_created_once_owned_by_the_job(
    fake: FakeApi, started: tuple[Counted, list[str]]
) -> None:
    """Created once: later resyncs (the pods still name the group) POST neither again."""
    job = stored_job(fake)
    job_pods(fake, job)
    await until(lambda: started[1] == ["created", "created"])
    await settled(started[0])
    assert posted(fake) == [f"{NATIVE}/workloads", f"{NATIVE}/podgroups"]
    workload, group = fake.get(f"{NATIVE}/workloads/trainer"), fake.get(f"{NATIVE}/podgroups/trainer-gang")
    assert workload is not None and group is not None
    for obj in (workload, group):
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", "trainer", job["metadata"]["uid"])
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "tasgate"}
    assert group["spec"]["podGroupTemplateRef"] == {
        "workload": {"workloadName": "trainer", "podGroupTemplateName": "gang"}
    }
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert started[1] == ["created", "created"]


async def test_a_deleted_pod_group_is_made_again_its_workload_already_there(
    fake: FakeApi, started: tuple[Counted, list[str]]
) -> None:
    """Each step waits for what the reconciler recorded (the fake holds a POST before the
    reconciler has read its answer)."""
    job_pods(fake, stored_job(fake))
    await until(lambda: len(started[1]) == 2)
    fake.delete(f"{NATIVE}/podgroups/trainer-gang")
    await until(lambda: len(started[1]) == 4)
    assert started[1] == ["created", "created", "exists", "created"]
    assert fake.get(f"{NATIVE}/podgroups/trainer-gang") is not None


async def test_a_hint_makes_them_before_any_pod(fake: FakeApi, started: tuple[Counted, list[str]]) -> None:
    """The Job is stored once the hint has looked for it and found nothing (a 404 served)."""
    rec, results = started
    rec.hint(Intent("batch", "v1", "jobs", "Job", "batch/v1", NS, "trainer"))  # reviewed, not stored yet
    await until(lambda: ("GET", f"{JOBS}/trainer") in fake.requests)
    stored_job(fake)
    await until(lambda: len(results) == 2)
    assert results == ["created", "created"]
    assert posted(fake) == [f"{NATIVE}/workloads", f"{NATIVE}/podgroups"]


async def test_a_group_of_the_job_controllers_own_is_never_made(
    fake: FakeApi, started: tuple[Counted, list[str]]
) -> None:
    """Pods naming a group the stored Job's decision gives no objects for: none needed."""
    job = nonindexed_job(3)
    job["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "someone-elses"}
    stored = fake.put(JOBS, job)
    job_pods(fake, stored, "someone-elses")
    await until(lambda: "none-needed" in started[1])
    assert posted(fake) == []


async def test_without_the_native_api_the_unbound_pods_are_never_listed(fake: FakeApi) -> None:
    fake.fail("GET", "/apis/scheduling.k8s.io/v1alpha2/podgroups", 404, times=1000)
    fake.fail("GET", "/apis/scheduling.k8s.io/v1beta1/podgroups", 404, times=1000)  # nor v1.37's
    job_pods(fake, stored_job(fake))
    api = fake.client()
    rec = Counted(api, compute, settings=FAST)
    tasks = [asyncio.create_task(run_kind(api, kind, rec, WATCH)) for kind in rec.kinds()]
    try:
        await until(lambda: reconcile_native.NATIVE_PODS in rec.listed)
        pod_lists = [p for m, p in fake.requests if m == "GET" and p == "/api/v1/pods"]
        assert not rec.gate.served and rec.seen[reconcile_native.NATIVE_PODS] == {}
        assert len(pod_lists) <= 4  # the two label-selected pod watches' list and watch, no third
        assert rec.all_missing() == []
    finally:
        try:
            await stop_all(tasks)
        finally:
            await api.close()


def test_only_unbound_live_pods_naming_a_group_are_kept() -> None:
    pod = {"metadata": {"name": "p", "namespace": NS}, "spec": {"schedulingGroup": {"podGroupName": "g"}}}
    found = reconcile_native.parse_pod(pod)
    assert found is not None and found.target.api_version == "scheduling.k8s.io/v1alpha2"
    assert reconcile_native.parse_pod({**pod, "spec": {**pod["spec"], "nodeName": "n"}}) is None
    assert reconcile_native.parse_pod({**pod, "status": {"phase": "Succeeded"}}) is None
    assert (
        reconcile_native.parse_pod({**pod, "spec": {"schedulingGroup": {"podGroupName": "Bad_Name"}}}) is None
    )
    assert reconcile_native.parse_pod({**pod, "spec": {}}) is None


@pytest.mark.parametrize("path", ["charts/tasgate/templates/rbac.yaml", "manifests/base/rbac.yaml"])
def test_rbac_lets_the_leader_create_what_it_posts(path: str) -> None:
    text = (ROOT / path).read_text()
    docs = [d for d in yaml.safe_load_all(text.replace("{{", "#{{")) if d and d.get("kind") == "ClusterRole"]
    rules = [r for d in docs for r in d["rules"]]
    for resource in ("workloads", "podgroups"):
        verbs = {
            v
            for r in rules
            if "scheduling.k8s.io" in r["apiGroups"] and resource in r["resources"]
            for v in r["verbs"]
        }
        assert {"get", "list", "watch", "create"} <= verbs, (resource, verbs)
