"""``tasgate serve --multikueue-workers`` (issue 37.2): each MultiKueue worker cluster watched live.

Two in-process API servers (``fakeapi``), a manager and a worker; the manager holds the
MultiKueueCluster and its kubeconfig Secret pointing at the worker, as Kueue itself reads them.
The real watches (`serve.live_tasks.watch_workers`) build the worker's state, the manager's
published state carries it, and the decision judges a MultiKueue gang there: denied only when
the worker can never hold it, admitted naming the worker that holds it now. A worker tasgate
cannot reach never adds to a denial. The two-control-plane proof with the real Kueue is
tests/e2e/test_kueue_multikueue.py.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

import scorer
from tests.webhook.fakeapi import FakeApi
from tests.webhook.quota_world import cluster_queue, flavors_and_topology, gang, local_queue, rack, resources
from tests.webhook.test_admission_checks import TWO, check, queue_with
from webhook.decide.decision import decide
from webhook.decide.verdicts import Decision, Review
from webhook.files.policy import load_policy
from webhook.live.holder import StateHolder
from webhook.live.multikueue import Wanted, kubeconfig_of, wanted
from webhook.live.watch import WatchSettings
from webhook.serve.keys import StateSource
from webhook.serve.live_tasks import watch_workers
from webhook.serve.supervise import Supervisor
from webhook.state.admission_checks import MULTIKUEUE_CONTROLLER
from webhook.state.cluster import ClusterState, build_state

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}
SECRETS = "/api/v1/namespaces/kueue-system/secrets"
CLUSTERS = f"{KUEUE}/multikueueclusters"
POLICY = load_policy("default")


def multikueue_check(config: str = "mk-config") -> dict[str, Any]:
    found = check("mk", MULTIKUEUE_CONTROLLER)
    found["spec"]["parameters"] = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config}
    return found


def config(*clusters: str) -> dict[str, Any]:
    meta = {"name": "mk-config"}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": meta,
            "spec": {"clusters": list(clusters)}}  # fmt: skip


def manager_state(*clusters: str) -> ClusterState:
    """A MultiKueue manager whose pool has no GPU node, dispatching to ``clusters``."""
    objects = [*TWO, *rack("b", prefix="m"), queue_with([{"name": "mk"}]), local_queue("q", "cq"),
               multikueue_check(), config(*clusters)]  # fmt: skip
    return build_state(objects, 1)


def kubeconfig(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "w",
        "clusters": [{"name": "w", "cluster": {"server": server}}],
        "users": [{"name": "w", "user": {"token": "worker-token"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
    }  # fmt: skip


def secret(name: str, content: bytes) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {"kubeconfig": base64.b64encode(content).decode()}}  # fmt: skip


def cluster(name: str, secret_name: str, location_type: str = "Secret") -> dict[str, Any]:
    source = {"kubeConfig": {"location": secret_name, "locationType": location_type}}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": name},
            "spec": {"clusterSource": source}}  # fmt: skip


def fill_worker(fake: FakeApi, hosts: int) -> None:
    """A worker with one rack of ``hosts`` 8-GPU nodes and the queue the gang names."""
    for obj in rack("a", hosts, "w"):
        fake.put("/api/v1/nodes", obj)
    for obj in [*flavors_and_topology({"first": "a"}), cluster_queue("cq", [("first", resources(512))])]:
        fake.put(f"{KUEUE}/{PLURALS[obj['kind']]}", obj)
    fake.put(f"{KUEUE}/namespaces/team/localqueues", local_queue("q", "cq"))


@dataclass
class World:
    manager: FakeApi
    worker: FakeApi
    holder: StateHolder

    def url(self, fake: FakeApi) -> str:
        assert fake.server is not None
        return str(fake.server.make_url("")).rstrip("/")

    def add_cluster(self, name: str = "w1", location_type: str = "Secret") -> None:
        self.manager.put(
            SECRETS, secret(f"{name}-kubeconfig", yaml.safe_dump(kubeconfig(self.url(self.worker))).encode())
        )
        self.manager.put(CLUSTERS, cluster(name, f"{name}-kubeconfig", location_type))

    def verdict(self, pods: int) -> Decision:
        state = self.holder.current
        assert state is not None
        return decide(Review(gang(pods), namespace="team"), state, POLICY)


async def until(what: str, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` (the watches run meanwhile) until it holds; fail after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    manager, worker = await FakeApi().start(), await FakeApi().start()
    fill_worker(worker, hosts=8)
    holder = StateHolder(source="live")
    supervisor = Supervisor()
    api = manager.client()
    source = StateSource(live=True, watch=WatchSettings(backoff_max=0.2), multikueue_namespace="kueue-system")
    watch_workers(holder, api, supervisor, lambda: POLICY, source, scorer.default_engine(), 0.0)
    holder.publish(manager_state("w1"))
    try:
        yield World(manager, worker, holder)
    finally:
        await supervisor.stop()
        await api.close()
        await manager.close()
        await worker.close()


def workers_of(holder: StateHolder) -> Mapping[str, ClusterState]:
    return holder.current.workers if holder.current is not None else {}


async def test_a_worker_is_watched_and_judges_the_gang(world: World) -> None:
    assert world.verdict(10).reason.value == "multikueue"  # no worker known yet: never a denial
    assert world.verdict(10).allowed
    world.add_cluster()
    await until("the worker's state", lambda: "w1" in workers_of(world.holder))
    fits = world.verdict(6)
    assert (fits.allowed, fits.reason.value) == (True, "multikueue"), fits
    assert any("worker clusters that hold it now: w1" in w for w in fits.warnings), fits.warnings
    never = world.verdict(10)  # 10 eight-GPU pods in one rack; the worker's rack has 8 hosts
    assert (never.allowed, never.reason.value) == (False, "never-fits"), never
    assert "w1: PodSet" in never.message


async def test_a_worker_added_to_the_worker_cluster_is_seen_live(world: World) -> None:
    world.add_cluster()
    await until("the worker's state", lambda: "w1" in workers_of(world.holder))
    assert not world.verdict(10).allowed
    for obj in rack("a", 2, "late"):  # two more hosts in the worker's rack: 10 now fit
        obj["metadata"]["labels"].update({"block": "w-b", "rack": "w-r"})
        world.worker.put("/api/v1/nodes", obj)
    await until("the verdict to follow the worker's new nodes", lambda: world.verdict(10).allowed)


async def test_a_deleted_cluster_stops_being_judged_on(world: World) -> None:
    world.add_cluster()
    await until("the worker's state", lambda: "w1" in workers_of(world.holder))
    world.manager.delete(f"{CLUSTERS}/w1")
    await until("the worker to be dropped", lambda: "w1" not in workers_of(world.holder))
    verdict = world.verdict(10)  # w1 listed by the config, not reached: never a denial
    assert verdict.allowed and any("w1: not judged" in w for w in verdict.warnings), verdict.warnings


async def test_an_unreadable_kubeconfig_never_adds_to_a_denial(world: World) -> None:
    world.manager.put(SECRETS, secret("w1-kubeconfig", b"\x00not yaml: ["))
    world.manager.put(CLUSTERS, cluster("w1", "w1-kubeconfig"))

    def said() -> bool:
        state = world.holder.current
        return state is not None and "not a kubeconfig" in state.unreached.get("w1", "")

    await until("the unreadable Secret to be said", said)
    verdict = world.verdict(10)
    assert verdict.allowed and verdict.reason.value == "multikueue", verdict


@pytest.mark.parametrize(
    ("spec", "found"),
    [
        ({"clusterSource": {"kubeConfig": {"location": "s"}}}, Wanted("s")),
        ({"kubeConfig": {"location": "s", "locationType": "Secret"}}, Wanted("s")),  # v1beta1
        ({"clusterSource": {"kubeConfig": {"location": "/etc/k", "locationType": "Path"}}},
         Wanted(None, "its kubeconfig is a path on Kueue's pod (/etc/k), not a Secret")),
        ({"clusterSource": {"clusterProfileRef": {"name": "p"}}},
         Wanted(None, "it is reached through a ClusterProfile, which tasgate does not read")),
        ({}, Wanted(None, "it names no kubeconfig")),
        ("not a map", Wanted(None, "it names no kubeconfig")),
    ],
)  # fmt: skip
def test_where_a_cluster_kubeconfig_is(spec: Any, found: Wanted) -> None:
    assert wanted({"metadata": {"name": "w"}, "spec": spec}) == found


def test_kueue_reporting_a_cluster_inactive_is_kept() -> None:
    status = {"conditions": [{"type": "Active", "status": "False", "message": "connection refused"}]}
    obj = {"spec": {"clusterSource": {"kubeConfig": {"location": "s"}}}, "status": status}
    assert wanted(obj).inactive == "connection refused"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (None, 'has no "kubeconfig" key'),
        ({"kubeconfig": "%%%"}, "is not a kubeconfig (base64 YAML)"),
        ({"kubeconfig": base64.b64encode(b"a: 1").decode()}, "is not a kubeconfig (no clusters)"),
    ],
)
def test_a_secret_that_holds_no_kubeconfig_is_said(data: Any, said: str) -> None:
    config_found, why = kubeconfig_of({"data": data}, "kueue-system/s")
    assert config_found is None and why is not None and said in why
