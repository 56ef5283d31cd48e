"""``helm install --wait`` of charts/tasgate on a cluster whose pods become Ready (``make e2e-cluster``).

In ``make e2e`` nothing creates a Deployment's pods (no kube-controller-manager), so ``--wait`` could
never end there. Here kube-controller-manager runs the deployment, replicaset and resourcequota
controllers, the scheduler places the pods (the chart's preferred anti-affinity spreads them over
two kwok Nodes) and kwok marks them Running and Ready. kwok runs no container: ``--wait`` proves
the chart's objects are accepted, scheduled and rolled out, not that the image serves (``make
image`` starts the image; the e2e suite runs tasgate itself). Rollouts and drains on one and two
nodes: test_helm_rollout.py. Because those pods serve nothing, the installed webhooks refuse a Job
(failurePolicy Fail, fail closed) until ``helm uninstall`` removes them: the emergency-removal story.

The API server is configured as GKE is (gatekeeper issue #1120): pods of system-cluster-critical are
admitted only in a namespace with a ResourceQuota scoped to that class. The chart with the class and
without its quota never gets a pod; with ``priorityClassQuota.enabled`` it installs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.cluster import CONTROLLERS, Cluster, find_cluster_binaries
from e2e.controlplane import ControlPlane, find_binaries
from e2e.helm import CHART, Helm, find_helm, value_flags
from tests.e2e.install_image import IMAGE_VALUES

from .binaries import require

pytestmark = pytest.mark.e2e_cluster

NODES = ("kwok-helm-0", "kwok-helm-1")
CRITICAL = "system-cluster-critical"
# disruption-controller: a PodDisruptionBudget's allowance, without which no eviction (drain) passes.
ROLLOUT_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "resourcequota-controller",
    "disruption-controller",
)
# kube-apiserver's ResourceQuota admission as GKE configures it: the class is a limited resource.
QUOTA_ADMISSION = {
    "apiVersion": "apiserver.config.k8s.io/v1",
    "kind": "AdmissionConfiguration",
    "plugins": [
        {
            "name": "ResourceQuota",
            "configuration": {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "ResourceQuotaConfiguration",
                "limitedResources": [
                    {
                        "resource": "pods",
                        "matchScopes": [
                            {"scopeName": "PriorityClass", "operator": "In", "values": [CRITICAL]}
                        ],
                    }
                ],
            },
        }
    ],
}


class RolloutCluster(Cluster):
    """The suite's Cluster with the controllers a Deployment and a ResourceQuota need as well."""

    def _kcm_argv(self) -> list[str]:
        controllers = ",".join((*CONTROLLERS, *ROLLOUT_CONTROLLERS))
        return [
            a if not a.startswith("--controllers=") else f"--controllers={controllers}"
            for a in super()._kcm_argv()
        ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Helm]]:
    require(find_binaries, find_cluster_binaries, find_helm)
    config = tmp_path_factory.mktemp("admission") / "admission.yaml"
    config.write_text(yaml.safe_dump(QUOTA_ADMISSION))
    with (
        ControlPlane(apiserver_args=[f"--admission-control-config-file={config}"]) as cp,
        RolloutCluster(cp) as running,
    ):
        for name in NODES:
            running.add_node(name)
        running.wait_nodes_ready(NODES)
        yield cp, Helm(tmp_path_factory.mktemp("helm"), kubeconfig=cp.kubeconfig)


def create_job(cp: ControlPlane, name: str) -> tuple[int, str]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.example/c"}],
                }
            },
        },
    }
    done = cp.kubectl("create", "-f", "-", input=json.dumps(job), check=False)
    return done.returncode, done.stderr


def test_without_its_quota_the_critical_class_gets_no_pod(cluster: tuple[ControlPlane, Helm]) -> None:
    """The caveat itself: on such a cluster the pods are refused at the first install."""
    cp, helm = cluster
    ns = "tasgate-noquota"
    flags = [
        "-n",
        ns,
        "--create-namespace",
        *value_flags(IMAGE_VALUES),
        "--set",
        f"priorityClassName={CRITICAL}",
        "--set",
        "webhooks.enabled=false",
    ]
    failed = helm.run("install", "tasgate", str(CHART), *flags, "--wait", "--timeout=25s", check=False)
    try:
        assert failed.returncode != 0, failed.stdout
        events = cp.kubectl("get", "events", "-n", ns, "-o", "json").stdout
        assert "insufficient quota to match these scopes" in events, events[-2000:]
    finally:
        helm.run("uninstall", "tasgate", "-n", ns, "--wait")


def test_helm_install_waits_for_the_rollout_and_uninstall_restores_admission(
    cluster: tuple[ControlPlane, Helm], tmp_path: Path
) -> None:
    cp, helm = cluster
    ns = "tasgate-system"
    values = [
        *value_flags(IMAGE_VALUES),
        "--set",
        f"priorityClassName={CRITICAL}",
        "--set",
        "priorityClassQuota.enabled=true",
    ]
    installed = helm.run(
        "install", "tasgate", str(CHART), "-n", ns, "--create-namespace", *values, "--wait", "--timeout=120s"
    )
    try:
        assert "STATUS: deployed" in installed.stdout, installed.stdout
        deployment = cp.kubectl_json("get", "deployment", "tasgate", "-n", ns)
        assert deployment["status"].get("readyReplicas") == 2, deployment["status"]
        pods = cp.kubectl_json("get", "pods", "-n", ns, "-l", "app.kubernetes.io/name=tasgate")["items"]
        assert {p["spec"]["nodeName"] for p in pods} == set(NODES), "preferred anti-affinity: one per node"
        assert {p["spec"]["priorityClassName"] for p in pods} == {CRITICAL}
        assert {p["spec"]["priority"] for p in pods} == {2000000000}
        # Registered and failing closed: the API server cannot reach pods that kwok only pretends to run.
        code, stderr = create_job(cp, "while-installed")
        assert code != 0 and 'failed calling webhook "mutate.tasgate.io"' in stderr, stderr
        upgraded = helm.run(
            "upgrade", "tasgate", str(CHART), "-n", ns, *values, "--set", "replicas=1", "--wait"
        )
        assert "STATUS: deployed" in upgraded.stdout
        assert cp.kubectl_json("get", "deployment", "tasgate", "-n", ns)["status"].get("readyReplicas") == 1
    finally:
        helm.run("uninstall", "tasgate", "-n", ns, "--wait")
    code, stderr = create_job(cp, "after-uninstall")
    assert code == 0, stderr
