"""build_state: cluster state from plain Kubernetes objects (a `kubectl get -o yaml` dump)."""

from __future__ import annotations

from typing import Any

import pytest

from scorer.model import PODS, Taint
from tests.webhook.conftest import (
    GI,
    GPU,
    HOST,
    REQUIRED,
    job,
    judge,
    kueue_objects,
    namespace_object,
    node,
    policy,
    running_pod,
)
from webhook.files.sample import sample_objects
from webhook.state.cluster import build_state
from webhook.state.kueue import ClusterQueue, Flavor, LocalQueue, Topology
from webhook.state.nodes import parse_node, pod_usage
from webhook.state.rejected import Rejected
from webhook.wire.errors import InvalidObject


def only_rejected(objects: list[dict[str, Any]]) -> Rejected:
    """The one object of ``objects`` the state left out."""
    (rejected,) = build_state(objects).rejected
    return rejected


def usage_of(*pods: dict[str, Any]) -> dict[str, int]:
    state = build_state([node("n1", {}), *pods])
    (n1,) = state.nodes
    return dict(n1.usage)


def test_usage_counts_bound_running_and_pending_pods() -> None:
    usage = usage_of(
        running_pod("a", "n1", gpus=2, cpu="1500m"),
        running_pod("b", "n1", gpus=1, phase="Pending", cpu="500m"),
        running_pod("c", "n1", gpus=1, phase="Unknown"),
    )
    assert usage == {"cpu": 3000, GPU: 4, PODS: 3}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pods_do_not_count(phase: str) -> None:
    assert usage_of(running_pod("done", "n1", gpus=8, phase=phase)) == {}


def test_unbound_pods_do_not_count() -> None:
    assert usage_of(running_pod("waiting", None, gpus=8, phase="Pending")) == {}


def test_pods_on_other_nodes_do_not_count() -> None:
    assert usage_of(running_pod("elsewhere", "n2", gpus=8)) == {}


def test_pod_usage_follows_pod_requests() -> None:
    pod = running_pod("p", "n1", gpus=0)
    pod["spec"] = {
        "nodeName": "n1",
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},  # limits stand in
        ],
        "overhead": {"cpu": "250m"},
    }
    assert pod_usage(pod) == ("n1", {"cpu": 4250, "memory": 3 * GI, PODS: 1})


def test_usage_reduces_what_fits_now_but_not_when_empty() -> None:
    objects = [
        *kueue_objects(levels=("rack", HOST)),
        node("n1", {"rack": "r", "pool": "gpu"}),
        running_pod("p", "n1", 4),
    ]
    d = judge(
        job(2, queue="q", namespace="team", annotations={REQUIRED: "rack"}, gpus=4),
        build_state(objects),
        policy([]),
    )
    (main,) = d.pod_sets
    assert (main.now.fit_count, main.never.fits) == (1, True)  # type: ignore[union-attr]
    assert d.reason == "waits"


def test_allocatable_quantities_are_parsed() -> None:
    n = node("n1", {"rack": "r1"}, cpu="1500m", memory="1000Gi", gpus=8)
    n["status"]["allocatable"]["ephemeral-storage"] = "100G"
    n["status"]["allocatable"]["hugepages-2Mi"] = "0"
    (parsed,) = build_state([n]).nodes
    assert dict(parsed.allocatable) == {
        "cpu": 1500,
        "memory": 1000 * GI,
        GPU: 8,
        PODS: 110,
        "ephemeral-storage": 100 * 10**9,
        "hugepages-2Mi": 0,
    }
    assert parsed.labels == {HOST: "n1", "rack": "r1"}


