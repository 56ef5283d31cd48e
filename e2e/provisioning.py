"""A ProvisioningRequest admission check on the e2e stack, with the harness playing the autoscaler.

The real Kueue v0.19.2 runs its provisioning controller once the ProvisioningRequest CRD is served
when it starts (``provisioning_crd_file``: the CRD of the ``k8s.io/autoscaler/cluster-autoscaler/apis``
module at the version Kueue's own go.mod pins). No cluster-autoscaler runs here: ``provision`` does
what it would — creates the Ready nodes of a new block of the flavor's pool and sets the
ProvisioningRequest's ``Accepted`` and ``Provisioned`` conditions — and Kueue then places the gang.

The world, beside the fidelity world's (`e2e.fidelity_world`):

- the pool ``prov`` (``prov-flavor``, the fidelity Topology): block ``p0`` of racks ``p0-r0`` (4
  hosts) and ``p0-r1`` (2 hosts): no block holds more than 6 eight-GPU pods today;
- ``prov-cq`` (``prov-flavor`` behind the check ``prov-check``, ProvisioningRequestConfig
  ``prov-config``) with LocalQueue ``prov-queue``;
- ``elsewhere-cq``: ``prov-flavor`` in one resource group, and the check limited by ``onFlavors``
  to ``license-flavor`` of another (a non-TAS flavor of a resource no gang here asks for): the
  TAS flavor is placed on today's nodes, as without the check; LocalQueue ``elsewhere-queue``.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from e2e.controlplane import ControlPlane, required_version
from e2e.fidelity_world import BLOCK, BYPASS_NS, GPU_ALLOCATABLE, NS, RACK, TOPOLOGY, cluster_queue, quota
from e2e.kueue import KUEUE_API_VERSION
from e2e.kueue_admission import condition_true
from e2e.kueue_source import KUEUE_TOOLS_DIR, KueueError, downloaded_module, module_source_dir
from e2e.nodes import GPU, add_node

AUTOSCALER_APIS = "k8s.io/autoscaler/cluster-autoscaler/apis"
PROV_CRD = Path("config", "crd", "autoscaling.x-k8s.io_provisioningrequests.yaml")
PROVISIONING_REQUESTS = "provisioningrequests.autoscaling.x-k8s.io"
PROV_FLAVOR, LICENSE_FLAVOR = "prov-flavor", "license-flavor"
PROV_CHECK, PROV_CONFIG = "prov-check", "prov-config"
PROV_CQ, PROV_QUEUE = "prov-cq", "prov-queue"
ELSEWHERE_CQ, ELSEWHERE_QUEUE = "elsewhere-cq", "elsewhere-queue"
LICENSE = "example.com/license"
TODAY = {"p0-r0": 4, "p0-r1": 2}  # rack -> hosts of the pool before anything is provisioned


def provisioning_crd_file() -> Path:
    """The ProvisioningRequest CRD of the autoscaler APIs module Kueue's go.mod pins."""
    version = required_version(module_source_dir() / "go.mod", AUTOSCALER_APIS)
    path = downloaded_module(AUTOSCALER_APIS, version, KUEUE_TOOLS_DIR, KueueError) / PROV_CRD
    if not path.is_file():
        raise KueueError(f"{AUTOSCALER_APIS}@{version} has no {PROV_CRD}")
    return path


def add_pool_nodes(cp: ControlPlane, racks: dict[str, int]) -> list[str]:
    """Ready 8-GPU nodes of the ``prov`` pool, ``racks[rack]`` hosts a rack (``<rack>-h<i>``)."""
    names = []
    for rack, hosts in racks.items():
        labels = {"pool": "prov", BLOCK: rack.split("-")[0], RACK: rack}
        for host in range(hosts):
            add_node(cp, f"{rack}-h{host}", labels, GPU_ALLOCATABLE)
            names.append(f"{rack}-h{host}")
    return names


def provisioning_objects() -> list[dict[str, Any]]:
    """The config, the check, both flavors, both ClusterQueues and their LocalQueues."""
    api = KUEUE_API_VERSION
    config = {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": [GPU]}
    objects: list[dict[str, Any]] = [
        _object("ProvisioningRequestConfig", PROV_CONFIG, config),
        _object(
            "AdmissionCheck",
            PROV_CHECK,
            {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": PROV_CONFIG,
                },
            },
        ),
        _object("ResourceFlavor", PROV_FLAVOR, {"nodeLabels": {"pool": "prov"}, "topologyName": TOPOLOGY}),
        _object("ResourceFlavor", LICENSE_FLAVOR, {}),
        _queue(PROV_CQ, [{"name": PROV_CHECK}]),
        _queue(ELSEWHERE_CQ, [{"name": PROV_CHECK, "onFlavors": [LICENSE_FLAVOR]}], license_group=True),
    ]
    for namespace in (NS, BYPASS_NS):
        for queue, cq in ((PROV_QUEUE, PROV_CQ), (ELSEWHERE_QUEUE, ELSEWHERE_CQ)):
            objects.append(
                {
                    "apiVersion": api,
                    "kind": "LocalQueue",
                    "metadata": {"name": queue, "namespace": namespace},
                    "spec": {"clusterQueue": cq},
                }
            )
    return objects


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _queue(name: str, checks: list[dict[str, Any]], license_group: bool = False) -> dict[str, Any]:
    """A ClusterQueue of ``prov-flavor`` with ample quota and ``checks``; ``license_group`` adds a
    resource group of ``license-flavor`` (a resource no gang here asks for)."""
    queue = cluster_queue(name, [(PROV_FLAVOR, quota("10000", "100Ti", "10000"))])
    if license_group:
        licenses = [{"name": LICENSE, "nominalQuota": "10"}]
        group = {"coveredResources": [LICENSE], "flavors": [{"name": LICENSE_FLAVOR, "resources": licenses}]}
        queue["spec"]["resourceGroups"].append(group)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": checks}
    return queue


def queues_active(cp: ControlPlane) -> bool:
    """Both ClusterQueues and the check are Active (the check needs the CRD Kueue saw at start)."""
    checks = cp.kubectl_json("get", "admissionchecks.kueue.x-k8s.io")["items"]
    queues = cp.kubectl_json("get", "clusterqueues.kueue.x-k8s.io")["items"]
    active = {item["metadata"]["name"] for item in [*checks, *queues] if condition_true(item, "Active")}
    return active >= {PROV_CHECK, PROV_CQ, ELSEWHERE_CQ}


def provisioning_requests(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cp.kubectl_json("get", PROVISIONING_REQUESTS, "-n", namespace)["items"]
    return items


def provision(cp: ControlPlane, request: dict[str, Any], racks: dict[str, int]) -> list[str]:
    """What the autoscaler does for ``request``: the nodes of ``racks``, then Accepted and
    Provisioned on the request's status (through its status subresource)."""
    nodes = add_pool_nodes(cp, racks)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    generation = request["metadata"].get("generation", 1)
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": f"played by the tasgate e2e harness ({kind})",
            "lastTransitionTime": now,
            "observedGeneration": generation,
        }
        for kind, reason in (("Accepted", "Accepted"), ("Provisioned", "Provisioned"))
    ]
    patch = json.dumps({"status": {"conditions": conditions}})
    meta = request["metadata"]
    cp.kubectl(
        "patch",
        PROVISIONING_REQUESTS,
        meta["name"],
        "-n",
        meta["namespace"],
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
    )
    return nodes
