"""One bad object never stops the state (issue 17.2): through the real live mirror, each kind's
malformed object is left out alone, recorded on the state, logged once, and the verdicts that
depend on it say "not checked"; everything else keeps being judged and updated."""

from __future__ import annotations

import argparse
import copy
import logging
from typing import Any

import orjson
import pytest

from tests.webhook.conftest import (
    GPU,
    KUEUE,
    job,
    job_review,
    kueue_objects,
    namespace_object,
    node,
    policy,
    rack_cluster,
    running_pod,
)
from tests.webhook.test_live import synced_mirror
from tests.webhook.test_live_workloads import admitted, mirror_with_kueue
from tests.webhook.test_workload_usage import gpus_free
from webhook.cli import check, status
from webhook.decide.decision import decide
from webhook.decide.reasons import Reason
from webhook.decide.review import judge
from webhook.decide.verdicts import Decision, Review
from webhook.live.mirror import Mirror
from webhook.model.quantity import UNLIMITED
from webhook.state.cluster import ClusterState, build_state
from webhook.state.rejected import Rejected
from webhook.wire.admission import parse_review

POLICY = policy([])
LOG = "tasgate.live"
LOTS = 'Invalid value: "lots": must start with a number, as in 500m or 2Gi'
QUOTA = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


def cluster_queue(name: str, cpu: Any = "1000") -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": cpu}]
    group = {"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": "gpu", "resources": resources}]}
    spec = {"namespaceSelector": {}, "resourceGroups": [group]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cq: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": meta, "spec": {"clusterQueue": cq}}


def world() -> dict[str, list[dict[str, Any]]]:
    """Watched kind -> objects: two racks of GPU nodes under Topology "topo", flavor "gpu", and
    ClusterQueues "cq" (LocalQueue team/q), "other-cq" (team/other, lab/q) and "big-cq"
    (team/big, with 1E cpu)."""
    topology, flavor, _, _ = kueue_objects()
    return {
        "nodes": rack_cluster(),
        "topologies": [topology],
        "resourceflavors": [flavor],
        "clusterqueues": [cluster_queue("cq"), cluster_queue("other-cq"), cluster_queue("big-cq", "1E")],
        "localqueues": [
            local_queue("team", "q", "cq"),
            local_queue("team", "other", "other-cq"),
            local_queue("lab", "q", "other-cq"),
            local_queue("team", "big", "big-cq"),
        ],
        "namespaces": [namespace_object("team"), namespace_object("lab")],
    }


def live(objects: dict[str, list[dict[str, Any]]]) -> Mirror:
    mirror = synced_mirror()
    for kind, items in objects.items():
        mirror.replace(kind, items)
    return mirror


async def published(mirror: Mirror) -> ClusterState:
    await mirror.publish_once()
    state = mirror.holder.current
    assert state is not None
    return state


def verdict(state: ClusterState, queue: str = "q", namespace: str = "team", **pod_spec: Any) -> Decision:
    return decide(Review(job(2, queue=queue, namespace=namespace, **pod_spec)), state, POLICY)


def messages_about(caplog: pytest.LogCaptureFixture, subject: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOG and subject in r.getMessage()]


# --- a bad ClusterQueue, and Kueue's 1E ----------------------------------------------------------


async def test_a_bad_cluster_queue_is_left_out_alone_and_the_state_keeps_updating(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOG)
    objects = world()
    objects["clusterqueues"][0] = cluster_queue("cq", "lots")
    mirror = live(objects)
    first = await published(mirror)
    assert first.rejected == (Rejected("ClusterQueue", "", "cq", QUOTA, LOTS),)
    assert set(first.cluster_queues) == {"other-cq", "big-cq"} and len(first.nodes) == 4

    on_it = verdict(first)
    assert (on_it.allowed, on_it.reason, on_it.rejected) == (True, Reason.OBJECT_REJECTED, first.rejected[0])
    left_out = 'not checked: ClusterQueue "cq" is left out of tasgate\'s cluster state as unusable'
    assert on_it.warnings == (f"{left_out}: {QUOTA}: {LOTS}",)
    assert (on_it.queue, on_it.cluster_queue) == ("q", "cq")
    assert verdict(first, queue="other").reason is Reason.FITS, "workloads on other queues are judged"
    assert verdict(first, namespace="lab").reason is Reason.FITS

    mirror.apply("pods", "ADDED", running_pod("p", "n1-1", gpus=8))  # usage moves: a new generation
    second = await published(mirror)
    assert second.generation > first.generation and second.usage == {"n1-1": {"cpu": 1000, GPU: 8, "pods": 1}}
    mirror.apply("nodes", "ADDED", node("n3-1", {"block": "nb", "rack": "nr3", "pool": "gpu"}))
    third = await published(mirror)  # the structure moves: a rebuild, still without "cq"
    assert len(third.nodes) == 5 and third.rejected == first.rejected
    assert messages_about(caplog, 'ClusterQueue "cq"') == [
        f'ClusterQueue "cq" left out of the cluster state: {QUOTA}: {LOTS}'
    ], "logged once, not on every rebuild"

    mirror.apply("clusterqueues", "MODIFIED", cluster_queue("cq"))
    fixed = await published(mirror)
    assert fixed.rejected == () and verdict(fixed).reason is Reason.FITS
    broken_again = cluster_queue("cq", "lots")
    broken_again["metadata"]["resourceVersion"] = "9"
    mirror.apply("clusterqueues", "MODIFIED", broken_again)
    await published(mirror)
    assert len(messages_about(caplog, 'ClusterQueue "cq" left out')) == 2, "broken again: said again"
    assert messages_about(caplog, 'ClusterQueue "cq" is no longer') != []


async def test_a_one_exa_cpu_quota_is_unlimited_as_kueue_reads_it() -> None:
    """Kueue's AmountFromQuantity makes 1E cpu Unlimited (its milli-value overflows int64)."""
    state = await published(live(world()))
    assert state.rejected == ()
    (quota,) = state.cluster_queues["big-cq"].groups[0].flavors
    assert quota.nominal == {"cpu": UNLIMITED}
    assert verdict(state, queue="big").reason is Reason.FITS


async def test_the_server_gets_a_flag_to_answer_per_on_timeout() -> None:
    objects = world()
    objects["localqueues"][0]["spec"] = "cq"  # LocalQueue team/q: spec is not an object
    state = await published(live(objects))
    body = job_review(job(2, queue="q", namespace="team"), "u1", "team", "alice")
    outcome = judge(parse_review(body), state, POLICY, mutating=True)
    assert (outcome.allowed, outcome.reason, outcome.patch) == (True, Reason.OBJECT_REJECTED, ())
    assert outcome.undecided.startswith('LocalQueue "team/q" is left out of tasgate\'s cluster state')
    assert outcome.audit == {"decision": "allow", "reason": "object-rejected"}
    other = judge(parse_review(body.replace(b'"q"', b'"other"')), state, POLICY, True)
    assert other.undecided == "" and other.reason is Reason.FITS


async def test_a_rebuild_that_fails_keeps_the_last_state_and_usage_publishing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild that raises (no real object can make it: the build is faulted here) keeps the
    last state published, logged; usage keeps publishing on it, and the next rebuild is taken."""
    topology, flavor, cq, lq = kueue_objects(levels=("block", "rack"))
    mirror = live({"nodes": rack_cluster(), "topologies": [topology], "resourceflavors": [flavor]})
    mirror.replace("clusterqueues", [cq])
    mirror.replace("localqueues", [lq])
    first = await published(mirror)

    def broken(*args: Any, **kwargs: Any) -> ClusterState:
        raise RuntimeError("the build failed")

    monkeypatch.setattr("webhook.live.assemble.build_state", broken)
    monkeypatch.setattr("webhook.live.assemble.with_node_changes", broken)  # a node edit fails too
    mirror.apply("nodes", "ADDED", node("h1", {"block": "nb", "rack": "nr9", "pool": "gpu"}))
    with caplog.at_level(logging.ERROR, LOG):
        assert await published(mirror) is first, "the last state stays published"
    assert any("not rebuilt" in r.getMessage() and r.exc_info for r in caplog.records)
    mirror.apply("pods", "ADDED", running_pod("p", "n1-1", gpus=8))
    moved = await published(mirror)
    assert moved.generation > first.generation and len(moved.nodes) == 4, "usage keeps publishing"
    monkeypatch.undo()
    mirror.apply("nodes", "ADDED", node("h2", {"block": "nb", "rack": "nr9", "pool": "gpu"}))
    assert len((await published(mirror)).nodes) == 6


async def test_a_leaf_whose_nodes_sum_past_int64_saturates() -> None:
    """Two rack-level nodes whose cpu sums past int64: the leaf holds int64's maximum, no error."""
    topology, flavor, cq, lq = kueue_objects(levels=("block", "rack"))
    mirror = live({"nodes": rack_cluster(), "topologies": [topology], "resourceflavors": [flavor]})
    mirror.replace("clusterqueues", [cq])
    mirror.replace("localqueues", [lq])
    first = await published(mirror)
    for i in (1, 2):
        big = node(f"h{i}", {"block": "nb", "rack": "nr9", "pool": "gpu"}, cpu=str(2**63 // 1000 - 1))
        mirror.apply("nodes", "ADDED", big)
    state = await published(mirror)
    assert state is not first and len(state.nodes) == 6 and not state.rejected
    tree = next(iter(state.snapshots().values())).now.tree
    (leaf,) = tree.leaf_range(("nb", "nr9"))
    assert tree.capacity[leaf * len(tree.resources) + tree.resource_column("cpu")] == 2**63 - 1


# --- every kind: left out alone ------------------------------------------------------------------


def _bad_limit_range() -> dict[str, Any]:
    limits = [{"type": "Container", "default": {"cpu": "lots"}}]
    meta = {"name": "defaults", "namespace": "team"}
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta, "spec": {"limits": limits}}


def _bad_runtime_class() -> dict[str, Any]:
    meta = {"name": "kata"}
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": meta,
        "overhead": {"podFixed": []},
    }


def _bad_topology() -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "topo"}, "spec": {"levels": "rack"}}