def test_fractional_memory_rounds_up() -> None:
    (parsed,) = build_state([node("n1", {}, memory="1500m")]).nodes
    assert parsed.allocatable["memory"] == 2


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("cpu", "12 cores", "Node gpu-7: status.allocatable[cpu]"),
        ("memory", "12Zi", "Node gpu-7: status.allocatable[memory]"),
        (GPU, "eight", f"Node gpu-7: status.allocatable[{GPU}]"),
    ],
)
def test_malformed_node_quantity_names_the_node_and_field(field: str, value: str, path: str) -> None:
    n = node("gpu-7", {})
    n["status"]["allocatable"][field] = value
    with pytest.raises(InvalidObject) as caught:
        parse_node(n, {})
    assert str(caught.value).startswith(f"{path}: Invalid value: ")
    assert value in str(caught.value)
    state = build_state([n, node("gpu-8", {})])
    assert [x.name for x in state.nodes] == ["gpu-8"], "the bad node is left out, alone"
    (rejected,) = state.rejected
    assert (rejected.kind, rejected.name, rejected.path) == ("Node", "gpu-7", path.split(": ", 1)[1])
    assert rejected.reason.startswith("Invalid value: ") and value in rejected.reason


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda n: n["status"].update(allocatable="lots"),
            "Node gpu-7: status.allocatable: Invalid value: must be a map of strings",
        ),
        (
            lambda n: n["spec"].update(taints="none"),
            "Node gpu-7: spec.taints: Invalid value: must be a list of objects",
        ),
        (
            lambda n: n["status"].update(conditions=["Ready"]),
            "Node gpu-7: status.conditions: Invalid value: must be a list of objects",
        ),
        (
            lambda n: n["metadata"].update(labels=["a"]),
            "Node gpu-7: metadata.labels: Invalid value: must be a map of strings",
        ),
    ],
)
def test_malformed_node_shapes_name_the_field(mutate: Any, message: str) -> None:
    n = node("gpu-7", {})
    mutate(n)
    with pytest.raises(InvalidObject) as caught:
        parse_node(n, {})
    assert str(caught.value) == message
    assert str(only_rejected([n])) == message.replace("Node gpu-7", 'Node "gpu-7"')


def test_malformed_pod_in_the_dump_names_the_pod() -> None:
    pod = running_pod("p", "n1", gpus=1)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "a lot"
    with pytest.raises(InvalidObject) as caught:
        pod_usage(pod)
    assert str(caught.value).startswith("Pod default/p: spec.containers[0].resources.requests.cpu")
    state = build_state([node("n1", {}), pod, running_pod("q", "n1", gpus=2)])
    assert dict(state.nodes[0].usage)[GPU] == 2, "the other pod still counts"
    (rejected,) = state.rejected
    assert (rejected.kind, rejected.namespace, rejected.name) == ("Pod", "default", "p")
    assert rejected.path == "spec.containers[0].resources.requests.cpu"


def test_readiness_cordon_and_taints() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    objects = [
        node("ready", {}),
        node("not-ready", {}, ready=False),
        node("cordoned", {}, cordoned=True, taints=[taint]),
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "no-status"}},
    ]
    nodes = {n.name: n for n in build_state(objects).nodes}
    assert [n for n in nodes] == ["cordoned", "no-status", "not-ready", "ready"]  # sorted by name
    assert (nodes["ready"].ready, nodes["ready"].unschedulable, nodes["ready"].schedulable_now) == (
        True,
        False,
        True,
    )
    assert (nodes["not-ready"].ready, nodes["not-ready"].schedulable_now) == (False, False)
    assert (nodes["cordoned"].ready, nodes["cordoned"].unschedulable, nodes["cordoned"].schedulable_now) == (
        True,
        True,
        False,
    )
    assert nodes["cordoned"].taints == (Taint("nvidia.com/gpu", "NoSchedule", "present"),)
    assert (nodes["no-status"].ready, dict(nodes["no-status"].allocatable)) == (False, {})


def test_ready_condition_must_be_true() -> None:
    n = node("n1", {})
    n["status"]["conditions"] = [
        {"type": "MemoryPressure", "status": "True"},
        {"type": "Ready", "status": "Unknown"},
    ]
    (parsed,) = build_state([n]).nodes
    assert not parsed.ready


