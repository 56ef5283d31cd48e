"""The native gangs tasgate makes, on a Kubernetes v1.37 API server: made in ``v1beta1``.

The fake API server answers 404 for ``v1alpha2`` PodGroups, as v1.37.0 does (measured:
docs/native-v137.md). A JobSet (a kind the Job controller leaves alone: its Jobs have a controller)
gets its gang from tasgate; the reconciler finds the pods of its Job naming ``js-gang``, walks up to
the JobSet and POSTs the Workload and PodGroup the decision gives on the v1.37 state: v1beta1,
the PodGroup naming its template with ``workloadRef``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from webhook.decide.decision import decide
from webhook.decide.patch import apply_entries
from webhook.decide.verdicts import Review
from webhook.live.reconcile import PodGroups
from webhook.live.watch import run_kind
from webhook.state.cluster import build_state

from .fakeapi import FakeApi
from .test_native import _native_policy
from .test_native_create import NS, RACK, jobset
from .test_native_v137 import BASE
from .test_reconcile import FAST, WATCH, Counted, stop_all, until

V137 = build_state(BASE)
POLICY = _native_policy(RACK)
JOBSETS = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
NATIVE = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}"


async def compute(obj: Mapping[str, Any]) -> PodGroups:
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    return tuple(decide(Review(obj, namespace), V137, POLICY).pod_groups)


def owned(kind: str, api: str, owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": api, "kind": kind, "name": meta["name"], "uid": meta["uid"], "controller": True}


def stored_jobset(fake: FakeApi) -> list[dict[str, Any]]:
    """The JobSet as /mutate patched it, its driver Job and that Job's one unbound pod."""
    js = jobset(1, (4, 4))
    d = decide(Review(js, NS), V137, POLICY)
    stored = fake.put(JOBSETS, apply_entries(js, d.patch))
    template = stored["spec"]["replicatedJobs"][0]["template"]
    job = fake.put(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "js-driver-0",
                "ownerReferences": [owned("JobSet", stored["apiVersion"], stored)],
            },
            "spec": template["spec"],
        },
    )
    pod_spec = template["spec"]["template"]["spec"]
    pod = fake.put(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "js-driver-0-0", "ownerReferences": [owned("Job", "batch/v1", job)]},
            "spec": pod_spec,
            "status": {"phase": "Pending"},
        },
    )
    return [stored, job, pod]


async def test_a_jobsets_gang_is_made_in_v1beta1_on_v137() -> None:
    fake = await FakeApi().start()
    fake.fail("GET", "/apis/scheduling.k8s.io/v1alpha2/podgroups", 404, times=1000)
    stored, _, pod = stored_jobset(fake)
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "js-gang"}
    results: list[str] = []
    api = fake.client()
    rec = Counted(api, compute, results.append, settings=FAST)
    tasks = [asyncio.create_task(run_kind(api, kind, rec, WATCH)) for kind in rec.kinds()]
    tasks.append(asyncio.create_task(rec.run()))
    try:
        await until(lambda: results == ["created", "created"])
        assert rec.gate.api == "scheduling.k8s.io/v1beta1"
        assert fake.posts("/scheduling.k8s.io/") == [f"{NATIVE}/workloads", f"{NATIVE}/podgroups"]
        group = fake.get(f"{NATIVE}/podgroups/js-gang")
        assert group is not None and group["apiVersion"] == "scheduling.k8s.io/v1beta1"
        assert group["spec"]["workloadRef"] == {"workloadName": "js", "templateName": "gang"}
        (owner,) = group["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("JobSet", stored["metadata"]["uid"])
    finally:
        try:
            await stop_all(tasks)
        finally:
            await api.close()
            await fake.close()