def _bad_namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": ["a"]}}


BAD = [
    # (watched kind, object, its rejection, a verdict that depends on it, one that does not)
    (
        "limitranges",
        _bad_limit_range,
        Rejected("LimitRange", "team", "defaults", "spec.limits[0].default[cpu]", LOTS),
        {},
        {"namespace": "lab"},
    ),
    (
        "runtimeclasses",
        _bad_runtime_class,
        Rejected(
            "RuntimeClass", "", "kata", "overhead.podFixed", "Invalid value: must be a map of quantities"
        ),
        {"runtimeClassName": "kata"},
        {},
    ),
    (
        "topologies",
        _bad_topology,
        Rejected("Topology", "", "topo", "spec.levels", "Invalid value: must be a list of objects"),
        {},
        None,  # every queue of this world is on that topology
    ),
    (
        "namespaces",
        _bad_namespace,
        Rejected("Namespace", "", "team", "metadata.labels", "Invalid value: must be a map of strings"),
        {},
        {"namespace": "lab"},
    ),
]


@pytest.mark.parametrize(("kind", "make", "rejected", "depends", "independent"), BAD, ids=[b[0] for b in BAD])
async def test_each_kind_is_left_out_alone(
    kind: str,
    make: Any,
    rejected: Rejected,
    depends: dict[str, Any],
    independent: dict[str, Any] | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, LOG)
    objects = world()
    objects[kind] = [o for o in objects.get(kind, []) if o["metadata"]["name"] != rejected.name] + [make()]
    mirror = live(objects)
    state = await published(mirror)
    assert state.rejected == (rejected,)
    assert len(state.nodes) == 4 and set(state.cluster_queues) == {"cq", "other-cq", "big-cq"}
    d = verdict(state, **depends)
    assert (d.reason, d.rejected) == (Reason.OBJECT_REJECTED, rejected)
    assert rejected.subject in d.warnings[0] and rejected.path in d.warnings[0]
    if independent is not None:
        assert verdict(state, **independent).reason is Reason.FITS
    mirror.apply("pods", "ADDED", running_pod("p", "n1-1", gpus=8))
    later = await published(mirror)
    assert later.generation > state.generation and later.rejected == (rejected,)
    assert len([r for r in caplog.records if rejected.subject in r.getMessage()]) == 1