def test_kueue_objects_and_namespaces() -> None:
    objects = [
        *kueue_objects(flavors={"a": {"pool": "a"}, "plain": {}}),
        namespace_object("team", {"tier": "prod"}),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ignored"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team"},
        },
    ]
    objects[2]["spec"].pop("topologyName")  # "plain" is not a TAS flavor
    objects[2]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    state = build_state(objects, generation=7)
    assert state.generation == 7
    assert state.topologies == {"topo": Topology("topo", ("block", "rack", HOST))}
    assert state.flavors["a"] == Flavor("a", {"pool": "a"}, (), "topo")
    plain = state.flavors["plain"]
    assert (plain.topology_name, [t.operator for t in plain.tolerations]) == (None, ["Exists"])
    cq = state.cluster_queues["cq"]
    assert isinstance(cq, ClusterQueue) and (cq.name, cq.flavors, cq.cohort) == ("cq", ("a", "plain"), None)
    assert [f.name for f in cq.groups[0].flavors] == ["a", "plain"] and cq.groups[0].covered[-1] == GPU
    assert state.local_queues == {("team", "q"): LocalQueue("team", "q", "cq")}
    assert state.namespaces == {"team": {"tier": "prod"}}
    assert state.nodes == ()


def test_cluster_queue_lists_each_flavor_once_in_order() -> None:
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "spot"}, {"name": "on-demand"}]},
                {"coveredResources": [GPU], "flavors": [{"name": "on-demand"}, {"name": "a100"}]},
            ]
        },
    }
    assert build_state([cq]).cluster_queues["cq"].flavors == ("spot", "on-demand", "a100")


def test_trainer_runtimes_are_kept_by_kind_namespace_and_name() -> None:
    cluster_rt = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "t"},
    }
    ns_rt = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "t", "namespace": "ml"},
    }
    state = build_state([cluster_rt, ns_rt])
    assert set(state.runtimes) == {("ClusterTrainingRuntime", "", "t"), ("TrainingRuntime", "ml", "t")}


def test_malformed_kueue_objects_name_the_field() -> None:
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "t"},
        "spec": {"levels": "rack"},
    }
    expected = 'Topology "t": spec.levels: Invalid value: must be a list of objects'
    assert str(only_rejected([topology])) == expected
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": "gpu",
    }
    assert str(only_rejected([flavor])) == 'ResourceFlavor "f": spec: Invalid value: must be an object'
    state = build_state([topology, flavor, *kueue_objects(flavors={"a": {"pool": "a"}})])
    assert set(state.topologies) == {"topo"} and set(state.flavors) == {"a"}, "the good ones stay"
    assert [(r.kind, r.name) for r in state.rejected] == [("ResourceFlavor", "f"), ("Topology", "t")]


def test_sample_cluster() -> None:
    state = build_state(sample_objects())
    assert len(state.nodes) == 32
    by_name = {n.name: n for n in state.nodes}
    assert not by_name["b2-r4-h3"].ready and by_name["b2-r4-h4"].unschedulable
    assert by_name["b1-r1-h1"].usage[GPU] == 8 and by_name["b1-r2-h4"].usage[GPU] == 4
    assert by_name["b2-r1-h1"].usage[GPU] == 2 and dict(by_name["b2-r2-h1"].usage) == {}
    assert set(state.local_queues) == {("default", "tas-user-queue"), ("default", "user-queue")}
    assert state.level_has_nodes("cloud.provider.com/topology-rack")
    assert not state.level_has_nodes("cloud.provider.com/topology-zone")


def test_snapshots_are_built_once_per_flavor() -> None:
    state = build_state(sample_objects())
    flavor, topology = state.flavors["tas-flavor"], state.topologies["default"]
    assert state.flavor_snapshot(flavor, topology) is state.flavor_snapshot(flavor, topology)
    assert state.levels_snapshot("x", topology.levels) is state.levels_snapshot("x", topology.levels)
