"""Kubernetes v1.37.0's native gang APIs, served and scheduled for real (``bash e2e/build-binaries.sh
native137``): the groundwork of the v1.37 native table, whatever ``$TASGATE_NATIVE_K8S`` says.

kube-apiserver, kube-controller-manager and the upstream kube-scheduler v1.37.0 run with the gates
and served versions of e2e/native_k8s.py's ``V1_37`` (GenericWorkload, TopologyAwareWorkloadScheduling,
WorkloadWithJob, CompositePodGroup, PodGroupPreemptionPolicy; ``scheduling.k8s.io/v1beta1`` and
``v1alpha3``), kwok playing the kubelets of e2e/native_scenario.py's 12 nodes with their blocker
pods (racks 16/20/12/22 GPUs free, blocks 36/34). It checks that:

- the API server is v1.37.0 and serves Workload and PodGroup in ``v1beta1``, CompositePodGroup (and
  Workload, PodGroup) in ``v1alpha3``, and no longer ``v1alpha2``;
- a hand-written v1beta1 Workload + PodGroup (gang 4, rack key) and its 4 pods: the scheduler binds
  all four in one rack and writes ``PodGroupInitiallyScheduled=True``;
- an Indexed Job asking for a gang in ``spec.scheduling``: the Job controller makes the v1beta1
  Workload (minCount = parallelism) and PodGroup (``spec.workloadRef``), and the pods are bound;
- a CompositePodGroup (gang of 2 groups, block key) over two PodGroups (rack keys): every pod bound,
  all in one block, each group in one rack;
- pods whose priority is not their PodGroup's (here: PriorityClass ``first`` on the pods, none on
  the PodGroup) are refused as a group: ``validatePodGroup``'s SchedulerError, no pod bound;
- version skew: a ``v1alpha2`` Workload a v1.36.5 API server stored in etcd is not served by v1.37.0
  (no such version) and is no Workload of its v1beta1 list either.

Missing binaries fail the module with the build command (never a skip).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from e2e.controlplane import ControlPlane, KubectlError, find_binaries
from e2e.kueue_scenario import BLOCK, RACK
from e2e.native import (
    COMPOSITE_POD_GROUPS,
    WORKLOADS,
    find_control_plane_binaries,
    find_native_binaries,
)
from e2e.native_k8s import V1_36, V1_37
from e2e.native_pods import Settled, bound
from e2e.native_scenario import (
    Child,
    Shape,
    child_group_name,
    composite_group,
    composite_name,
    group_name,
    hand_written,
    indexed_job,
    nodes,
    workload_and_group,
)
from e2e.native_world import NativeWorld, wait_until
from tests.e2e_cluster.binaries import require

pytestmark = pytest.mark.e2e_native

LABELS = nodes()


def _require_v137() -> None:
    require(lambda: find_control_plane_binaries(V1_37), lambda: find_native_binaries(V1_37))


def domains(pods: list[dict[str, Any]], key: str) -> set[str]:
    return {LABELS[p["spec"]["nodeName"]][key] for p in pods if bound(p)}


def assert_scheduled(state: Settled, count: int) -> None:
    """Every one of ``count`` pods bound and the v1.37 condition True (never the v1.36 name)."""
    assert len(state.bound_nodes) == count, f"bound {state.bound_nodes}, condition {state.condition}"
    condition = state.condition or {}
    assert condition.get("type") == V1_37.scheduled_condition == "PodGroupInitiallyScheduled"
    assert (condition.get("status"), condition.get("reason")) == ("True", "Scheduled"), condition


def test_versions_and_served_apis(v137: NativeWorld) -> None:
    cp = v137.cp
    server = json.loads(cp.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == "v1.37.0"
    scheduler = subprocess.run(
        [str(v137.cluster.native.kube_scheduler), "--version"], capture_output=True, text=True, check=True
    )
    assert scheduler.stdout.strip() == "Kubernetes v1.37.0"

    group = json.loads(cp.kubectl("get", "--raw", "/apis/scheduling.k8s.io").stdout)
    versions = {v["version"] for v in group["versions"]}
    assert {"v1", "v1beta1", "v1alpha3"} <= versions and "v1alpha2" not in versions, versions
    assert group["preferredVersion"]["version"] == "v1"  # PriorityClass; Workload's preferred is v1beta1

    def resources(version: str) -> set[str]:
        listed = json.loads(cp.kubectl("get", "--raw", f"/apis/scheduling.k8s.io/{version}").stdout)
        return {r["name"] for r in listed["resources"]}

    assert resources("v1beta1") == {"workloads", "podgroups", "podgroups/status"}
    assert resources("v1alpha3") == {
        "workloads",
        "podgroups",
        "podgroups/status",
        "compositepodgroups",
        "compositepodgroups/status",
    }
    status, _ = cp.get_raw("/apis/scheduling.k8s.io/v1alpha2")
    assert status == 404


def test_v1beta1_gang_bound_in_one_rack(v137: NativeWorld) -> None:
    ns = "smoke-gang"
    v137.cp.kubectl("create", "namespace", ns)
    v137.create_group(hand_written("rack4", ns, 4, 4, 4, RACK, k8s=V1_37))
    state = v137.settle(ns, group_name("rack4"), 4)
    assert_scheduled(state, 4)
    assert len(domains(state.pods, RACK)) == 1, state.bound_nodes
    spec = state.pod_group["spec"]
    assert state.pod_group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert spec["workloadRef"] == {"workloadName": "rack4", "templateName": "workers"}
    assert spec["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    # The Priority admission plugin resolves every PodGroup's priority (and, with
    # PodGroupPreemptionPolicy, its preemptionPolicy) as it does a Pod's.
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority", spec


def test_job_gang_made_by_the_job_controller(v137: NativeWorld) -> None:
    ns = "smoke-job"
    v137.cp.kubectl("create", "namespace", ns)
    v137.create([indexed_job("trainer", ns, 3, 4, k8s=V1_37)])
    group = v137.job_pod_group(ns, "trainer")
    state = v137.settle(ns, group, 3)
    assert_scheduled(state, 3)
    (workload,) = v137.items(WORKLOADS, ns)
    assert workload["apiVersion"] == "scheduling.k8s.io/v1beta1"
    (template,) = workload["spec"]["podGroupTemplates"]
    assert template["name"] == "trainer-pgt-0"
    assert template["schedulingPolicy"] == {"gang": {"minCount": 3}}  # defaulted to parallelism
    assert state.pod_group["spec"]["workloadRef"] == {
        "workloadName": workload["metadata"]["name"],
        "templateName": "trainer-pgt-0",
    }
    owners = {r["kind"] for r in state.pod_group["metadata"]["ownerReferences"]}
    assert owners == {"Job", "Workload"}


def test_composite_pod_group_bound_in_one_block(v137: NativeWorld) -> None:
    ns = "smoke-composite"
    v137.cp.kubectl("create", "namespace", ns)
    children = (Child("leader", 1, 4, 1, RACK), Child("workers", 4, 4, 4, RACK))
    v137.create_group(composite_group("cpg", ns, children, 2, BLOCK, k8s=V1_37))
    bound_pods: list[dict[str, Any]] = []
    for child in children:
        state = v137.settle(ns, child_group_name("cpg", child.template), child.pods)
        assert_scheduled(state, child.pods)
        assert state.pod_group["spec"]["parentCompositePodGroupName"] == composite_name("cpg")
        assert len(domains(state.pods, RACK)) == 1, (child.template, state.bound_nodes)
        bound_pods += state.pods
    assert len(domains(bound_pods, BLOCK)) == 1, sorted(p["spec"]["nodeName"] for p in bound_pods)
    composite = v137.cp.kubectl_json("get", COMPOSITE_POD_GROUPS, composite_name("cpg"), "-n", ns)
    assert composite["apiVersion"] == "scheduling.k8s.io/v1alpha3"
    assert composite["spec"]["schedulingPolicy"] == {"gang": {"minGroupCount": 2}}
    assert composite["spec"]["disruptionMode"] == {"single": {}}  # the API's default


def test_pods_of_another_priority_than_their_group_are_refused(v137: NativeWorld) -> None:
    ns = "smoke-priority"
    v137.cp.kubectl("create", "namespace", ns)
    v137.create_group(hand_written("prio", ns, 2, Shape(4, priority_class="first"), 2, RACK, k8s=V1_37))
    seen: list[dict[str, Any]] = []

    def condition_written() -> bool:
        seen[:] = [Settled(v137.pod_group(ns, group_name("prio")), []).condition or {}]
        return bool(seen[0])

    wait_until("the scheduler's condition on PodGroup smoke-priority/prio-workers", condition_written)
    condition = seen[0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodGroupInitiallyScheduled",
        "False",
        "SchedulerError",
    ), condition
    assert "should have the same priority as the pod group's priority, got 1000 and 0" in condition["message"]
    assert not [p for p in v137.pods(ns) if bound(p)]


def test_v1alpha2_objects_are_not_carried_over() -> None:
    """A v1.36.5 API server stores a v1alpha2 Workload; the same etcd under v1.37.0 serves no
    v1alpha2, cannot decode the stored object (no v1alpha2 in its scheme: "corrupt object"), and so
    fails every get, list and watch of Workloads until it is deleted with the unsafe option
    (``ignoreStoreReadErrorWithClusterBreakingPotential``; AllowUnsafeMalformedObjectDeletion is
    beta and on in v1.37)."""
    _require_v137()
    require(find_binaries)
    v137_binaries = find_control_plane_binaries(V1_37)
    undecodable = 'no kind \\"Workload\\" is registered for version \\"scheduling.k8s.io/v1alpha2\\"'
    with ControlPlane(apiserver_args=V1_36.apiserver_args) as cp:
        cp.kubectl("create", "namespace", "skew")
        (workload, _) = workload_and_group("old", "skew", 2, RACK, k8s=V1_36)
        cp.kubectl("create", "-f", "-", input=json.dumps(workload))
        assert cp.get_raw("/apis/scheduling.k8s.io/v1alpha2/namespaces/skew/workloads/old")[0] == 200

        cp.binaries = v137_binaries  # the upgrade: same etcd, same port, v1.37.0's kube-apiserver
        cp.restart_apiserver(apiserver_args=V1_37.apiserver_args)
        old = "/apis/scheduling.k8s.io/v1beta1/namespaces/skew/workloads/old"
        assert cp.get_raw("/apis/scheduling.k8s.io/v1alpha2/namespaces/skew/workloads/old")[0] == 404
        status, body = cp.get_raw(old)
        assert status == 500 and "corrupt object" in body and undecodable in body, (status, body[:600])
        status, body = cp.get_raw("/apis/scheduling.k8s.io/v1beta1/namespaces/skew/workloads")
        assert status != 200 and "corrupt object" in body, (status, body[:600])  # 429: cache re-initialising
        with pytest.raises(KubectlError, match="corrupt object"):
            cp.kubectl("get", "workloads.scheduling.k8s.io", "-n", "skew")

        unsafe: dict[str, object] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        unsafe["ignoreStoreReadErrorWithClusterBreakingPotential"] = True
        cp.kubectl("delete", "--raw", old, "-f", "-", input=json.dumps(unsafe))

        def listed_empty() -> bool:
            status, body = cp.get_raw("/apis/scheduling.k8s.io/v1beta1/namespaces/skew/workloads")
            return status == 200 and json.loads(body)["items"] == []

        wait_until("the Workload list served again after the unsafe delete", listed_empty)