async def test_a_bad_pod_is_left_out_alone_and_recorded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, LOG)
    mirror = live(world())
    bad = running_pod("bad", "n1-1", gpus=8, cpu="lots")
    mirror.replace("pods", [bad, running_pod("good", "n1-2", gpus=2)])
    state = await published(mirror)
    assert state.rejected == (
        Rejected("Pod", "default", "bad", "spec.containers[0].resources.requests.cpu", LOTS),
    )
    assert state.usage == {"n1-2": {"cpu": 1000, GPU: 2, "pods": 1}}, "its usage counts nowhere"
    assert verdict(state).reason is Reason.FITS, "no verdict depends on a pod by name"
    for version in ("2", "3"):  # status updates of the still-broken pod: no new line
        again = copy.deepcopy(bad)
        again["metadata"]["resourceVersion"] = version
        mirror.apply("pods", "MODIFIED", again)
        await published(mirror)
    mirror.apply("pods", "DELETED", bad)
    gone = await published(mirror)
    assert gone.rejected == () and gone.generation > state.generation, "its going is published"
    assert len([r for r in caplog.records if 'Pod "default/bad"' in r.getMessage()]) == 1


async def test_a_bad_node_is_left_out_alone_and_its_fix_is_taken() -> None:
    mirror = live(world())
    bad = node("n9", {"block": "nb", "rack": "nr1", "pool": "gpu"}, cpu="lots")
    mirror.apply("nodes", "ADDED", bad)
    state = await published(mirror)
    assert state.rejected == (Rejected("Node", "", "n9", "status.allocatable[cpu]", LOTS),)
    assert len(state.nodes) == 4
    mirror.apply("nodes", "MODIFIED", node("n9", {"block": "nb", "rack": "nr1", "pool": "gpu"}))
    fixed = await published(mirror)
    assert fixed.rejected == () and len(fixed.nodes) == 5


async def test_a_bad_workload_is_left_out_alone_and_the_others_count() -> None:
    mirror = mirror_with_kueue()
    mirror.replace("workloads", [admitted("good", {"n0": 2})])
    bad = admitted("bad", {"n1": 2})
    del bad["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0]["domainCount"]
    mirror.apply("workloads", "ADDED", bad)
    state = await published(mirror)
    (rejected,) = state.rejected
    assert (rejected.kind, rejected.namespace, rejected.name) == ("Workload", "gangs", "bad")
    assert rejected.path == "status.admission" and "domainCount" in rejected.reason
    free = gpus_free(state)
    assert free[("r0", "n0")] < free[("r0", "n1")] == 8, "the good one counts, the bad one not at all"
    mirror.apply("workloads", "DELETED", bad)
    assert (await published(mirror)).rejected == ()


# --- files and status ----------------------------------------------------------------------------


def test_status_lists_the_objects_left_out(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    kinds = world()
    kinds["clusterqueues"][0] = cluster_queue("cq", "lots")
    objects = [o for items in kinds.values() for o in items]
    state = build_state([*objects, running_pod("bad", "n1-1", gpus=1, cpu="lots")])
    assert [r.kind for r in state.rejected] == ["ClusterQueue", "Pod"]

    async def no_gangs(kubeconfig: str, context: str | None) -> dict[str, list[Any]]:
        return {}

    monkeypatch.setattr(status, "state_for", lambda refs, kubeconfig, context: state)
    monkeypatch.setattr(status, "_list_tracked", no_gangs)
    args = argparse.Namespace(kubeconfig="k", context=None, namespace=None, output="table", policy="none")
    assert status.run(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["No gangs found.", "", lines[2]] and lines[2].startswith(
        "Left out of the cluster state"
    )
    assert lines[3].split() == ["KIND", "NAMESPACE/NAME", "REASON"]
    assert lines[4].split()[:3] == ["ClusterQueue", "cq", f"{QUOTA}:"]
    assert lines[5].split()[:2] == ["Pod", "default/bad"]
    status.run(argparse.Namespace(**{**vars(args), "output": "json", "namespace": "team"}))
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["rejected"] == [
        {"kind": "ClusterQueue", "namespace": "", "name": "cq", "path": QUOTA, "reason": LOTS}
    ], "cluster-scoped ones concern every namespace; the pod of another namespace is left out"


def test_the_check_report_lists_the_objects_left_out() -> None:
    rejected = (Rejected("ClusterQueue", "", "cq", QUOTA, LOTS),)
    assert "rejected" not in check.report([])
    assert check.report([], rejected)["rejected"] == [
        {"kind": "ClusterQueue", "namespace": "", "name": "cq", "path": QUOTA, "reason": LOTS}
    ]


@pytest.mark.parametrize(("on_timeout", "allowed"), [("allow", True), ("deny", False)])
async def test_the_server_answers_an_object_rejected_verdict_per_on_timeout(
    aiohttp_client: Any, on_timeout: str, allowed: bool
) -> None:
    """Through the real app: a workload on a left-out queue is answered as --on-timeout says, and
    the left-out object is on /metrics (tasgate_objects_rejected{kind})."""
    from webhook.serve.app import create_app, create_metrics_app  # noqa: PLC0415
    from webhook.serve.keys import STATE, Settings, StateSource  # noqa: PLC0415

    objects = world()
    objects["clusterqueues"][0] = cluster_queue("cq", "lots")
    settings = Settings(policy=POLICY, on_timeout=on_timeout)
    app = create_app(settings, lambda record: None, StateSource(objects=None))
    app[STATE].publish(await published(live(objects)))
    client, side = await aiohttp_client(app), await aiohttp_client(create_metrics_app(app))
    body = job_review(job(2, queue="q", namespace="team"), "u1", "team", "alice")
    answer = (await (await client.post("/validate", data=body)).json())["response"]
    assert answer["allowed"] is allowed and answer["auditAnnotations"]["reason"] == "object-rejected"
    if allowed:
        assert any('ClusterQueue "cq" is left out' in w for w in answer["warnings"])
    else:
        assert answer["status"]["code"] == 503 and answer["auditAnnotations"]["decision"] == "deny"
        assert 'tasgate could not decide: ClusterQueue "cq" is left out' in answer["status"]["message"]
    metrics = await (await side.get("/metrics")).text()
    assert 'tasgate_objects_rejected{kind="ClusterQueue"} 1.0' in metrics
